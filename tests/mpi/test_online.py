"""``auto``'s trial of close contenders on a launch's first calls (swing_mpi.online), under mpiexec.

mpiexec -n 4 python -m mpi4py -m pytest --with-mpi tests/mpi/test_online.py

The times a trial sees are made up here (a clock that each run advances by a
set amount per algorithm), so what it must settle on is known; the data still
moves for real and is checked against MPI_Allreduce on every call.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi
from swing_mpi import api, choose, config, native, online, pipeline
from swing_mpi.request import Request
from swing_mpi.state import comm_state
from swing_mpi.tuning import DecisionTable, Tuning, save_tuning

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()
N = 1000  # float64 elements: 8000 B, between the table's two sizes


def _same_everywhere(comm, value) -> bool:
    values = comm.allgather(value)
    return all(v == values[0] for v in values)


@pytest.fixture
def tried_comm(mpi_tmp_path, monkeypatch):
    """Yield a new communicator whose tuning's table has three close contenders: ring (the pick), recdoub, native."""
    table = DecisionTable(p=P, dims=(P,), exact=False, sizes=(8, 1 << 20),
                          times=(("ring", (1.0e-2, 1.0e-1)), ("recdoub", (1.1e-2, 1.1e-1)),
                                 ("native", (1.2e-2, 1.2e-1)), ("bucket", (2e-2, 2e-1))),
                          dtype="float64", op="sum")
    path = mpi_tmp_path / "tuning.json"
    if R == 0:
        save_tuning(Tuning(1e-5, 1e-9, 1e-10, native_below_bytes=None, network="flat", tables=(table,),
                           source="test"), path)
    WORLD.Barrier()
    monkeypatch.setenv("SWING_MPI_TUNING", str(path))
    config.rc.reload()
    monkeypatch.delenv("SWING_MPI_TRIAL", raising=False)
    config.rc.reload()
    comm = WORLD.Dup()
    comm_state(comm)  # reads the tuning now, while the variable is set
    yield comm
    comm.Free()


class _Ran(list):
    """The names a trial ran, in order; ``full``: those that took the full path (not the core's record)."""

    full: list[str]


def _fake_clock(monkeypatch, seconds):
    """Make every run advance the clock the trial reads by ``seconds[name]``; return the names run."""
    ran = _Ran()
    ran.full = []
    clock = [0.0]
    real = pipeline._run
    real_record = pipeline._trial_run

    def run(st, name, *args):
        got = real(st, name, *args)
        clock[0] += seconds.get(name, 0.0)
        ran.full.append(name)
        return got

    def trial_run(trial, st, name, *args):  # a trial call through the compiled core's record: the same clock
        record = real_record(trial, st, name, *args)
        if record is None:
            return None

        def timed(sendbuf, recvbuf, op):
            got = record(sendbuf, recvbuf, op)
            if got is not False:
                clock[0] += seconds.get(name, 0.0)
            return got

        return timed

    def tried(trial, st, name, *args):
        ran.append(name)
        return real_tried(trial, st, name, *args)

    real_tried = pipeline._tried
    monkeypatch.setattr(pipeline, "_run", run)
    monkeypatch.setattr(pipeline, "_trial_run", trial_run)
    monkeypatch.setattr(pipeline, "_tried", tried)
    monkeypatch.setattr(pipeline, "perf_counter", lambda: clock[0])
    return ran


def _call(comm, x, check=True):
    y = np.empty_like(x)
    swing_mpi.allreduce(comm, x, y, MPI.SUM)
    if check:
        ref = np.empty_like(x)
        WORLD.Allreduce(x, ref, MPI.SUM)
        np.testing.assert_allclose(y, ref, rtol=1e-12 * max(P, 2))
        assert _same_everywhere(WORLD, y.tobytes())
    return y


def _trial(comm, x):
    return api.auto_trial(comm, np.empty_like(x), MPI.SUM)


@pytest.mark.mpi(min_size=2)
def test_the_trial_takes_turns_then_every_rank_keeps_the_fastest(tried_comm, monkeypatch):
    ran = _fake_clock(monkeypatch, {"ring": 3e-3, "recdoub": 2e-3, "native": 1e-3})
    x = np.random.default_rng(R).random(N)
    trial = _trial(tried_comm, x)
    assert trial is not None and trial.contenders == ("ring", "recdoub", "native")
    assert trial.rounds == online.MIN_ROUNDS  # slow calls (as the table says): the fewest
    k = trial.calls
    out = np.empty_like(x)
    first_nb = swing_mpi.iallreduce(tried_comm, x, out)
    assert isinstance(first_nb, Request)  # while the trial runs: the table's pick (ring), no part in the trial
    first_nb.Wait()
    for _ in range(k):
        _call(tried_comm, x)
    assert ran == [a for a in ("ring", "recdoub", "native", "ring") for _ in range(trial.rounds)]
    assert trial.pick == "native" and _same_everywhere(WORLD, (trial.pick, trial.medians))
    for _ in range(3):  # after the trial: the usual path, no more timed runs
        _call(tried_comm, x)
    assert len(ran) == k
    nb = swing_mpi.iallreduce(tried_comm, x, out)
    assert not isinstance(nb, Request)  # the trial's result: MPI's own
    nb.Wait()
    np.testing.assert_allclose(out, _call(tried_comm, x), rtol=1e-12 * max(P, 2))


@pytest.mark.mpi(min_size=2)
@pytest.mark.skipif(native.load() is None, reason=f"no compiled core here: {native.why_not()}")
@pytest.mark.parametrize("in_place", [True, False])
def test_a_schedules_trial_calls_run_as_its_settled_calls(tried_comm, monkeypatch, in_place):
    """Ours run through the compiled core's record (what a settled call runs), MPI's call as it is: timed alike."""
    ran = _fake_clock(monkeypatch, {"ring": 3e-3, "recdoub": 1e-3, "native": 2e-3})
    x = np.random.default_rng(R).random(N)
    trial = _trial(tried_comm, x)
    ref = np.empty_like(x)
    WORLD.Allreduce(x, ref, MPI.SUM)
    runs = {}
    for _ in range(trial.calls):
        runs.update(trial.runs)
        y = x.copy() if in_place else np.empty_like(x)
        swing_mpi.allreduce(tried_comm, MPI.IN_PLACE if in_place else x, y, MPI.SUM)
        np.testing.assert_allclose(y, ref, rtol=1e-12 * max(P, 2))
        assert _same_everywhere(WORLD, y.tobytes())
    assert trial.pick == "recdoub" and len(ran) == trial.calls and not trial.runs  # emptied at the end
    recorded = {name for (name, *_), run in runs.items() if run is not None}
    assert "native" not in recorded and recorded, trial.runs  # in place, every one-lane schedule has a record
    assert [a for a in ran.full if a != "native"] == [a for a in ran if a not in recorded and a != "native"]
    assert ran.full.count("native") == ran.count("native") == trial.rounds


@pytest.mark.mpi(min_size=2)
def test_the_last_rank_to_come_times_a_call_and_a_small_gain_keeps_the_pick(tried_comm, monkeypatch):
    # native: 2.5 ms on rank 0, the last to come, 9 ms on the others, which waited for it: the least over ranks,
    # the call's own time, is rank 0's; recdoub is 2.5 % faster than ring: less than the switch margin, so ring
    # stays without a second turn
    ran = _fake_clock(monkeypatch, {"ring": 2.0e-3, "recdoub": 1.95e-3, "native": 2.5e-3 if R == 0 else 9e-3})
    x = np.arange(N, dtype=np.float64) * (R + 1)
    trial = _trial(tried_comm, x)
    for _ in range(trial.calls):
        _call(tried_comm, x)
    assert trial.pick == "ring" and _same_everywhere(WORLD, trial.medians)
    assert trial.medians == pytest.approx((2.0e-3, 1.95e-3, 2.5e-3))
    _call(tried_comm, x)
    assert len(ran) == 3 * trial.rounds  # nothing looked faster than ring: no second turn of it


@pytest.mark.mpi(min_size=2)
def test_sizes_are_tried_apart_and_in_place_calls_count(tried_comm, monkeypatch):
    ran = _fake_clock(monkeypatch, {"ring": 1e-3, "recdoub": 3e-3, "native": 3e-3})
    a = np.random.default_rng(R).random(N)
    b = np.random.default_rng(R + 100).random(N + 7)
    ta, tb = _trial(tried_comm, a), _trial(tried_comm, b)
    assert ta is not tb
    for _ in range(ta.calls):  # interleaved with the other size, the other in place
        _call(tried_comm, a)
        y = b.copy()
        ref = np.empty_like(b)
        WORLD.Allreduce(b, ref, MPI.SUM)
        swing_mpi.allreduce(tried_comm, MPI.IN_PLACE, y, MPI.SUM)
        np.testing.assert_allclose(y, ref, rtol=1e-12 * max(P, 2))
    assert ta.pick == tb.pick == "ring"
    assert ran[0::2] == ran[1::2] == [a for a in ta.turns for _ in range(ta.rounds)]


@pytest.mark.mpi(min_size=2)
def test_exact_ops_are_tried_apart_and_by_the_model_without_a_table(tried_comm, monkeypatch):
    ran = _fake_clock(monkeypatch, {"ring": 1e-3, "recdoub": 1e-3, "native": 1e-3})
    x = np.arange(N, dtype=np.int64) + R
    d = choose.explain(P, (P,), x.nbytes, exact=True, tuning=comm_state(tried_comm).tuning)
    assert d.why == "model"  # the table is float64's: the model decides, and names its contenders
    trial = api.auto_trial(tried_comm, np.empty_like(x), MPI.SUM)
    assert (trial.contenders if trial is not None else ()) == d.tried
    for _ in range(4):
        y = np.empty_like(x)
        swing_mpi.allreduce(tried_comm, x, y, MPI.SUM)
        assert (y == sum(np.arange(N, dtype=np.int64) + r for r in range(P))).all()
    assert set(ran) <= set(d.tried) and "native" not in ran


@pytest.mark.mpi(min_size=2)
def test_user_ops_are_not_tried(tried_comm, monkeypatch):
    ran = _fake_clock(monkeypatch, {"ring": 1e-3, "recdoub": 1e-3, "native": 1e-3})
    op = MPI.Op.Create(lambda a, b, dt: np.add(np.frombuffer(a, np.float64), np.frombuffer(b, np.float64),
                                               out=np.frombuffer(b, np.float64)), commute=True)
    try:
        x = np.arange(N, dtype=np.float64) + R
        assert api.auto_trial(tried_comm, np.empty_like(x), op) is None
        y = np.empty_like(x)
        swing_mpi.allreduce(tried_comm, x, y, op)
        assert (y == sum(np.arange(N, dtype=np.float64) + r for r in range(P))).all() and ran == []
    finally:
        op.Free()


@pytest.mark.mpi(min_size=2)
def test_switched_off_by_rank_0(tried_comm, monkeypatch):
    monkeypatch.setenv("SWING_MPI_TRIAL", "off" if R == 0 else "on")  # rank 0's value counts everywhere
    config.rc.reload()
    comm = tried_comm.Dup()
    try:
        ran = _fake_clock(monkeypatch, {"ring": 1e-3, "recdoub": 1e-3, "native": 1e-3})
        x = np.random.default_rng(R).random(N)
        assert _trial(comm, x) is None
        for _ in range(5):
            _call(comm, x)
        assert ran == []
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
def test_a_bad_switch_on_rank_0_raises_on_every_rank(tried_comm, monkeypatch):
    monkeypatch.setenv("SWING_MPI_TRIAL", "sometimes" if R == 0 else "on")
    config.rc.reload()
    comm = tried_comm.Dup()
    try:
        with pytest.raises(ValueError, match="SWING_MPI_TRIAL"):
            swing_mpi.allreduce(comm, np.ones(4), np.empty(4))
    finally:
        comm.Free()
