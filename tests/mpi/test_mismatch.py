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


# -- reduce-scatter and all-gather ---------------------------------------------------------------

@needs_two
@pytest.mark.parametrize("algorithm", ["swing-bw", "ring", "auto", "native"])
def test_reduce_scatter_block_count_differs(algorithm):
    n = 3 if R != LAST else 2
    got = outcome(lambda: swing_mpi.reduce_scatter_block(WORLD, np.ones(n * P), np.empty(n),
                                                         algorithm=algorithm, check=True))
    assert_all_raise(got, "reduce_scatter_block: arguments differ", "count differs",
                     f"{2 * P} on rank {LAST}")
    still_usable()


@needs_two
def test_reduce_scatter_recvcounts_differ_with_the_same_total():
    counts = [2] * P
    if R == LAST:  # the same total, split differently: the data would go to the wrong ranks
        counts[0], counts[1] = 3, 1
    total = sum(counts)
    got = outcome(lambda: swing_mpi.reduce_scatter(WORLD, np.ones(total), np.empty(3), counts,
                                                   algorithm="swing-bw", check=True))
    assert_all_raise(got, "recvcounts differs", f"on rank {LAST}")
    still_usable()


@needs_two
def test_reduce_scatter_op_differs_and_nonblocking_forms():
    op = MPI.MAX if R == 0 else MPI.SUM
    x, y = np.ones(2 * P), np.empty(2)
    got = outcome(lambda: swing_mpi.ireduce_scatter_block(WORLD, x, y, op, algorithm="ring", check=True).Wait())
    assert_all_raise(got, "op differs", "MPI.MAX on rank 0")
    got = outcome(lambda: swing_mpi.reduce_scatter_init(WORLD, x, y, [2] * P, op, algorithm="ring", check=True))
    assert_all_raise(got, "op differs")
    still_usable()


@needs_two
def test_reduce_scatter_counts_gathered_an_error_on_one_rank_reaches_all():
    # recvcounts=None: the counts are gathered; the last rank's sendbuf is too short
    send = np.ones(2 * P) if R != LAST else np.ones(2 * P - 1)
    for check in (True, False):
        got = outcome(lambda c=check: swing_mpi.reduce_scatter(WORLD, send, np.empty(2), algorithm="ring", check=c))
        assert got[LAST][0] == "ValueError" and "sendbuf has" in got[LAST][1], got
        assert all(k != "ok" for k, _ in got), got
    still_usable()


@needs_two
@pytest.mark.parametrize("algorithm", ["swing-bw", "bucket", "auto", "native"])
def test_allgather_count_differs(algorithm):
    n = 4 if R != LAST else 5
    got = outcome(lambda: swing_mpi.allgather(WORLD, np.ones(n), np.empty(n * P), algorithm=algorithm, check=True))
    assert_all_raise(got, "allgather: arguments differ", "count differs", f"5 on rank {LAST}")
    still_usable()


@needs_two
def test_different_collectives_on_different_ranks():
    def call():
        if R == LAST:
            swing_mpi.allgather(WORLD, np.ones(2), np.empty(2 * P), algorithm="ring", check=True)
        else:
            swing_mpi.allreduce(WORLD, np.ones(2), np.empty(2), algorithm="ring", check=True)
    got = outcome(call)
    assert_all_raise(got, "operation differs", f"allgather on rank {LAST}")
    still_usable()


@needs_two
def test_intracomm_check_covers_the_halves():
    comm = swing_mpi.Intracomm(WORLD, algorithm="swing-bw", check=True)
    n = 2 if R else 3
    got = outcome(lambda: comm.Reduce_scatter_block(np.ones(n * P), np.empty(n)))
    assert_all_raise(got, "count differs")
    got = outcome(lambda: comm.Iallgather(np.ones(n), np.empty(n * P)).Wait())
    assert_all_raise(got, "count differs")
    got = outcome(lambda: comm.Allgather_init(np.ones(n), np.empty(n * P)))
    assert_all_raise(got, "count differs")


def test_check_passes_correct_halves():
    for algorithm in ["swing-bw", "ring", "bucket", "auto", "native"]:
        x = np.arange(3 * P, dtype=np.int64) + R
        y = np.empty(3, np.int64)
        swing_mpi.reduce_scatter_block(WORLD, x, y, algorithm=algorithm, check=True)
        assert np.array_equal(y, np.arange(3 * R, 3 * R + 3) * P + P * (P - 1) // 2)
        counts = [(r % 3) for r in range(P)]
        z = np.empty(counts[R], np.int64)
        swing_mpi.reduce_scatter(WORLD, np.arange(sum(counts), dtype=np.int64), z, counts, algorithm=algorithm,
                                 check=True)
        lo = sum(counts[:R])
        assert np.array_equal(z, np.arange(lo, lo + counts[R]) * P)
        g = np.empty(2 * P, np.int64)
        swing_mpi.allgather(WORLD, np.array([R, -R], np.int64), g, algorithm=algorithm, check=True)
        assert np.array_equal(g, np.array([[r, -r] for r in range(P)]).ravel())
