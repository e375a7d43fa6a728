"""The executor's ways of moving the same data give the same bits (under mpiexec).

A :class:`~swing_mpi.executor.Plan` can take its input in place (copied
into the work vector by the caller) or from a separate ``source`` read where
first used, and a reduce-scatter half can write its block into a separate
``out``; several ranges of one message go as an MPI datatype or are packed
into scratch with numpy. Every registered algorithm (allreduce schedules and,
where it has them, both halves), on a ring and on the tori of this size, must
give bit-identical results on every path, exact against numpy for integers,
and leave ``source`` untouched.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from mpi4py import MPI
from reference import builds

import swing_mpi.executor as executor
from swing_mpi import ALGORITHMS
from swing_mpi.config import rc
from swing_mpi.schedule import build_schedule
from swing_mpi.schedule.halves import ALL_GATHER, REDUCE_SCATTER, build_half

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()
TORI = {4: [(2, 2)], 6: [(2, 3)], 8: [(2, 4), (2, 2, 2)], 9: [(3, 3)], 10: [(2, 5)], 12: [(3, 4)], 15: [(3, 5)],
        16: [(4, 4)]}
DIMS = [(P,)] + TORI.get(P, [])
LIGHT = P > 8 and not os.environ.get("SWING_MPI_TEST_FULL")
"""Above 8 ranks, oversubscribed on CI's two cores: fewer counts (still empty blocks, fewer elements
than ranks and uneven blocks) and every plan run once; every path, algorithm and shape still runs."""
COUNTS = [0, 7, 5 * P + 3] if LIGHT else [0, 1, 7, 5 * P + 3, 1000]
RUNS = 1 if LIGHT else 2
"""Times each plan runs (a plan runs again with the same result)."""


def _valid(algorithm: str, dims: tuple[int, ...]) -> bool:
    return builds(algorithm, dims, R)


def _plan(schedule, types: bool, dtype=MPI.INT64_T, op=MPI.SUM):
    old = rc.datatypes
    rc.datatypes = types
    try:
        return executor.Plan(WORLD, schedule, dtype, op)
    finally:
        rc.datatypes = old


def _inputs(count: int) -> np.ndarray:
    rng = np.random.default_rng(1000 * R + count)
    return rng.integers(-1000, 1000, count).astype(np.int64)


CASES = [(a, d) for a in sorted(ALGORITHMS) for d in DIMS if _valid(a, d)]


@pytest.mark.parametrize("algorithm,dims", CASES, ids=[f"{a}-{'x'.join(map(str, d))}" for a, d in CASES])
def test_allreduce_paths_agree(algorithm, dims):
    for count in COUNTS:
        x = _inputs(count)
        want = np.zeros(count, np.int64)
        WORLD.Allreduce(x, want, MPI.SUM)
        got = []
        for types in (True, False):
            schedule = build_schedule(algorithm, dims, R, count)
            for source in (False, True):
                plan = _plan(schedule, types)
                for _ in range(RUNS):
                    src = x.copy()
                    res = np.full(count, -7, np.int64) if source else x.copy()
                    plan.run(res.view(np.uint8), src.view(np.uint8) if source else None)
                    assert np.array_equal(src, x), "the input changed"
                    got.append(res)
        for res in got:
            assert np.array_equal(res, want), (algorithm, dims, count)


HALF_CASES = [(a, d) for a, d in CASES if "reduce_scatter" in ALGORITHMS[a].collectives]


def _blocks(count: int) -> tuple[tuple[int, int], ...]:
    rng = np.random.default_rng(count)
    cuts = sorted(rng.integers(0, count + 1, P - 1).tolist())
    edges = [0, *cuts, count]
    return tuple((edges[i], edges[i + 1]) for i in range(P))


@pytest.mark.parametrize("algorithm,dims", HALF_CASES, ids=[f"{a}-{'x'.join(map(str, d))}" for a, d in HALF_CASES])
def test_reduce_scatter_paths_agree(algorithm, dims):
    for count in COUNTS:
        blocks = _blocks(count)
        lo, hi = blocks[R]
        x = _inputs(count)
        full = np.zeros(count, np.int64)
        WORLD.Allreduce(x, full, MPI.SUM)
        schedule = build_half(algorithm, dims, R, blocks, half=REDUCE_SCATTER)
        for types in (True, False):
            for source in (False, True):
                for out in (False, True):
                    plan = _plan(schedule, types)
                    for _ in range(RUNS):
                        src = x.copy()
                        work = np.full(count, -7, np.int64) if source else x.copy()
                        mine = np.full(hi - lo, -9, np.int64)
                        plan.run(work.view(np.uint8), src.view(np.uint8) if source else None,
                                 out=mine.view(np.uint8) if out else None)
                        assert np.array_equal(src, x), "the input changed"
                        result = mine if out else work[lo:hi]
                        assert np.array_equal(result, full[lo:hi]), (algorithm, dims, count, types, source, out)


@pytest.mark.parametrize("algorithm,dims", HALF_CASES, ids=[f"{a}-{'x'.join(map(str, d))}" for a, d in HALF_CASES])
def test_allgather_paths_agree(algorithm, dims):
    for count in COUNTS:
        blocks = _blocks(count)
        lo, hi = blocks[R]
        x = _inputs(count)
        want = np.zeros(count, np.int64)
        for r, (a, b) in enumerate(blocks):  # rank r's block is rank r's input there
            want[a:b] = WORLD.bcast(x[a:b] if r == R else None, root=r)
        schedule = build_half(algorithm, dims, R, blocks, half=ALL_GATHER)
        for types in (True, False):
            plan = _plan(schedule, types, op=MPI.REPLACE)
            work = np.full(count, -7, np.int64)
            work[lo:hi] = x[lo:hi]
            plan.run(work.view(np.uint8))
            assert np.array_equal(work, want), (algorithm, dims, count, types)


def test_float_paths_bit_identical():
    """Float sums: the first-use and redirected reductions compute the same expression as the copy-first path."""
    count = 999
    rng = np.random.default_rng(R)
    x = rng.standard_normal(count)
    for algorithm, dims in CASES:
        schedule = build_schedule(algorithm, dims, R, count, exact=False)  # as the API builds it for floats
        a = x.copy()
        executor.Plan(WORLD, schedule, MPI.DOUBLE, MPI.SUM).run(a.view(np.uint8))
        b = np.empty(count)
        executor.Plan(WORLD, schedule, MPI.DOUBLE, MPI.SUM).run(b.view(np.uint8), x.view(np.uint8))
        assert a.tobytes() == b.tobytes(), algorithm
        every = WORLD.allgather(b.tobytes())
        assert all(e == every[0] for e in every), f"{algorithm}: ranks differ"
