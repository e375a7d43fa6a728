"""``swing-mpi calibrate`` under mpiexec (tiny sizes and rounds), and the same choice on every rank.

mpiexec -n 4 python -m mpi4py -m pytest --with-mpi tests/mpi/test_calibrate.py
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from swing_mpi import config

pytestmark = pytest.mark.mpi


def _all_equal(comm, value) -> bool:
    values = comm.allgather(value)
    return all(v == values[0] for v in values)


@pytest.mark.mpi(min_size=2)
def test_calibrate_writes_a_decision_table_that_auto_uses(mpi_tmp_path, capsys, monkeypatch):
    from mpi4py import MPI

    from swing_mpi import calibrate
    from swing_mpi.api import allreduce, resolve
    from swing_mpi.choose import candidates, explain
    from swing_mpi.state import comm_state
    from swing_mpi.tuning import Tuning, load_tuning

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    out = mpi_tmp_path / "tuning.json"
    rc = calibrate.main(["--sizes", "8,4K", "--iters", "2", "--warmup", "0", "--quiet", "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0
    comm.Barrier()
    if comm.Get_rank() == 0:
        assert "auto/fastest" in printed and "# decision table" in printed and f"wrote {out}" in printed
        assert "network:" in printed and "float64 SUM" in printed and "int64 SUM" in printed
    else:
        assert printed == ""
    data = json.loads(out.read_text())
    assert data["version"] == 2 and data["p"] == p and data["dims"] == [p]
    assert data["network"] in ("torus", "flat")
    assert {t["exact"] for t in data["tables"]} == {True, False}
    inexact = next(t for t in data["tables"] if not t["exact"])
    assert inexact["sizes"] == [8, 4096] and inexact["p"] == p
    assert set(inexact["times_s"]) == set(candidates((p,), exact=False, commutative=True))
    assert all(v is None or v > 0 for ts in inexact["times_s"].values() for v in ts)
    t = load_tuning(out)
    assert isinstance(t, Tuning) and t.table_for(p, (p,), exact=False, commutative=True) is not None
    assert _all_equal(comm, t)
    # auto on a new communicator reads the file (rank 0) and decides from the table, alike on every rank
    monkeypatch.setenv("SWING_MPI_TUNING", str(out))
    config.rc.reload()
    dup = comm.Dup()
    try:
        tuning = comm_state(dup).tuning
        assert tuning == t
        for n in (8, 1024, 4096, 1 << 20):
            pick = resolve("auto", p, n, MPI.SUM, MPI.DOUBLE, dims=(p,), count=n // 8, tuning=tuning)
            assert _all_equal(comm, pick)
            assert pick == explain(p, (p,), n, exact=False, tuning=tuning).pick
            assert explain(p, (p,), n, exact=False, tuning=tuning).source == "measured"
        import numpy as np

        x = np.arange(512, dtype=np.float64) + comm.Get_rank()
        y = np.empty_like(x)
        allreduce(dup, x, y, MPI.SUM, algorithm="auto")
        ref = np.empty_like(x)
        comm.Allreduce(x, ref, op=MPI.SUM)
        assert np.allclose(y, ref)
    finally:
        dup.Free()


@pytest.mark.mpi(min_size=2)
def test_dry_run_writes_nothing(mpi_tmp_path, capsys):
    from mpi4py import MPI

    from swing_mpi import calibrate

    comm = MPI.COMM_WORLD
    out = mpi_tmp_path / "dry.json"
    rc = calibrate.main(["--sizes", "8", "--iters", "1", "--warmup", "0", "--quiet", "--no-native", "--no-exact",
                         "--algorithms", "ring,recdoub", "--dry-run", "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0
    comm.Barrier()
    assert not out.exists()
    if comm.Get_rank() == 0:
        assert "nothing written" in printed and "native_below_bytes = none" in printed
        head = next(line for line in printed.splitlines() if line.startswith("|") and "size" in line)
        assert "ring" in head and "recdoub" in head and "swing-bw" not in head


@pytest.mark.mpi(min_size=2)
def test_bad_arguments_fail_on_every_rank(capsys, monkeypatch):
    from swing_mpi import calibrate

    assert calibrate.main(["--sizes", "8", "--algorithms", "nope"]) == 2
    assert calibrate.main(["--sizes", "8", "--settle", "-1"]) == 2
    for bad in (["--point-time", "0"], ["--drop", "nan"], ["--drop", "inf"], ["--warmup", "-1"]):
        assert calibrate.main(["--sizes", "8", *bad]) == 2, bad
    for bad in (["--point-time", "nan"], ["--point-time", "1 parsec"]):  # refused by the parser, on every rank
        with pytest.raises(SystemExit) as e:
            calibrate.main(["--sizes", "8", *bad])
        assert e.value.code == 2, bad
    monkeypatch.setenv("SWING_MPI_NETWORK", "hypercube")
    config.rc.reload()
    assert calibrate.main(["--sizes", "8"]) == 2


@pytest.mark.mpi(min_size=2)
def test_calibrate_function_agrees_on_all_ranks():
    from mpi4py import MPI

    from swing_mpi.calibrate import calibrate

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    tuning, fit, m = calibrate(comm, sizes=[8, 64 << 10, 256 << 10, 1 << 20], dims=(p,), iters=2, warmup=0,
                               algorithms=["ring", "swing-lat"], native=False, exact=False, drop=1.5,
                               progress=False)
    assert [s.name for s in m.series] == ["swing-lat/float64", "ring/float64"]
    assert _all_equal(comm, (tuning, m.medians))
    for ts in m.medians.values():  # once dropped, never measured again
        assert ts[0] is not None and all(t is None for t in ts[next((i for i, t in enumerate(ts) if t is None),
                                                                    len(ts)):])
    assert all(t is not None for t in m.medians["ring/float64"]) or m.medians["swing-lat/float64"][-1] is not None
    assert fit.network in ("torus", "flat") and math.isfinite(fit.rms[fit.network])


@pytest.mark.mpi(min_size=2)
def test_close_contenders_get_rounds_of_their_own():
    """A time cap that allows one round: the candidates near the fastest get more, the others keep one.

    Those timed once between 25 % and 2x slower than their table's fastest get a second call first, and
    race on their better call (one slow call must not keep a candidate out).
    """
    from mpi4py import MPI

    from swing_mpi.calibrate import CONFIRM_WITHIN, measure, series_for, table_groups
    from swing_mpi.choose import CLOSE_FACTOR

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    # float64 and int64 series: each decision table runs its own race (swing-lat has an exact form)
    series = series_for((p,), native=True, exact=True, algorithms=["ring", "recdoub", "swing-bw", "swing-lat"])
    assert any(s.exact for s in series)
    groups = [[series[j].name for j in g] for g in table_groups(series)]
    m = measure(comm, [8, 4096, 64 << 10], series, dims=(p,), iters=10, warmup=1, point_time=1e-9,
                contend_floor=0.0, progress=False)
    assert _all_equal(comm, m.rounds)
    for i in range(len(m.sizes)):
        rounds = {s.name: m.rounds[s.name][i] for s in series}
        first = {k: v[0] for k, v in rounds.items()}
        confirm = set()
        for g in groups:
            lead = min(first[k] for k in g)
            confirm.update(k for k in g if lead * CLOSE_FACTOR < first[k] <= lead * CONFIRM_WITHIN)
        basis = {k: min(v[:2]) if k in confirm else v[0] for k, v in rounds.items()}
        racing = set()
        for g in groups:
            lead = min(basis[k] for k in g)
            close = [k for k in g if basis[k] <= lead * CLOSE_FACTOR]
            if len(close) > 1:
                racing.update(close)
        for k, v in rounds.items():
            # one round for everyone (the cap), a second call for the ones confirmed, and one more for each
            # contender of a table with several
            assert len(v) == 1 + (k in confirm) + (k in racing), (m.sizes[i], k, v, groups, confirm, racing)
            assert m.medians[k][i] == pytest.approx(float(np.median(v)))


@pytest.mark.mpi(min_size=2)
def test_a_candidate_is_dropped_on_two_calls_and_its_best_one(monkeypatch):
    """One slow call must not end a candidate's measuring: one with a single sample gets a second first.

    ``beaten`` is replaced by "slower than the fastest at all", so every candidate but the fastest is up
    for dropping at the first size; no contender rounds (``contend_time`` 0), one round per size.
    """
    from mpi4py import MPI

    import swing_mpi.calibrate as cal
    import swing_mpi.calibrate.measuring  # noqa: F401 (cal.measuring)

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    monkeypatch.setattr(cal.measuring, "beaten", lambda before, now, **kw: now[0] > 1.0)
    # no second calls before the races (to_confirm): those would move the medians the drop judges against
    monkeypatch.setattr(cal.measuring, "to_confirm", lambda groups, samples, **kw: [])
    series = cal.series_for((p,), native=True, algorithms=["ring", "recdoub", "swing-bw"])
    m = cal.measure(comm, [4096, 64 << 10], series, dims=(p,), iters=1, warmup=1, point_time=1e-9,
                    contend_time=0.0, contend_floor=0.0, progress=False)
    assert _all_equal(comm, m.rounds)
    first = {s.name: m.rounds[s.name][0] for s in series}
    best = min(v[0] for v in first.values())  # the round's fastest, before any second call
    for k, v in first.items():
        assert m.medians[k][0] == pytest.approx(float(np.median(v)))
        # the fastest kept its one call; every other got a second before being judged
        assert len(v) == (1 if v[0] == best else 2), (k, v)
        # judged on its best call: dropped (not run at the last size) exactly when that is slower than the fastest
        assert len(m.rounds[k][1]) == (0 if min(v) > best else 1), (k, v, m.rounds[k][1])


@pytest.mark.mpi(min_size=2)
def test_tuning_for_comm_equal_on_all_ranks(mpi_tmp_path, monkeypatch):
    """Only rank 0's file and environment count: other ranks point at a broken file and another network."""
    import warnings

    from mpi4py import MPI

    from swing_mpi.choose import choose
    from swing_mpi.tuning import DEFAULT_TUNING, DecisionTable, Tuning, save_tuning, tuning_for_comm

    comm = MPI.COMM_WORLD
    rank, p = comm.Get_rank(), comm.Get_size()
    good = mpi_tmp_path / "good.json"
    bad = mpi_tmp_path / f"bad{rank}.json"
    table = DecisionTable(p=p, dims=(p,), exact=False, sizes=(8, 1 << 20),
                          times=(("ring", (1e-5, 1e-3)), ("recdoub", (2e-6, 5e-3))))
    if rank == 0:
        save_tuning(Tuning(3.25e-5, 1.5e-10, 2.5e-10, native_below_bytes=512, network="torus", tables=(table,),
                           source="t"), good)
    bad.write_text("{broken")
    comm.Barrier()
    monkeypatch.setenv("SWING_MPI_TUNING", str(good if rank == 0 else bad))
    config.rc.reload()
    if rank:
        monkeypatch.setenv("SWING_MPI_NETWORK", "flat")
        config.rc.reload()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = tuning_for_comm(comm)
    assert (t.alpha, t.native_below_bytes, t.network, t.tables) == (3.25e-5, 512, "torus", (table,))
    assert _all_equal(comm, t)
    picks = [choose(p, (p,), n // 8, 8, exact=False, commutative=True, tuning=t) for n in (8, 1 << 16, 1 << 20)]
    assert _all_equal(comm, picks) and picks[0] == "recdoub" and picks[-1] == "ring"
    sub = comm.Split(rank % 2, rank)
    try:
        if rank % 2:
            monkeypatch.setenv("SWING_MPI_TUNING", "default")
            config.rc.reload()
            monkeypatch.delenv("SWING_MPI_NETWORK")
            config.rc.reload()
        ts = tuning_for_comm(sub)
        assert ts == (t if rank % 2 == 0 else DEFAULT_TUNING)
        assert _all_equal(sub, ts)
    finally:
        sub.Free()
    comm.Barrier()


@pytest.mark.mpi(min_size=2)
def test_bad_network_on_rank_0_raises_on_every_rank(monkeypatch):
    from mpi4py import MPI

    from swing_mpi.tuning import tuning_for_comm

    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0:
        monkeypatch.setenv("SWING_MPI_NETWORK", "bus")
        config.rc.reload()
    else:
        monkeypatch.delenv("SWING_MPI_NETWORK", raising=False)
        config.rc.reload()
    with pytest.raises(ValueError, match="expected one of: torus, flat"):
        tuning_for_comm(comm)
    comm.Barrier()
