"""Which ring program each lane of ``swing-bw`` runs on each side of the torus.

Algorithm:
    Even sides run Swing's program (:func:`~.swing_ring.dim_program`). An odd side
    ``d`` has several candidates, all taking at most ``⌈log2 d⌉`` steps:

    - the circulant (:func:`~.rings.circulant_program`): the data halves
      every step, but skips ``1, 2, 4, …`` take long routes;
    - the two-way program (:func:`~.rings.twoway_program`): one block to
      each neighbour per step, the ring's minimum of block-hops, in
      ``(d−1)/2`` steps (so for ``d ≤ 9`` only);
    - the two-sided circulant (:func:`~.rings.twosided_program`): blocks
      converge from both sides along the circulant's paths of a ring of
      ``(d+1)/2``: ``⌈log2((d+1)/2)⌉`` steps, fewer block-hops than the
      circulant, both ports in every step (the long prime sides 11, 13, 23);
    - staged programs (:func:`~.rings.staged_program`): ``d = r_0·r_1·…``,
      a circulant, two-way or two-sided program per radix, later radices with
      longer skips (``9 = 3·3`` two-way twice: 2 steps; ``15 = 5·3`` two-way
      then circulant: 4 steps).

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
    every lane; every combination of sides if there are at most
    :data:`MAX_COMBOS`, else one side at a time, starting from the best
    program shared by sides of equal length), then passes that change one
    (lane, side) at a time while that helps (at most 3).
    Computed once per shape (cached), the same on every rank.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np

from .base import port_lanes
from .dimwise import DimwiseLane, interleave
from .rings import (
    STAGE_KINDS,
    RingProgram,
    circulant_program,
    link_loads,
    mirror_program,
    odd_radices,
    staged_program,
    twosided_program,
    twoway_program,
)
from .swing_ring import dim_program

__all__ = ["odd_candidates", "lockstep_cost", "lane_programs", "MAX_COMBOS"]

MAX_COMBOS = 1024
"""Most combinations tried exhaustively."""

K = TypeVar("K")


TWO_SIDED_FROM = 7
"""The smallest odd side where the two-sided circulant differs from two-way (on 3 and 5 it is two-way)."""


@lru_cache(maxsize=128)
def odd_candidates(d: int) -> tuple[RingProgram, ...]:
    """List the programs an odd side ``d`` may run, none of more than ``⌈log2 d⌉`` steps, the circulant first.

    Then two-way, the two-sided circulant (from :data:`TWO_SIDED_FROM` up),
    then every staged program: each ordered factorization of ``d`` into odd
    factors, each stage circulant, two-way or two-sided.
    """
    if d % 2 == 0 or d < 3:
        raise ValueError(f"expected an odd side of at least 3, got {d}")
    limit = (d - 1).bit_length()
    out = [circulant_program(d)]
    if (d - 1) // 2 <= limit:
        out.append(twoway_program(d))
    if d >= TWO_SIDED_FROM:
        out.append(twosided_program(d))
    for radices in odd_radices(d)[1:]:
        for kinds in itertools.product(STAGE_KINDS, repeat=len(radices)):
            if any(k == "two-sided" and r < TWO_SIDED_FROM for r, k in zip(radices, kinds)):
                continue
            if sum(_stage_steps(r, k) for r, k in zip(radices, kinds)) <= limit:
                out.append(staged_program(d, tuple(zip(radices, kinds))))
    return tuple(out)


def _stage_steps(r: int, kind: str) -> int:
    """Return the steps of ``kind``'s program on a ring of ``r`` without building it (the choice is timed).

    tests/unit/test_odd_programs.py checks it against the built programs.
    """
    if kind == "two-way":
        return (r - 1) // 2
    if kind == "two-sided":
        return ((r - 1) // 2).bit_length()
    return (r - 1).bit_length()


def _held_share(prog: RingProgram) -> tuple[float, ...]:
    """After ``t`` steps: the largest share of the ring's blocks one node still holds."""
    held = prog.held_table()  # one lookup: hashing a program is not free
    return tuple(max(bin(h).count("1") for h in row) / prog.d for row in held)


def _link_arrays(prog: RingProgram) -> tuple[np.ndarray, ...]:
    """Per step: blocks on each directed link, as an array ``[way (+, −), node]``."""
    out = []
    for row in link_loads(prog):
        a = np.zeros((2, prog.d))
        for (c, way), n in row.items():
            a[0 if way == 1 else 1, c] = n
        out.append(a)
    return tuple(out)


class _Facts:
    """What the cost needs of one program: steps, link arrays, held shares (computed once)."""

    __slots__ = ("steps", "links", "held")

    def __init__(self, prog: RingProgram | None) -> None:
        self.steps = prog.steps if prog is not None else 0
        self.links = _link_arrays(prog) if prog is not None else ()
        self.held = _held_share(prog) if prog is not None else (1.0,)


_Sequence = list[tuple[int, np.ndarray, float]]


def _sequence(dims: Sequence[int], plan: Sequence[tuple[int, int]], facts: Sequence[_Facts], share: float) -> _Sequence:
    """One lane's steps as (dimension, link array, weight): the reduce-scatter, then it reversed."""
    done = [0] * len(dims)
    seq = []
    for k, t in plan:
        w = share / dims[k]
        for j, f in enumerate(facts):
            if j != k:
                w *= f.held[done[j]]
        seq.append((k, facts[k].links[t], w))
        done[k] += 1
    return seq + [(k, a[::-1], w) for k, a, w in reversed(seq)]


def _total(seqs: Sequence[_Sequence]) -> float:
    steps: list[dict[int, np.ndarray]] = []
    for seq in seqs:
        for i, (k, a, w) in enumerate(seq):
            if i == len(steps):
                steps.append({})
            acc = steps[i]
            acc[k] = acc[k] + w * a if k in acc else w * a
    return float(sum(max(float(a.max()) for a in x.values()) for x in steps))


def lockstep_cost(dims: Sequence[int], lanes: Sequence[DimwiseLane]) -> float:
    """Return ``Σ_k`` (busiest directed link at global step ``k``), in shares of the vector.

    The lanes split the vector evenly and run step ``k`` together; a lane's
    steps are its reduce-scatter, then the same steps reversed on the
    opposite links (the all-gather).
    """
    share = 1 / len(lanes)
    return _total([_sequence(dims, lane.plan, [_Facts(p) for p in lane.programs], share) for lane in lanes])


def _descend(pick: dict[K, int], choices: dict[K, int], score: Callable[[dict[K, int]], Any],
             rounds: int = 3) -> dict[K, int]:
    """Coordinate descent from ``pick``: the keys of ``choices`` in turn take their lowest-``score`` option.

    Key ``key`` has options ``0 … choices[key] - 1``; the others stay fixed while it moves. Up to
    ``rounds`` passes over the keys, fewer once a pass changes nothing; returns where it stopped.
    """
    for _ in range(rounds):
        before = dict(pick)
        for key, n in choices.items():
            pick = min(({**pick, key: i} for i in range(n)), key=score)
        if pick == before:
            break
    return pick


@lru_cache(maxsize=128)
def lane_programs(dims: tuple[int, ...]) -> dict[tuple[int, int], tuple[RingProgram | None, ...]]:
    """Map each lane ``(start dimension, sign)`` to its program per side (a mirrored lane mirrors its plain twin's)."""
    lanes = port_lanes(dims)
    share = 1 / len(lanes)
    starts = [start for _, start, sign in lanes if sign == 1]
    odd = [k for k, d in enumerate(dims) if d > 1 and d % 2]
    keys = [(s, k) for s in starts for k in odd]
    cands = {k: odd_candidates(dims[k]) for k in odd}
    # programs[k][sign][i]: side k's i-th choice (even sides: one), plain or mirrored, and its facts
    programs: dict[int, dict[int, list[RingProgram | None]]] = {}
    facts: dict[int, dict[int, list[_Facts]]] = {}
    for k, d in enumerate(dims):
        same = next((j for j in range(k) if dims[j] == d), None)
        if same is not None:  # sides of equal length: the same programs and facts
            programs[k], facts[k] = programs[same], facts[same]
            continue
        base: list[RingProgram | None] = list(cands[k]) if k in cands else [dim_program(d) if d > 1 else None]
        programs[k] = {1: base, -1: [p if p is None else mirror_program(p) for p in base]}
        facts[k] = {sign: [_Facts(p) for p in progs] for sign, progs in programs[k].items()}
    memo: dict[tuple[int, int, tuple[int, ...]], tuple[_Sequence, int]] = {}

    def lane_seq(start: int, sign: int, pick: tuple[int, ...]) -> tuple[_Sequence, int]:
        key = (start, sign, pick)
        if key not in memo:
            fs = [facts[k][sign][i] for k, i in enumerate(pick)]
            plan = interleave([f.steps for f in fs], start)
            memo[key] = (_sequence(dims, plan, fs, share), len(plan))
        return memo[key]

    def score(pick: dict[tuple[int, int], int]) -> tuple[float, int, int]:
        seqs, lengths = [], []
        for _, start, sign in lanes:
            seq, n = lane_seq(start, sign, tuple(pick.get((start, k), 0) for k in range(len(dims))))
            seqs.append(seq)
            lengths.append(n)
        return (round(_total(seqs), 12), max(lengths), sum(pick.values()))

    ranges = [range(len(cands[k])) for _, k in keys]
    if math.prod(len(r) for r in ranges) <= MAX_COMBOS:
        best = min((dict(zip(keys, c)) for c in itertools.product(*ranges)), key=score)
    else:
        def side_score(m: dict[int, int]) -> tuple[float, int, int]:
            return score({(s, k): m[k] for s, k in keys})

        if math.prod(len(cands[k]) for k in odd) <= MAX_COMBOS:
            side = min((dict(zip(odd, c)) for c in itertools.product(*[range(len(cands[k])) for k in odd])),
                       key=side_score)
        else:  # one side at a time, the others fixed, while that helps; from the circulant everywhere
            # and from the best choice that gives equal sides the same program (one side alone may not
            # gain: on 45x45 a staged program on one side only is worse than the circulant on both)
            first = {dims[k]: k for k in reversed(odd)}  # each odd length: its first side
            lengths = list(first)
            starts_from = [dict.fromkeys(odd, 0)]
            if math.prod(len(cands[first[d]]) for d in lengths) <= MAX_COMBOS:
                starts_from.append(min(({k: c[lengths.index(dims[k])] for k in odd}
                                        for c in itertools.product(*[range(len(cands[first[d]])) for d in lengths])),
                                       key=side_score))
            side = min((_descend(start, {k: len(cands[k]) for k in odd}, side_score) for start in starts_from),
                       key=side_score)
        # then one (lane, side) at a time while that helps
        best = _descend({(s, k): side[k] for s, k in keys}, {key: len(cands[key[1]]) for key in keys}, score)
    return {(s, sign): tuple(programs[k][sign][best.get((s, k), 0)] for k in range(len(dims)))
            for _, s, sign in lanes}
