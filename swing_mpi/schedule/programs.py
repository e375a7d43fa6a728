"""Which ring program each lane of ``swing-bw`` runs on each side of the torus.

Algorithm:
    Even sides run Swing's program (:func:`~.swing.dim_program`). An odd side
    ``d`` has several candidates, all taking at most ``⌈log2 d⌉`` steps:

    - the circulant (:func:`~.dimwise.circulant_program`): the data halves
      every step, but skips ``1, 2, 4, …`` take long routes;
    - the two-way program (:func:`~.dimwise.twoway_program`): one block to
      each neighbour per step, the ring's minimum of block-hops, in
      ``(d−1)/2`` steps (so for ``d ≤ 9`` only);
    - its mixed-radix forms (``9 = 3·3``: 2 steps, ``15 = 5·3``: 3 steps).

    Each plain lane (and its mirror, which runs the mirror image) may run a
    different candidate on each odd side: the lanes run in lockstep, and a
    light two-way step in one lane can sit beside a heavy halving step of
    another lane in another dimension. The choice minimises the lockstep
    bandwidth cost :func:`lockstep_cost`: the sum over global steps of the
    busiest directed link, where lane ``ℓ``'s step in dimension ``k`` puts on
    each ring link of that dimension the program's blocks on that link times
    the share of the other dimensions' blocks the lane still holds, and the
    all-gather repeats the reduce-scatter in reverse, on the opposite links.
    Ties go to fewer steps, then to the circulant.

    For translation-invariant programs this is exactly the routed model of
    :mod:`swing_mpi.model` (up to its constant normalisation); where the
    held sets differ between nodes (even sides that are not powers of two)
    it is an upper bound, the same for every candidate.

Restrictions:
    For the all-ports lanes only; ``swing-bw-1port`` keeps one port per step
    and so the circulant.

Cost:
    Every combination of candidates per (lane, odd side) when there are at
    most :data:`MAX_COMBOS`; otherwise the best choice per side (the same for
    every lane) and then one pass that changes one (lane, side) at a time.
    Computed once per shape (cached), the same on every rank.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

from .base import port_lanes
from .dimwise import (
    DimwiseLane,
    RingProgram,
    circulant_program,
    interleave,
    link_loads,
    mirror_program,
    odd_radices,
    twoway_program,
)

__all__ = ["odd_candidates", "lockstep_cost", "lane_programs", "MAX_COMBOS"]

MAX_COMBOS = 4096
"""Most combinations tried exhaustively."""


@lru_cache(maxsize=128)
def odd_candidates(d: int) -> tuple[RingProgram, ...]:
    """List the programs an odd side ``d`` may run: the circulant first, then two-way forms of ≤ ``⌈log2 d⌉`` steps."""
    if d % 2 == 0 or d < 3:
        raise ValueError(f"expected an odd side of at least 3, got {d}")
    limit = (d - 1).bit_length()
    out = [circulant_program(d)]
    for radices in odd_radices(d):
        if sum((r - 1) // 2 for r in radices) <= limit:
            out.append(twoway_program(d, radices))
    return tuple(out)


@lru_cache(maxsize=512)
def _held_share(prog: RingProgram) -> tuple[float, ...]:
    """After ``t`` steps: the largest share of the ring's blocks one node still holds."""
    return tuple(max(bin(prog.held(c, t)).count("1") for c in range(prog.d)) / prog.d
                 for t in range(prog.steps + 1))


def lockstep_cost(dims: Sequence[int], lanes: Sequence[DimwiseLane]) -> float:
    """Return ``Σ_k`` (busiest directed link at global step ``k``), in shares of the vector.

    The lanes split the vector evenly and run step ``k`` together; a lane's
    steps are its reduce-scatter, then the same steps reversed on the
    opposite links (the all-gather).
    """
    share = 1 / len(lanes)
    steps: list[dict[tuple[int, int, int], float]] = []
    for lane in lanes:
        done = [0] * len(dims)
        seq = []
        for k, t in lane.plan:
            prog = lane.programs[k]
            assert prog is not None
            other = share / dims[k]
            for j, pj in enumerate(lane.programs):
                if j != k and pj is not None:
                    other *= _held_share(pj)[done[j]]
            seq.append({(k, c, way): n * other for (c, way), n in link_loads(prog)[t].items()})
            done[k] += 1
        seq += [{(k, c, -way): v for (k, c, way), v in x.items()} for x in reversed(seq)]
        for i, x in enumerate(seq):
            if i == len(steps):
                steps.append({})
            acc = steps[i]
            for key, v in x.items():
                acc[key] = acc.get(key, 0.0) + v
    return sum(max(x.values(), default=0.0) for x in steps)


def _lanes(dims: tuple[int, ...], even: dict[int, RingProgram | None],
           pick: dict[tuple[int, int], RingProgram]) -> list[DimwiseLane]:
    out = []
    for _, start, sign in port_lanes(dims):
        progs = []
        for k in range(len(dims)):
            prog = pick[(start, k)] if (start, k) in pick else even[k]
            progs.append(prog if prog is None or sign == 1 else mirror_program(prog))
        plan = interleave([p.steps if p is not None else 0 for p in progs], start)
        out.append(DimwiseLane(dims, tuple(progs), tuple(plan)))
    return out


@lru_cache(maxsize=128)
def lane_programs(dims: tuple[int, ...]) -> dict[int, tuple[RingProgram | None, ...]]:
    """Map each plain lane's start dimension to its program per side (mirrored lanes mirror them)."""
    from .swing import dim_program  # even sides: Swing's programs (swing imports this module)

    even = {k: (dim_program(d) if d % 2 == 0 or d == 1 else None) for k, d in enumerate(dims)}
    starts = [start for _, start, sign in port_lanes(dims) if sign == 1]
    odd = [k for k, d in enumerate(dims) if d > 1 and d % 2]
    keys = [(s, k) for s in starts for k in odd]
    cands = {k: odd_candidates(dims[k]) for k in odd}

    def score(pick: dict[tuple[int, int], RingProgram]) -> tuple[float, int, int]:
        lanes = _lanes(dims, even, pick)
        cost = lockstep_cost(dims, lanes)
        rank = sum(cands[k].index(p) for (_, k), p in pick.items())
        return (round(cost, 12), max(len(lane.plan) for lane in lanes), rank)

    if math.prod(len(cands[k]) for _, k in keys) <= MAX_COMBOS:
        combos = (dict(zip(keys, c)) for c in itertools.product(*[cands[k] for _, k in keys]))
        best = min(combos, key=score) if keys else {}
    else:
        per_side = (dict(zip(odd, c)) for c in itertools.product(*[cands[k] for k in odd]))
        side = min(per_side, key=lambda m: score({(s, k): m[k] for s, k in keys}))
        best = {(s, k): side[k] for s, k in keys}
        for key in keys:
            options = [{**best, key: p} for p in cands[key[1]]]
            best = min(options, key=score)
    return {s: tuple(best.get((s, k), even[k]) for k in range(len(dims))) for s in starts}
