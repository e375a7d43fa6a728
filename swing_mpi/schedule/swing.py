"""Swing allreduce schedules (De Sensi et al., NSDI 2024).

Algorithm:
    In-dimension step ``t`` pairs coordinate ``c`` with ``c + ρ(t)`` if ``c``
    is even and ``c − ρ(t)`` if odd, ``ρ(t) = Σ_{i≤t} (−2)^i = 1, −1, 3, −5, 11…``
    (peers about 2/3 as far as recursive doubling's). On a D-dimensional torus
    the vector is cut into ``2D`` parts, each reduced by its own sub-collective
    ("lane"): plain lane ``P < D`` starts in dimension ``P`` and moves to the
    next dimension with steps left after each step; mirrored lane ``P ≥ D``
    does the same with the sign flipped, so all ``2D`` ports carry data.
    Where every side is 2 a ring has one neighbour and a mirrored lane would
    repeat its plain twin: there the ``D`` plain lanes run alone
    (:func:`~.base.lane_signs`).

    ``swing-bw``: reduce-scatter then all-gather with the Listing-1 block sets
    (``blockset.py``); ``swing-bw-1port`` is the same with one lane.
    ``swing-lat``: the whole vector every step, both partners reduce.

Restrictions:
    Commutative ops (the API sends non-commutative ones to ``recdoub``).

Torus locality on every shape:
    ``swing-bw`` is built by :mod:`.dimwise`: one reduce-scatter *program* per
    side, run on every ring of that dimension and interleaved across the
    dimensions, so every message goes to a rank that differs in exactly one
    coordinate (the torus is never flattened into one long ring). Plain and
    mirrored lanes run mirror images of the programs, so at every step of a
    lane pair a node leaves by the two opposite ports of one dimension.

    - even side, power of two: Swing's ``ρ(t)`` with Listing-1 block sets;
    - even side, not a power of two: the same, with the step offsets of
      :data:`EVEN_OFFSETS` (found by :func:`search_offsets`; e.g. 6: 1, −1, 1
      instead of 1, −1, 3). Same steps, less traffic: routed Ξ on 6x6 1.279 →
      0.972, 10x10 1.456 → 1.050, 12x12 1.243 → 1.076;
    - odd side: a program chosen per lane by the lockstep link loads
      (:mod:`.programs`) among the circulant
      (:func:`~.rings.circulant_program`: ``⌈log2 d⌉`` steps, skips
      ``1, 2, 4, …`` and ``d − 2^{L−1}`` last, the data halving every step)
      the two-way program (:func:`~.rings.twoway_program`: one block to
      each neighbour per step, the ring's minimum of block-hops, in
      ``(d−1)/2`` steps) and staged programs (:func:`~.rings.staged_program`:
      ``15 = 5·3`` two-way on 5, then the circulant on 3 with skip 5), never
      more steps than the circulant.

    Why, from the routed model (ceilings of swing-bw): the paper's extra
    node, on a torus, holds more data than the other nodes of its ring for a
    while, and the other dimensions' steps then carry that much more on the
    extra node's row; its direct trades also take long routes (3x4 86%, 5x8
    56%, 7x8 54%, 15x16 50%). Relaying through its neighbours gives 5x8 59%,
    7x8 60%, 15x16 58%; one-way ring steps 60%, 52%, 38%. The circulant alone
    on every odd side: 3x4 92%, 3x4x4 87%, 5x8 75.5%, 7x8 73%, 15x16 69%, 5x5
    86%, 7x7 74%, 9x9 73%: its skips ``1, 2, 4`` are recursive doubling's,
    where Swing's even sides move ``1, 1, 3``. With the two-way programs
    where they are cheaper: 5x8 80%, 7x8 77% (two-way in the lane that starts
    in the odd side, the circulant in the other), 15x16 77% (staged), 9x8
    77%, 5x5 104%, 7x7 102%, 9x9 101%, 3x5 94%; 3x4 and 3x4x4 keep the
    circulant.
    ``swing-bw-1port`` runs the first lane, with the circulant (one port per
    step). ``swing-lat`` folds every side that is not a power of two inside
    its own dimension, so its peers too differ in one coordinate.

Cost (even p, β per byte, γ per reduced byte, n bytes, D dims):
    swing-bw:  2·L·α + 2·n·(p−1)/p · β/(2D) · Ξ + n·(p−1)/p · γ,  L ≤ Σ⌈log2 d_k⌉ (the longest lane)
    swing-lat: L·α + n·L·β + n·L·γ   (plus 2α + 2nβ per folded side)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from functools import lru_cache

from ..blocks import split, split_range
from ..topology import Torus
from .base import COPY, REDUCE, Range, Schedule, Step, Transfer, merge_ranges, open_schedule, port_lanes
from .blockset import bits, blocksets
from .dimwise import DimwiseLane, dimwise_lane, fold_pairs, interleave, lane_blocks
from .programs import lane_programs
from .rings import involution_program, ring_loads
from .swing_ring import EVEN_OFFSETS, delta, dim_program, offset_table, rho, ring_offsets

__all__ = [
    "rho", "delta", "swing_peer", "lane_plan", "dim_peer_table", "ring_offsets", "offset_table", "dim_program",
    "swing_lane", "build_swing_bw", "build_swing_lat", "EVEN_OFFSETS", "offsets_cost", "search_offsets",
]

def swing_peer(c: int, t: int, d: int, sign: int = 1) -> int:
    """Peer coordinate of ``c`` on a ring of ``d`` at in-dimension step ``t``."""
    off = rho(t) if c % 2 == 0 else -rho(t)
    return (c + sign * off) % d


def _steps_per_dim(dims: Sequence[int]) -> list[int]:
    return [math.ceil(math.log2(d)) if d > 1 else 0 for d in dims]


def lane_plan(dims: Sequence[int], start_dim: int) -> list[tuple[int, int]]:
    """``(dimension, in-dimension step)`` for each step of a lane.

    Starts in ``start_dim`` and after each step moves cyclically to the next
    dimension that still has steps left (exhausted dimensions are skipped):
    :func:`~.dimwise.interleave` of ``⌈log2 d⌉`` steps per side.
    """
    return interleave(_steps_per_dim(dims), start_dim)


@lru_cache(maxsize=256)
def dim_peer_table(dims: tuple[int, ...], start_dim: int, sign: int,
                   coord_peer: Callable[[int, int, int, int], int]) -> tuple[tuple[int, ...], ...]:
    """Build ``peers[s][x]`` along ``lane_plan(dims, start_dim)``.

    At each step only one coordinate moves, to ``coord_peer(c, t, d, sign)``
    (Swing's or the XOR rule).
    """
    torus = Torus(dims)
    coords = [torus.coords(x) for x in range(torus.size)]
    table = []
    for k, t in lane_plan(dims, start_dim):
        row = []
        for c in coords:
            cc = list(c)
            cc[k] = coord_peer(c[k], t, dims[k], sign)
            row.append(torus.rank(cc))
        table.append(tuple(row))
    return tuple(table)


def _peer_table(dims: tuple[int, ...], start_dim: int, sign: int) -> tuple[tuple[int, ...], ...]:
    return dim_peer_table(dims, start_dim, sign, swing_peer)


def _lanes(dims: tuple[int, ...], ports: int) -> list[tuple[str, int, int]]:
    """``(name, start_dim, sign)`` per lane; ``ports`` is 1 or 2D."""
    lanes = port_lanes(dims)
    return lanes[:ports] if ports else lanes


def offsets_cost(d: int, offsets: Sequence[int]) -> float | None:
    """``Σ_t load_t / 2^t`` of an even ring's offsets (``None`` if they do not reach every node).

    ``load_t`` is step ``t``'s busiest routed link (:func:`~.rings.ring_loads`);
    the weight ``2^−t`` stands for the other dimensions' halving on a torus.
    """
    table = offset_table(d, offsets)
    bs = blocksets(table)
    if not all(bs.covers_all(r) for r in range(d)):
        return None
    loads = ring_loads(involution_program(table))
    return sum(x / 2 ** t for t, x in enumerate(loads))


def search_offsets(d: int, *, prefixes: Sequence[tuple[int, ...]] = ()) -> tuple[int, ...]:
    """Find the offsets of an even ring with the lowest :func:`offsets_cost` (how :data:`EVEN_OFFSETS` was made).

    Step 0 is ``+1``; step ``t`` tries every odd offset up to ``2^t + 1`` in
    size (Swing's ``|ρ(t)|`` is about ``2^{t+1}/3``); ``prefixes`` fixes the
    first steps to one of the given sequences (to bound the search on long
    rings). Ties keep Swing's own offsets, then the first found.
    """
    L = math.ceil(math.log2(d))
    own = tuple(rho(t) for t in range(L))
    best_cost, best = offsets_cost(d, own), own
    assert best_cost is not None
    lists = [[1]] + [[o for o in range(-min(2 ** t + 1, d // 2), min(2 ** t + 1, d // 2) + 1) if o % 2]
                     for t in range(1, L)]
    if prefixes:
        n = len(prefixes[0])
        combos = (pre + rest for pre in prefixes for rest in itertools.product(*lists[n:]))
    else:
        combos = (tuple(c) for c in itertools.product(*lists))
    for offs in combos:
        cost = offsets_cost(d, offs)
        if cost is not None and cost < best_cost - 1e-12:
            best_cost, best = cost, offs
    return best


@lru_cache(maxsize=256)
def swing_lane(dims: tuple[int, ...], start_dim: int, sign: int, ports: int = 0) -> DimwiseLane:
    """Return the lane that starts in ``start_dim`` (``sign=-1``: mirrored), dimensions interleaved.

    All ports (``ports=0``): each side's program as :func:`~.programs.lane_programs`
    chose it for this lane; one port: :func:`dim_program` (the circulant on odd sides).
    """
    if ports == 1 or all(d % 2 == 0 or d == 1 for d in dims):
        progs = tuple(dim_program(d, sign) for d in dims)
    else:
        progs = lane_programs(tuple(dims))[(start_dim, sign)]
    plan = interleave([prog.steps if prog is not None else 0 for prog in progs], start_dim)
    return DimwiseLane(tuple(dims), progs, tuple(plan))


@lru_cache(maxsize=256)
def _placement(lane: DimwiseLane, part: Range) -> tuple[Range, ...]:
    return tuple(lane_blocks(lane, split_range(part, math.prod(lane.dims))))


def build_swing_bw(rank: int, dims: tuple[int, ...], count: int, *, ports: int = 0,
                   algorithm: str = "swing-bw") -> Schedule:
    """Bandwidth-optimal Swing: reduce-scatter then all-gather on every lane.

    ``meta["blocks"][lane][b]`` (also ``meta["owned"]``) is the element range
    of block ``b``, which rank ``b`` owns after the reduce-scatter, in that
    lane; ``meta["programs"][lane]`` names the program of each side in that lane.
    """
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims

    def port_of(q: int) -> int | None:
        return torus.port_towards(rank, q)

    lanes = _lanes(dims, ports)
    parts = split(count, len(lanes))
    out_lanes, names, placed, kinds = [], [], [], []
    for (name, start, sign), part in zip(lanes, parts):
        lane = swing_lane(dims, start, sign, 1 if ports == 1 else 0)
        blocks = _placement(lane, part)
        rs, ag = dimwise_lane(rank, lane, blocks, port_of=port_of)
        out_lanes.append(tuple(rs + ag))
        names.append(name)
        placed.append(blocks)
        kinds.append(tuple(prog.kind if prog is not None else "" for prog in lane.programs))
    meta: dict[str, object] = {
        "blocks": tuple(placed),
        "owned": tuple(placed),  # the same: block b ends up with rank b (what schedule/halves.py reads)
        "programs": tuple(kinds),
    }
    return Schedule(algorithm, rank, p, count, dims, tuple(out_lanes), tuple(names), meta)


def _fold_plan(dims: tuple[int, ...]):
    """Fold pairs per non-power-of-two side: ``((src, tgt), …)`` per folded side, ``c ≥ v`` onto ``c − (d − v)``."""
    virt = tuple(1 << (d.bit_length() - 1) for d in dims)
    return virt, fold_pairs(dims, virt, lambda c, d, v: c - (d - v))


@lru_cache(maxsize=64)
def _lat_plan(dims: tuple[int, ...]):
    """Everything about swing-lat that does not depend on the rank."""
    torus = Torus(dims)
    virt, folds = _fold_plan(dims)
    active = [all(c < v for c, v in zip(torus.coords(x), virt)) for x in range(torus.size)]
    core = []  # per core step: peer of every active rank (None if inactive)
    for k, t in lane_plan(virt, 0):
        row: list[int | None] = []
        for x in range(torus.size):
            if not active[x]:
                row.append(None)
                continue
            c = list(torus.coords(x))
            c[k] = swing_peer(c[k], t, virt[k])
            row.append(torus.rank(c))
        core.append(row)
    # which contributions every rank holds before each core step (contribution form)
    have = [1 << x for x in range(torus.size)]
    for pairs in folds:
        for src, tgt in pairs:
            have[tgt] |= have[src]
    haves = []
    for row in core:
        haves.append(list(have))
        have = [have[x] | have[q] if q is not None else have[x] for x, q in enumerate(row)]
    return folds, core, haves


def build_swing_lat(rank: int, dims: tuple[int, ...], count: int, *, exact: bool = True,
                    algorithm: str = "swing-lat") -> Schedule:
    """Latency-optimal Swing: one lane, sides folded to powers of two.

    ``exact=True`` (integer sums, MAX, MIN, bitwise and logical ops): partial
    results are exchanged and both partners reduce, ``count`` elements a step.
    ``exact=False`` (floating-point SUM/PROD, user ops): Swing's per-rank
    reduction trees differ, which would make floating-point results differ in
    the last bits between ranks. Instead the ranks gather the contributions
    they lack along the same peers and every rank combines all ``p`` of them
    in rank order: bit-identical everywhere and order-preserving, at the price
    of ``count·(p−1)`` elements received instead of ``count·log2 p``.
    """
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims
    folds, core, haves = _lat_plan(tuple(dims))
    n = count

    def slots(mask: int) -> tuple[Range, ...]:
        return merge_ranges([(b * n, (b + 1) * n) for b in bits(mask)])

    whole = ((0, n),) if n else ()
    res = ((p - 1) * n, p * n) if n else None
    result = (res,) if res else ()
    fold: list[Step] = []
    unfold: list[Step] = []
    fold_have = [1 << x for x in range(p)]
    for pairs in folds:
        tr: tuple[Transfer, ...] = ()
        back: tuple[Transfer, ...] = ()
        for src, tgt in pairs:
            if rank not in (src, tgt):
                continue
            q = tgt if rank == src else src
            port = torus.port_towards(rank, q)
            data = whole if exact else slots(fold_have[src])
            out = whole if exact else result
            if rank == src:
                tr = (Transfer(q, data, (), REDUCE, False, port),)
                back = (Transfer(q, (), out, COPY, False, port),)
            else:
                tr = (Transfer(q, (), data, REDUCE if exact else COPY, q < rank, port),)
                back = (Transfer(q, out, (), COPY, False, port),)
        for src, tgt in pairs:
            fold_have[tgt] |= fold_have[src]
        fold.append(Step(tr, "fold"))
        unfold.append(Step(back, "unfold"))
    unfold.reverse()

    steps_core: list[Step] = []
    for row, have in zip(core, haves):
        q = row[rank]
        tr = ()
        if q is not None:
            port = torus.port_towards(rank, q)
            if exact:
                tr = (Transfer(q, whole, whole, REDUCE, q < rank, port),)
            else:
                tr = (Transfer(q, slots(have[rank] & ~have[q]), slots(have[q] & ~have[rank]),
                               COPY, False, port),)
        steps_core.append(Step(tr, "exchange"))
    if exact:
        steps = fold + steps_core + unfold
        return Schedule(algorithm, rank, p, count, tuple(dims), (tuple(steps),), ("whole",), {})
    active = not core or core[0][rank] is not None
    combine = Step((), "combine", combine=active)
    steps = fold + steps_core + [combine] + unfold
    return Schedule(algorithm, rank, p, count, tuple(dims), (tuple(steps),), ("contributions",),
                    {"form": "contributions"}, slots=p, input_slot=rank, result_slot=p - 1)
