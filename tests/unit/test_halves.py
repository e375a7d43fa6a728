"""Reduce-scatter and all-gather halves (``schedule/halves.py``) proved with the in-process simulator.

For every algorithm the registry marks for ``reduce_scatter``/``allgather``
and many torus shapes (odd, not powers of two, 1-D to 3-D), with uneven block
sizes including zeros and blocks laid out in a shuffled rank order (what a
placed communicator or ``recvcounts`` give): the reduce-scatter leaves the
exact int64 sum of block ``t`` on rank ``t``, the all-gather leaves every
rank's block everywhere, bit for bit, and each half moves exactly what the
allreduce moves in its part of the schedule (plus the hand-off of folded ranks).
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from swing_mpi.schedule import ALGORITHMS, build_schedule
from swing_mpi.schedule.halves import ALL_GATHER, HALF_PHASES, REDUCE_SCATTER, build_half, unit_owners, unit_targets
from swing_mpi.simulate import simulate

HALVES = tuple(a for a, info in ALGORITHMS.items() if "reduce_scatter" in info.collectives)
OTHERS = tuple(a for a, info in ALGORITHMS.items() if "reduce_scatter" not in info.collectives)
SHAPES = [(p,) for p in range(1, 13)] + [(16,), (2, 2), (2, 3), (3, 3), (3, 4), (4, 4), (2, 5), (6, 6),
                                          (2, 2, 2), (4, 2, 2), (2, 3, 2)]


def _blocks(p: int, rng: np.random.Generator, *, uneven: bool) -> tuple[tuple[int, int], ...]:
    counts = rng.integers(0, 6, p) if uneven else np.full(p, 3)
    if uneven and p > 2:
        counts[rng.integers(0, p)] = 0
    starts = [0] * p
    off = 0
    for t in rng.permutation(p):
        starts[t] = off
        off += int(counts[t])
    return tuple((starts[t], starts[t] + int(counts[t])) for t in range(p))


def _ids(v):
    return "x".join(map(str, v)) if isinstance(v, tuple) else None


@pytest.mark.parametrize("dims", SHAPES, ids=_ids)
@pytest.mark.parametrize("algorithm", HALVES)
@pytest.mark.parametrize("uneven", [False, True], ids=["even", "uneven"])
def test_reduce_scatter_and_allgather_are_exact(algorithm, dims, uneven):
    p = math.prod(dims)
    rng = np.random.default_rng(zlib.crc32(repr((algorithm, dims, uneven)).encode()))
    blocks = _blocks(p, rng, uneven=uneven)
    n = max(b for _, b in blocks)
    inputs = [rng.integers(-1000, 1000, n) for _ in range(p)]
    rs = [build_half(algorithm, dims, r, blocks, half=REDUCE_SCATTER) for r in range(p)]
    out = simulate(rs, inputs)
    total = np.sum(inputs, axis=0)
    for t, (a, b) in enumerate(blocks):
        assert np.array_equal(out[t][a:b], total[a:b]), f"rank {t}"
    full = rng.standard_normal(n)
    ins = []
    for a, b in blocks:
        v = np.full(n, np.nan)
        v[a:b] = full[a:b]
        ins.append(v)
    ag = [build_half(algorithm, dims, r, blocks, half=ALL_GATHER) for r in range(p)]
    for r, got in enumerate(simulate(ag, ins)):
        assert got.tobytes() == full.tobytes(), f"rank {r}"


@pytest.mark.parametrize("dims", [(4,), (6,), (7,), (4, 4), (3, 4), (2, 2, 2)], ids=_ids)
@pytest.mark.parametrize("algorithm", HALVES)
def test_halves_move_what_the_allreduce_moves(algorithm, dims):
    p = math.prod(dims)
    lanes, owner = unit_owners(algorithm, dims)
    n = lanes * p * 4  # every unit 4 elements: the virtual layout scaled
    blocks = tuple((t * lanes * 4, (t + 1) * lanes * 4) for t in range(p))
    moved = sum(u != t for u, t in zip(owner, unit_targets(algorithm, dims)))
    for half in (REDUCE_SCATTER, ALL_GATHER):
        got = sum(build_half(algorithm, dims, r, blocks, half=half).sent_elements() for r in range(p))
        full = sum(t.send_count for r in range(p) for lane in build_schedule(algorithm, dims, r, n).lanes
                   for st in lane if st.phase in HALF_PHASES[half] for t in st.transfers)
        assert got == full + 4 * moved, half


@pytest.mark.parametrize("dims", [(5,), (6,), (8,), (3, 4), (4, 4), (2, 2, 2)], ids=_ids)
@pytest.mark.parametrize("algorithm", [a for a in HALVES
                                       if build_schedule(a, (4, 4), 0, 32).meta.get("owned") is not None])
def test_stated_ownership_is_what_the_schedules_do(algorithm, dims):
    """A builder's ``meta['owned']`` agrees with ownership read off every rank's schedule."""
    stated = unit_owners(algorithm, dims)
    unit_owners.cache_clear()
    lanes = len(build_schedule(algorithm, dims, 0, 0).lanes)
    units = lanes * math.prod(dims)
    owner = []
    for u in range(units):
        holders = []
        for t in range(math.prod(dims)):
            got = False
            for lane in build_schedule(algorithm, dims, t, units).lanes:
                for st in lane:
                    if st.phase in HALF_PHASES[REDUCE_SCATTER]:
                        for tr in st.transfers:
                            if any(a <= u < b for a, b in tr.recv):
                                got = True
                            if any(a <= u < b for a, b in tr.send):
                                got = False
            if got:
                holders.append(t)
        assert len(holders) == 1, (u, holders)
        owner.append(holders[0])
    assert stated == (lanes, tuple(owner))


def test_every_unit_has_a_target_and_each_rank_one_per_lane():
    for algorithm in HALVES:
        for dims in [(6,), (7,), (3, 4)]:
            lanes, _ = unit_owners(algorithm, dims)
            targets = unit_targets(algorithm, dims)
            p = math.prod(dims)
            for lane in range(lanes):
                assert sorted(targets[lane * p:(lane + 1) * p]) == list(range(p))


@pytest.mark.parametrize("algorithm", OTHERS)
def test_algorithms_without_halves_are_refused(algorithm):
    with pytest.raises(ValueError, match="no reduce-scatter"):
        build_half(algorithm, (4,), 0, tuple((i, i + 1) for i in range(4)), half=REDUCE_SCATTER)


def test_bad_arguments():
    with pytest.raises(ValueError, match="one block per rank"):
        build_half("ring", (4,), 0, ((0, 1),), half=REDUCE_SCATTER)
    with pytest.raises(ValueError, match="half must be"):
        build_half("ring", (4,), 0, tuple((i, i + 1) for i in range(4)), half="scan")
