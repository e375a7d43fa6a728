"""``swing-mpi calibrate`` under mpiexec (tiny sizes and iterations), and tuning_for_comm.

mpiexec -n 4 python -m pytest --with-mpi tests/mpi/test_calibrate.py
"""

from __future__ import annotations

import json
import math

import pytest

pytestmark = pytest.mark.mpi


def _all_equal(comm, value) -> bool:
    values = comm.allgather(value)
    return all(v == values[0] for v in values)


@pytest.mark.mpi(min_size=2)
def test_calibrate_writes_a_tuning_that_loads(mpi_tmp_path, capsys):
    from mpi4py import MPI

    from swing_mpi import calibrate
    from swing_mpi.choose import Tuning, load_tuning

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    out = mpi_tmp_path / "tuning.json"
    rc = calibrate.main(["--sizes", "8,4K", "--iters", "2", "--warmup", "1", "--quiet", "--output", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0
    comm.Barrier()
    if comm.Get_rank() == 0:
        assert "alpha =" in printed and "fit quality" in printed and f"wrote {out}" in printed
        assert "| float64 SUM" in printed
    else:
        assert printed == ""
    data = json.loads(out.read_text())
    assert data["version"] == 1 and data["p"] == p and data["dims"] == [p]
    for k in ("alpha", "beta", "gamma"):
        assert isinstance(data[k], float) and math.isfinite(data[k]) and data[k] >= 0
    assert data["alpha"] + data["beta"] + data["gamma"] > 0
    assert data["native_below_bytes"] is None or data["native_below_bytes"] in (4096, 4097)
    assert {(m["nbytes"], m["series"]) for m in data["measured"]} == {
        (n, s) for n in (8, 4096) for s in ("swing-lat/int64", "swing-lat/float64", "swing-bw/float64",
                                            "native/float64")}
    t = load_tuning(out)
    assert isinstance(t, Tuning) and t.alpha == data["alpha"] and t.source == str(out)
    assert _all_equal(comm, (t.alpha, t.beta, t.gamma, t.native_below_bytes))


@pytest.mark.mpi(min_size=2)
def test_dry_run_writes_nothing(mpi_tmp_path, capsys):
    from mpi4py import MPI

    from swing_mpi import calibrate

    comm = MPI.COMM_WORLD
    out = mpi_tmp_path / "dry.json"
    rc = calibrate.main(["--sizes", "8", "--iters", "1", "--warmup", "0", "--quiet", "--no-native",
                         "--dry-run", "--output", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0
    comm.Barrier()
    assert not out.exists()
    if comm.Get_rank() == 0:
        assert "nothing written" in printed and "native_below_bytes = none" in printed


@pytest.mark.mpi(min_size=2)
def test_calibrate_function_same_on_all_ranks():
    from mpi4py import MPI

    from swing_mpi.calibrate import calibrate

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    tuning, fit, records = calibrate(comm, sizes=[8, 2048], dims=(p,), iters=2, warmup=0, progress=False)
    assert len(records) == 2 * 4 and len(fit.points) == 2 * 3
    assert all(r["median_s"] > 0 for r in records)
    assert _all_equal(comm, (tuning.alpha, tuning.beta, tuning.gamma, tuning.native_below_bytes))


@pytest.mark.mpi(min_size=2)
def test_tuning_for_comm_equal_on_all_ranks(mpi_tmp_path, monkeypatch):
    """Only rank 0's file counts: other ranks point at a broken one, and still agree (no warning)."""
    import warnings

    from mpi4py import MPI

    from swing_mpi.choose import DEFAULT_TUNING, Tuning, save_tuning, tuning_for_comm

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    good = mpi_tmp_path / "good.json"
    bad = mpi_tmp_path / f"bad{rank}.json"
    if rank == 0:
        save_tuning(Tuning(3.25e-5, 1.5e-10, 2.5e-10, 512, "t"), good)
    bad.write_text("{broken")
    comm.Barrier()
    monkeypatch.setenv("SWING_MPI_TUNING", str(good if rank == 0 else bad))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = tuning_for_comm(comm)
    assert (t.alpha, t.beta, t.gamma, t.native_below_bytes) == (3.25e-5, 1.5e-10, 2.5e-10, 512)
    assert t.source == str(good)
    assert _all_equal(comm, t)
    # on a sub-communicator too (rank 0 of the split reads; the others follow it)
    sub = comm.Split(rank % 2, rank)
    try:
        if rank % 2:
            monkeypatch.setenv("SWING_MPI_TUNING", "default")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ts = tuning_for_comm(sub)
        expected = t if rank % 2 == 0 else DEFAULT_TUNING
        assert ts == expected
        assert _all_equal(sub, ts)
    finally:
        sub.Free()
    comm.Barrier()
