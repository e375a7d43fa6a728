"""Persistent and nonblocking allreduce, resource hygiene, concurrency (under mpiexec)."""

from __future__ import annotations

import gc
import resource

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi
from swing_mpi import api
from swing_mpi.state import find_state

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()


def expected_sum(n):
    return np.arange(n) * P + P * (P - 1) / 2


@pytest.mark.parametrize("algorithm", ["swing-bw", "swing-lat", "recdoub", "auto", "native"])
def test_persistent_plan_start_wait_many_times(algorithm):
    comm = swing_mpi.Intracomm(WORLD, algorithm=algorithm)
    n = 4 * P + 3
    x = np.zeros(n)
    y = np.zeros(n)
    req = comm.Allreduce_init(x, y, MPI.SUM)
    try:
        for it in range(20):
            x[:] = np.arange(n) + R + it  # new data each time, same buffers
            req.Start()
            req.Wait()
            assert np.allclose(y, expected_sum(n) + it * P), it
    finally:
        req.Free()


def test_persistent_in_place_and_test_loop():
    y = np.zeros(10 * P, dtype=np.int64)
    req = swing_mpi.allreduce_init(WORLD, MPI.IN_PLACE, y, MPI.SUM, algorithm="swing-bw")
    for it in range(5):
        y[:] = R + it
        req.Start()
        while not req.Test():
            pass
        assert (y == P * (P - 1) // 2 + P * it).all()
    req.Free()
    with pytest.raises(RuntimeError, match="freed"):
        req.Start()


def test_several_nonblocking_allreduces_in_flight_do_not_mix():
    """Three Iallreduce at once on one communicator, completed in reverse order."""
    n = 3 * P + 1
    bufs = [np.arange(n, dtype=np.float64) * (k + 1) + R for k in range(3)]
    outs = [np.empty(n) for _ in range(3)]
    reqs = [swing_mpi.iallreduce(WORLD, b, o, algorithm=a)
            for b, o, a in zip(bufs, outs, ["swing-bw", "recdoub", "swing-bw"])]
    for r in reversed(reqs):
        r.Wait()
    for k in range(3):
        assert np.allclose(outs[k], np.arange(n) * (k + 1) * P + P * (P - 1) / 2)


def test_waitall_mixes_ours_and_mpi_requests():
    a = np.full(P + 2, float(R))
    b = np.empty_like(a)
    c = np.full(5, R, dtype=np.int32)
    d = np.empty_like(c)
    ours = swing_mpi.iallreduce(WORLD, a, b, algorithm="swing-bw")
    theirs = WORLD.Iallreduce(c, d, MPI.MAX)
    api.Request.Waitall([ours, theirs])
    assert np.allclose(b, P * (P - 1) / 2) and (d == P - 1).all()


def test_two_intracomms_over_one_base_side_by_side():
    c1 = swing_mpi.Intracomm(WORLD, algorithm="swing-bw")
    c2 = swing_mpi.Intracomm(WORLD, algorithm="swing-lat")
    x = np.full(2 * P, R + 1.0)
    y1, y2 = np.empty_like(x), np.empty_like(x)
    r1 = c1.Iallreduce(x, y1)
    c2.Allreduce(x, y2)
    r1.Wait()
    assert np.allclose(y1, P * (P + 1) / 2) and np.allclose(y2, y1)


def test_freeing_the_users_communicator_frees_ours():
    dup = WORLD.Dup()
    swing_mpi.allreduce(dup, MPI.IN_PLACE, np.ones(4), algorithm="swing-bw")
    state = find_state(dup)
    assert state is not None and state.comm != MPI.COMM_NULL
    dup.Free()
    assert state.comm == MPI.COMM_NULL


def test_many_small_allreduces_leak_nothing():
    """MPICH's allredmany idea: back-to-back small allreduces, memory stays flat."""
    n_iter = 10000 if P <= 2 else 2000
    x = np.ones(1)
    y = np.empty(1)
    for _ in range(200):  # warm up caches
        swing_mpi.allreduce(WORLD, x, y)
    gc.collect()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    state = find_state(WORLD)
    plans0 = len(state.plans)
    for _ in range(n_iter):
        swing_mpi.allreduce(WORLD, x, y)
    gc.collect()
    assert y[0] == P
    assert len(state.plans) == plans0
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
    assert grown_kib < 8 * 1024, f"max RSS grew by {grown_kib} KiB over {n_iter} calls"


@pytest.mark.parametrize("algorithm", ["swing-bw", "auto"])
def test_counts_1_to_32768(algorithm):
    """Order-sensitive floats (±1e6 mixed with 1e-2) at many counts: MPI's answer, same bits everywhere."""
    counts = [1, 2, 3, 5, 8, 13, 31, 64, 100, 255, 1000, 4097, 32768]
    rng = np.random.default_rng(R)
    bad = []
    for n in counts:
        x = rng.choice([1e6, -1e6, 1e-2], n) * (1 + rng.random(n))
        y = np.empty(n)
        ref = np.empty(n)
        swing_mpi.allreduce(WORLD, x, y, algorithm=algorithm)
        WORLD.Allreduce(x, ref)
        if not np.allclose(y, ref, rtol=1e-9, atol=1e-3):
            bad.append((n, "value"))
        if len(set(WORLD.allgather(y.tobytes()))) != 1:
            bad.append((n, "bits"))
    assert not WORLD.allreduce(bad, MPI.SUM)


def test_commutative_op_flagged_non_commutative_still_right():
    def add(a, b, dt):
        np.frombuffer(b, np.int64)[...] += np.frombuffer(a, np.int64)

    op = MPI.Op.Create(add, commute=False)
    try:
        x = np.arange(2 * P + 1, dtype=np.int64) * (R + 1)
        y = np.empty_like(x)
        swing_mpi.allreduce(WORLD, x, y, op, algorithm="swing-bw")  # falls back to recdoub
        assert (y == np.arange(2 * P + 1) * P * (P + 1) // 2).all()
    finally:
        op.Free()


def test_auto_hands_tiny_vectors_to_mpi_only_when_bits_cannot_differ():
    from dataclasses import replace

    from swing_mpi.api import resolve
    from swing_mpi.tuning import DEFAULT_TUNING
    tuning = replace(DEFAULT_TUNING, native_below_bytes=64)  # 8 B: below the threshold of this tuning
    assert resolve("auto", P, 8, MPI.SUM, MPI.DOUBLE, tuning=tuning) == "native"    # IEEE + is commutative
    assert resolve("auto", P, 8, MPI.BXOR, MPI.INT64_T, tuning=tuning) == "native"  # exact
    assert resolve("auto", P, 8, MPI.MIN, MPI.FLOAT, tuning=tuning) != "native"     # ±0.0: MPI may differ by rank
    # and the result is then bit-identical even with signed zeros mixed
    x = np.array([0.0, -0.0] * 8, dtype=np.float32) * (1 if R % 2 else -1)
    y = np.empty_like(x)
    swing_mpi.allreduce(WORLD, x, y, MPI.MIN)
    assert len(set(WORLD.allgather(y.tobytes()))) == 1


# -- arrays from other libraries ---------------------------------------------------------------

class OnlyArrayInterface:
    """Host memory behind ``__array_interface__`` only (no buffer protocol), like some array libraries."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


class OnlyDLPack:
    """Host memory behind ``__dlpack__`` only, like torch CPU tensors and JAX CPU arrays."""

    def __init__(self, a, device=(1, 0)):
        self.a = a
        self.device = device

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


@pytest.fixture
def plan_runs(monkeypatch):
    """Count the plans our executor runs (blocking and started)."""
    from swing_mpi import executor
    calls = []
    run, start = executor.Plan.run, executor.Plan.start
    monkeypatch.setattr(executor.Plan, "run", lambda self, *a, **k: (calls.append("run"), run(self, *a, **k))[1])
    monkeypatch.setattr(executor.Plan, "start",
                        lambda self, *a, **k: (calls.append("start"), start(self, *a, **k))[1])
    return calls


@pytest.mark.parametrize("wrap", [OnlyArrayInterface, OnlyDLPack])
@pytest.mark.parametrize("algorithm", ["swing-bw", "recdoub"])
def test_host_arrays_of_other_libraries_run_our_algorithms(plan_runs, wrap, algorithm):
    n = 3 * P + 1
    x = np.arange(n, dtype=np.float64) + R
    y = np.zeros(n)
    swing_mpi.allreduce(WORLD, wrap(x), wrap(y), algorithm=algorithm)
    assert np.array_equal(y, expected_sum(n))
    assert plan_runs, "the call went to MPI, not through our schedule"
    z = (np.arange(n, dtype=np.int32) + R)
    swing_mpi.allreduce(WORLD, MPI.IN_PLACE, wrap(z), MPI.SUM, algorithm=algorithm)
    assert np.array_equal(z, (np.arange(n) * P + P * (P - 1) // 2).astype(np.int32))
    req = swing_mpi.iallreduce(WORLD, wrap(x), wrap(y), MPI.MAX, algorithm=algorithm)
    req.Wait()
    assert np.array_equal(y, np.arange(n) + P - 1)


def test_read_only_host_arrays_are_refused_as_recvbuf():
    x = np.ones(4)
    ro = x.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        swing_mpi.allreduce(WORLD, x, OnlyArrayInterface(ro), algorithm="swing-bw")


def test_device_dlpack_is_left_to_the_mpi_library():
    from swing_mpi.buffers import DeviceBuffer, parse_buffer
    with pytest.raises(DeviceBuffer):
        parse_buffer(OnlyDLPack(np.ones(4), device=(2, 0)), writable=True, where="recvbuf")  # kDLCUDA
    spec = parse_buffer(OnlyDLPack(np.ones(4)), writable=True, where="recvbuf")
    assert spec.count == 4 and spec.datatype == MPI.DOUBLE


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, np.complex128, np.dtype(">f8")])
@pytest.mark.parametrize("shape", [(7,), (2, 3), (), (0,)])
def test_numpy_arrays_parse_the_same_on_the_fast_path(dtype, shape):
    from swing_mpi import buffers
    buffers._NUMPY_TYPES.clear()
    a = (np.arange(int(np.prod(shape))) + 1).astype(dtype).reshape(shape)
    slow = buffers.parse_buffer(a, writable=True, where="recvbuf")
    assert np.dtype(dtype) in buffers._NUMPY_TYPES  # learnt from the buffer's format
    b = (np.arange(int(np.prod(shape))) + 1).astype(dtype).reshape(shape)
    fast = buffers.parse_buffer(b, writable=True, where="recvbuf")
    assert (fast.count, fast.datatype, fast.extent) == (slow.count, slow.datatype, slow.extent) == (
        a.size, MPI.Datatype.fromcode(np.dtype(dtype).char), np.dtype(dtype).itemsize)
    assert fast.data.dtype == np.uint8 and fast.data.tobytes() == slow.data.tobytes() == b.tobytes()
    if b.size:
        fast.data[:] = 0  # a view of the array, as the buffer protocol's
        assert not b.any()
    # what the fast path does not take still gets the full checks
    ro = b.copy()
    ro.flags.writeable = False
    assert buffers.parse_buffer(ro, writable=False, where="sendbuf").count == b.size
    with pytest.raises(ValueError, match="read-only"):
        buffers.parse_buffer(ro, writable=True, where="recvbuf")
    if b.ndim == 2:
        with pytest.raises(ValueError, match="contiguous"):
            buffers.parse_buffer(np.asfortranarray(np.ones((3, 4), dtype))[:, :2], writable=True, where="recvbuf")


# -- integer overflow: wrapped, as C and numpy do, whatever the MPI library does --------------

@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint64])
def test_integer_overflow_wraps_identically_on_every_rank(dtype):
    info = np.iinfo(dtype)
    n = 64  # long enough for vectorised reductions (Open MPI's saturate 8- and 16-bit sums)
    x = np.full(n, info.max // 2 + 1, dtype)
    want = x.copy()
    for _ in range(P - 1):
        want += x  # numpy wraps
    for algorithm in ["swing-bw", "swing-lat", "recdoub", "ring", "auto"]:
        y = np.zeros_like(x)
        swing_mpi.allreduce(WORLD, x, y, MPI.SUM, algorithm=algorithm)
        assert np.array_equal(y, want), (algorithm, y[:3], want[:3])
        assert len(set(WORLD.allgather(y.tobytes()))) == 1
