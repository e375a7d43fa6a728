"""The compiled core and the Python engine give the same bits (under mpiexec).

Every registered allreduce schedule, on a ring and the tori of this size, runs through
:class:`~swing_mpi.executor.Plan` once with ``engine="python"`` and once with ``engine="c"`` on
the same random input (schedules built as the API builds them for the op: exact for integers,
rank-ordered where floating-point order matters): the results must be equal byte for byte
(float64 and float32 too, where the order of the additions decides the bits), equal on every
rank, and equal to MPI's own allreduce (exactly for integers, within rounding for floats). The
core runs with one thread and with two, with long messages cut into segments and the reductions
queued on worker threads (the threshold lowered so that small vectors take that path), blocking,
nonblocking (start, test, wait) and with a separate input and output. The trace records how a
step ran.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest
from mpi4py import MPI
from reference import builds

import swing_mpi.executor as executor
from swing_mpi import ALGORITHMS, native
from swing_mpi.api import is_exact
from swing_mpi.config import rc
from swing_mpi.schedule import build_schedule

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()
TORI = {4: [(2, 2)], 6: [(2, 3)], 8: [(2, 2, 2)], 9: [(3, 3)], 12: [(3, 4)], 16: [(4, 4)]}
DIMS = [(P,)] + TORI.get(P, [])
CORE = native.load() is not None
needs_core = pytest.mark.skipif(not CORE, reason=f"no compiled core here: {native.why_not()}")
DTYPES = [(MPI.DOUBLE, np.float64), (MPI.FLOAT, np.float32), (MPI.INT64_T, np.int64)]
SETTINGS = [dict(threads=1, segment=0, min_bytes=executor.REDUCE_MIN_BYTES),
            dict(threads=2, segment=4096, min_bytes=64)]
"""(threads, segment bytes, smallest queued reduction): the default path, and everything cut small and queued."""


def _valid(algorithm: str, dims: tuple[int, ...]) -> bool:
    return builds(algorithm, dims, R)


CASES = [(a, d) for a in sorted(ALGORITHMS) if "allreduce" in ALGORITHMS[a].collectives
         for d in DIMS if _valid(a, d)]


def _input(count: int, np_type) -> np.ndarray:
    rng = np.random.default_rng(7919 * R + count)
    if np.dtype(np_type).kind == "f":
        return (rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count)).astype(np_type)
    return rng.integers(-10**6, 10**6, count).astype(np_type)


def _plan(schedule, mpi_type, engine: str, threads: int, segment: int, min_bytes: int, monkeypatch):
    monkeypatch.setattr(rc, "segment", segment)
    monkeypatch.setattr(executor, "REDUCE_MIN_BYTES", min_bytes)
    return executor.Plan(WORLD, schedule, mpi_type, MPI.SUM, engine=engine, threads=threads)


def _same_everywhere(buf: np.ndarray) -> bool:
    crcs = WORLD.allgather(zlib.crc32(buf.tobytes()))
    return len(set(crcs)) == 1


@needs_core
@pytest.mark.parametrize("setting", SETTINGS, ids=["threads1", "threads2-seg4k-queued"])
@pytest.mark.parametrize("algorithm,dims", CASES, ids=[f"{a}-{'x'.join(map(str, d))}" for a, d in CASES])
def test_engines_give_the_same_bits(algorithm, dims, setting, monkeypatch):
    for count in (1, 5 * P + 3, 3001):
        for mpi_type, np_type in DTYPES:
            x = _input(count, np_type)
            want = np.empty_like(x)
            WORLD.Allreduce(x, want, MPI.SUM)
            schedule = build_schedule(algorithm, dims, R, count, exact=is_exact(MPI.SUM, mpi_type))
            got = {}
            for engine in ("python", "c"):
                plan = _plan(schedule, mpi_type, engine, **setting, monkeypatch=monkeypatch)
                assert plan.engine == engine
                res = x.copy()
                plan.run(res.view(np.uint8))
                got[engine] = res
            where = (algorithm, dims, count, np_type.__name__)
            assert got["c"].tobytes() == got["python"].tobytes(), where
            assert _same_everywhere(got["c"]), where
            if np.dtype(np_type).kind == "f":
                np.testing.assert_allclose(got["c"], want, rtol=1e-4 if np_type is np.float32 else 1e-10,
                                           atol=1e-3 if np_type is np.float32 else 1e-9, err_msg=str(where))
            else:
                assert np.array_equal(got["c"], want), where


@needs_core
@pytest.mark.parametrize("setting", SETTINGS, ids=["threads1", "threads2-seg4k-queued"])
def test_nonblocking_and_separate_buffers(setting, monkeypatch):
    count = 4099
    x = _input(count, np.float64)
    for algorithm in ("swing-bw", "recdoub", "ring"):
        for dims in DIMS:
            if not _valid(algorithm, dims):
                continue
            schedule = build_schedule(algorithm, dims, R, count, exact=False)
            results = []
            for engine in ("python", "c"):
                plan = _plan(schedule, MPI.DOUBLE, engine, **setting, monkeypatch=monkeypatch)
                for seq in range(3):
                    src = x.copy()
                    res = np.full(count, np.nan)
                    plan.start(res.view(np.uint8), src.view(np.uint8), seq=seq)
                    polls = 0
                    while not plan.test():
                        polls += 1
                    plan.wait()
                    assert not plan.active
                    assert np.array_equal(src, x), "the input changed"
                    results.append(res)
            for res in results[1:]:
                assert res.tobytes() == results[0].tobytes(), (algorithm, dims)
            assert _same_everywhere(results[0])


@needs_core
@pytest.mark.skipif(P != 2, reason="the trace's story is told for 2 ranks")
def test_trace_of_a_segmented_step(monkeypatch):
    """One step of 64 KiB in 8 segments, reductions queued: each segment reduced once, after its message.

    Whether a reduction overlaps a later segment's transfer depends on timing (the probe measures
    it); what must hold is the order: the k-th reduction starts after at least k+1 messages are in.
    """
    from swing_mpi.probe import chain_schedules

    n = 8192  # float64: 64 KiB
    schedule = chain_schedules(1, lanes=1, count=n)[R]
    plan = _plan(schedule, MPI.DOUBLE, "c", threads=2, segment=8192, min_bytes=8192, monkeypatch=monkeypatch)
    plan.trace(256)
    x = _input(n, np.float64)
    res = x.copy()
    plan.run(res.view(np.uint8))
    events = plan.trace()
    peer = WORLD.sendrecv(x, dest=1 - R, source=1 - R)
    assert res.tobytes() == (peer + x if R == 1 else x + peer).tobytes()
    kinds = [e[1] for e in events]
    assert kinds[0] == 0 and kinds[-1] == 4, events  # posted first, complete last
    arrivals = [t for t, k, *_ in events if k == 1]
    starts = [t for t, k, *_ in events if k == 2]
    ends = [t for t, k, *_ in events if k == 3]
    assert len(starts) == len(ends) == 8, events  # one reduction per segment
    assert len(arrivals) == 16  # 8 receives and 8 sends
    assert all(s >= a for s, a in zip(sorted(starts), sorted(arrivals))), events
    assert all(b >= a for a, b in zip(sorted(starts), sorted(ends)))
    # a sum copied back into its sent block ahead of its turn (two threads split the sent blocks) comes after
    # that sum (one reduction part per segment here): the k-th such copy follows at least k ended reductions
    ahead = sorted(t for t, k, *_ in events if k == 5)
    assert len(ahead) <= 8, events
    assert all(sum(1 for e in ends if e <= t) >= i + 1 for i, t in enumerate(ahead)), events


@needs_core
@pytest.mark.skipif(P != 2, reason="the probe runs on exactly 2 ranks")
def test_probe_overlap_only_measures_each_thread_count():
    """``swing-mpi probe --overlap-only``: one entry per thread count, its times, its trace read back."""
    from swing_mpi.probe import overlap

    with pytest.raises(ValueError, match="--segment"):
        overlap(WORLD, nbytes=1 << 16, segment=1 << 16)
    data = overlap(WORLD, nbytes=1 << 18, segment=1 << 15, threads=(1, 2), calls=2)
    assert [s["threads"] for s in data["overlap_steps"]] == [1, 2]
    for s in data["overlap_steps"]:
        assert s["bytes"] == 1 << 18 and s["segment"] == 1 << 15
        assert min(s["wire"], s["reduce"], s["serial"], s["overlapped"]) > 0
        starts = [e for e in s["trace"] if e[1] == "reduce-start"]
        assert len(starts) == 8, s["trace"]  # one per segment (below 256 KiB a reduction is not split)
        assert 0 < s["trace_reduce_s"] and 0 <= s["trace_reduce_after_wire_s"] <= s["trace_reduce_s"]
        assert 0 <= s["trace_hidden"] <= 1 and s["trace_tail_s"] >= 0
    assert WORLD.bcast(data["overlap_steps"][0]["wire"]) == data["overlap_steps"][0]["wire"]  # the slower rank's


@pytest.mark.skipif(P != 2, reason="the story of one short rank is told for 2 ranks")
@pytest.mark.skipif("Open MPI" in MPI.Get_library_version(),
                    reason="Open MPI 5's shared-memory transport does not survive a truncated message: a later "
                           "call of the same job dies of a bus error (an erroneous program, as MPI allows)")
def test_an_unchecked_count_mismatch_names_itself(monkeypatch):
    """Rank 0 expects 1000 elements, rank 1 sends 3000: rank 0's error says where and what to try."""
    import swing_mpi
    from swing_mpi import CollectiveError

    monkeypatch.setattr(rc, "timeout", 20.0)
    comm = WORLD.Dup()
    n = 1000 if R == 0 else 3000
    x, y = np.ones(n), np.empty(n)
    message = None
    try:
        swing_mpi.allreduce(comm, x, y, MPI.SUM, algorithm="recdoub")
    except CollectiveError as e:
        message = str(e)
        assert isinstance(e, MPI.Exception) and e.Get_error_code() != MPI.SUCCESS
    if R == 0:
        assert message is not None, "the short rank did not raise"
        parts = ["allreduce (recdoub, 1000 elements", "SWING_MPI_CHECK=1", "step 0"]
        if CORE:  # the compiled core knows which message failed; the Python engine only which step
            parts.append("receiving from rank 1")
        for part in parts:
            assert part in message, message
    WORLD.Barrier()


@pytest.mark.mpi(min_size=2)
def test_crowded_ranks_that_share_memory_yield_and_the_others_spin(monkeypatch):
    """The node's own wait rule under mpiexec, against what MPI says of the ranks' host and memory."""
    from swing_mpi.waiting import node_info

    world = MPI.COMM_WORLD
    monkeypatch.setattr(rc, "wait", None)
    policy, _ = node_info(world)
    me = MPI.Get_processor_name()
    hosts = world.allgather((me, sorted(os.sched_getaffinity(0))))
    ranks = sum(n == me for n, _ in hosts)
    cores = len(set().union(*[c for n, c in hosts if n == me]))
    group = world.Split_type(MPI.COMM_TYPE_SHARED)
    shared = group.Get_size() >= ranks
    group.Free()
    assert policy == ("spin" if ranks <= cores else "yield" if shared else "backoff")
