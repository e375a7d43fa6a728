"""The mismatch check (``check=True`` / ``SWING_MPI_CHECK=1``): every rank raises, the next call works (mpiexec)."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi
from swing_mpi.guard import CollectiveMismatchError

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()
LAST = P - 1

needs_two = pytest.mark.skipif(P < 2, reason="a mismatch needs two ranks")


def outcome(fn):
    """Run ``fn``; return every rank's (exception type name, message), gathered."""
    try:
        fn()
        mine = ("ok", "")
    except Exception as e:  # noqa: BLE001 - the verdicts are compared below
        mine = (type(e).__name__, str(e))
    return WORLD.allgather(mine)


def still_usable(algorithm="swing-bw"):
    x = np.arange(10, dtype=np.int64) + R
    y = np.zeros(10, np.int64)
    swing_mpi.allreduce(WORLD, x, y, algorithm=algorithm, check=True)
    assert np.array_equal(y, np.arange(10) * P + P * (P - 1) // 2)


def assert_all_raise(got, *needles):
    kinds = {k for k, _ in got}
    assert kinds == {"CollectiveMismatchError"}, got
    assert len({m for _, m in got}) == 1, "every rank should give the same message"
    for needle in needles:
        assert needle in got[0][1], (needle, got[0][1])


@needs_two
@pytest.mark.parametrize("algorithm", ["swing-bw", "recdoub", "auto", "native"])
def test_count_differs(algorithm):
    n = 12 if R != LAST else 11
    got = outcome(lambda: swing_mpi.allreduce(WORLD, np.ones(n), np.empty(n), algorithm=algorithm, check=True))
    assert_all_raise(got, "count differs", f"11 on rank {LAST}", "12 on rank")
    still_usable(algorithm)


@needs_two
def test_datatype_differs():
    dt = np.float32 if R == 0 else np.float64
    got = outcome(lambda: swing_mpi.allreduce(WORLD, np.ones(8, dt), np.empty(8, dt), algorithm="ring",
                                              check=True))
    assert_all_raise(got, "datatype differs", "MPI_FLOAT on rank 0", "MPI_DOUBLE on rank")
    still_usable("ring")


@needs_two
def test_op_differs():
    op = MPI.MAX if R == LAST else MPI.SUM
    got = outcome(lambda: swing_mpi.allreduce(WORLD, np.ones(8), np.empty(8), op, algorithm="swing-lat",
                                              check=True))
    assert_all_raise(got, "op differs", f"MPI.MAX on rank {LAST}")
    still_usable()


@needs_two
def test_algorithm_differs():
    algorithm = "ring" if R == 0 else "swing-bw"
    got = outcome(lambda: swing_mpi.allreduce(WORLD, np.ones(8), np.empty(8), algorithm=algorithm, check=True))
    assert_all_raise(got, "algorithm differs", "ring on rank 0")
    still_usable()


@pytest.mark.skipif(P != 4, reason="dims 2x2 against 4 need four ranks")
def test_dims_differ():
    dims = "2x2" if R < 2 else "4"
    got = outcome(lambda: swing_mpi.allreduce(WORLD, np.ones(8), np.empty(8), algorithm="swing-bw", dims=dims,
                                              check=True))
    assert_all_raise(got, "dims differs", "2x2 on ranks 0-1", "4 on ranks 2-3")
    still_usable()


@needs_two
def test_a_bad_buffer_on_one_rank_raises_there_and_everywhere_else():
    y = np.empty(8)
    if R == LAST:
        y.flags.writeable = False
    got = outcome(lambda: swing_mpi.allreduce(WORLD, np.ones(8), y, algorithm="swing-bw", check=True))
    assert got[LAST][0] == "ValueError" and "read-only" in got[LAST][1]
    others = [g for r, g in enumerate(got) if r != LAST]
    assert {k for k, _ in others} == {"CollectiveMismatchError"}, got
    assert f"rejected locally (ValueError) on rank {LAST}" in others[0][1]
    still_usable()


@needs_two
def test_intracomm_check_switch_and_nonblocking_calls():
    comm = swing_mpi.Intracomm(WORLD, algorithm="swing-bw", check=True)
    n = 6 if R else 7
    got = outcome(lambda: comm.Allreduce(np.ones(n), np.empty(n)))
    assert_all_raise(got, "count differs")
    got = outcome(lambda: comm.Iallreduce(np.ones(n), np.empty(n)).Wait())
    assert_all_raise(got, "count differs")
    got = outcome(lambda: comm.Allreduce_init(np.ones(n), np.empty(n)))
    assert_all_raise(got, "count differs")
    assert comm.Dup()._swing_check is True
    y = np.empty(5)
    req = comm.Allreduce_init(np.ones(5), y)
    req.Start()
    req.Wait()
    assert (y == P).all()
    req.Free()


def test_check_passes_correct_calls_of_every_kind():
    for algorithm in ["swing-bw", "swing-lat", "recdoub", "ring", "auto", "native"]:
        x = np.arange(4 * P + 1, dtype=np.float64) + R
        y = np.empty_like(x)
        for _ in range(2):  # the second call is one the repeat path would take: with the check it does not
            swing_mpi.allreduce(WORLD, x, y, algorithm=algorithm, check=True)
            assert np.array_equal(y, np.arange(len(x)) * P + P * (P - 1) / 2)
        swing_mpi.iallreduce(WORLD, x, y, MPI.MAX, algorithm=algorithm, check=True).Wait()
        assert np.array_equal(y, np.arange(len(x)) + P - 1)


def test_the_error_is_a_value_error_exported_by_the_package():
    assert swing_mpi.CollectiveMismatchError is CollectiveMismatchError
    assert issubclass(CollectiveMismatchError, ValueError)
