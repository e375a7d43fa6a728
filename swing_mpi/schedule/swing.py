"""Swing allreduce schedules (De Sensi et al., NSDI 2024).

Algorithm:
    In-dimension step ``t`` pairs coordinate ``c`` with ``c + ρ(t)`` if ``c``
    is even and ``c − ρ(t)`` if odd, ``ρ(t) = Σ_{i≤t} (−2)^i = 1, −1, 3, −5, 11…``
    (peers about 2/3 as far as recursive doubling's). On a D-dimensional torus
    the vector is cut into ``2D`` parts, each reduced by its own sub-collective
    ("lane"): plain lane ``P < D`` starts in dimension ``P`` and moves to the
    next dimension with steps left after each step; mirrored lane ``P ≥ D``
    does the same with the sign flipped, so all ``2D`` ports carry data.

    ``swing-bw``: reduce-scatter then all-gather with the Listing-1 block sets
    (``blockset.py``); ``swing-bw-1port`` is the same with one lane.
    ``swing-lat``: the whole vector every step, both partners reduce.

Restrictions:
    Commutative ops (the API sends non-commutative ones to ``recdoub``).

Non-powers of two and odd p:
    ``swing-bw``: even sides of any size use "latest step wins" block sets
    (no block is ever sent twice). A torus with an odd side runs on the ring
    of all ``p`` ranks in rank order (documented fallback); an odd ring runs
    Swing on ranks ``0 … p−2`` and the extra rank ``e = p−1`` trades blocks
    directly (the paper's odd-p scheme): in reduce-scatter step ``s`` it exchanges its
    contribution to block ``b`` for ``b``'s contribution to block ``e`` with a
    group of ranks, in all-gather the final blocks.
    ``swing-lat``: each side ``d`` that is not a power of two is folded to
    ``2^⌊log2 d⌋``: coordinates ``c ≥ v`` hand their vector to ``c − (d − v)``
    first and get the result back last.

Cost (even p, β per byte, γ per reduced byte, n bytes, D dims):
    swing-bw:  2·L·α + 2·n·(p−1)/p · β/(2D) · Ξ + n·(p−1)/p · γ,  L = Σ⌈log2 d_k⌉
    swing-lat: L·α + n·L·β + n·L·γ   (plus 2α + 2nβ per folded side)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

from ..blocks import split, split_range
from ..topology import Torus
from .base import COPY, REDUCE, Range, Schedule, Step, Transfer, merge_ranges
from .blockset import bits, place_blocks, rs_ag_lane

__all__ = ["rho", "delta", "swing_peer", "lane_plan", "dim_peer_table", "build_swing_bw", "build_swing_lat"]


def rho(t: int) -> int:
    """Swing's signed offset at in-dimension step ``t``: 1, −1, 3, −5, 11, −21…"""
    return (1 - (-2) ** (t + 1)) // 3


def delta(t: int) -> int:
    """Hop distance ``|ρ(t)|``: 1, 1, 3, 5, 11, 21…"""
    return abs(rho(t))


def swing_peer(c: int, t: int, d: int, sign: int = 1) -> int:
    """Peer coordinate of ``c`` on a ring of ``d`` at in-dimension step ``t``."""
    off = rho(t) if c % 2 == 0 else -rho(t)
    return (c + sign * off) % d


def _steps_per_dim(dims: Sequence[int]) -> list[int]:
    return [math.ceil(math.log2(d)) if d > 1 else 0 for d in dims]


def lane_plan(dims: Sequence[int], start_dim: int) -> list[tuple[int, int]]:
    """``(dimension, in-dimension step)`` for each step of a lane.

    Starts in ``start_dim`` and after each step moves cyclically to the next
    dimension that still has steps left (exhausted dimensions are skipped).
    """
    left = _steps_per_dim(dims)
    done = [0] * len(dims)
    out: list[tuple[int, int]] = []
    k = start_dim
    D = len(dims)
    while any(left):
        for i in range(D):
            kk = (k + i) % D
            if left[kk]:
                break
        out.append((kk, done[kk]))
        done[kk] += 1
        left[kk] -= 1
        k = (kk + 1) % D
    return out


@lru_cache(maxsize=256)
def dim_peer_table(dims: tuple[int, ...], start_dim: int, sign: int,
                   coord_peer: Callable[[int, int, int, int], int]) -> tuple[tuple[int, ...], ...]:
    """``peers[s][x]`` along ``lane_plan(dims, start_dim)``: at each step only one
    coordinate moves, to ``coord_peer(c, t, d, sign)`` (Swing's or the XOR rule).
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
    active = [k for k, d in enumerate(dims) if d > 1]
    lanes = [(f"plain-{k}", k, 1) for k in active] + [(f"mirrored-{k}", k, -1) for k in active]
    return lanes[:ports] if ports else lanes


def build_swing_bw(rank: int, dims: tuple[int, ...], count: int, *, ports: int = 0,
                   algorithm: str = "swing-bw") -> Schedule:
    """Bandwidth-optimal Swing: reduce-scatter then all-gather on every lane."""
    torus = Torus(dims)
    p = torus.size
    meta: dict = {}
    if p == 1:
        return Schedule(algorithm, rank, p, count, tuple(dims), (), (), meta)

    def port_of(s: int, q: int) -> int | None:  # ports always on the real torus
        return torus.port_towards(rank, q)

    run_dims = tuple(dims)
    if any(d % 2 for d in dims if d > 1) and len([d for d in dims if d > 1]) > 1:
        meta["fallback"] = f"torus {torus} has an odd side: Swing runs on the ring of {p} ranks in rank order"
        run_dims = (p,)
    lanes = _lanes(run_dims, ports)
    parts = split(count, len(lanes))
    out_lanes, names = [], []
    for (name, start, sign), part in zip(lanes, parts):
        if p % 2:
            steps = _odd_ring_lane(rank, p, part, sign, port_of)
        else:
            rs, ag = rs_ag_lane(rank, _peer_table(run_dims, start, sign), split_range(part, p),
                                port_of=port_of)
            steps = rs + ag
        out_lanes.append(tuple(steps))
        names.append(name)
    return Schedule(algorithm, rank, p, count, tuple(dims), tuple(out_lanes), tuple(names), meta)


def _odd_ring_lane(rank: int, p: int, part: tuple[int, int], sign: int, port_of) -> list[Step]:
    """One lane on an odd ring: Swing on ``0 … p−2``, extra rank ``p−1`` direct."""
    e = p - 1
    g = p - 1  # size of the Swing group (even)
    slots = split_range(part, p)
    peers = _peer_table((g,), 0, sign)
    blocks = place_blocks(peers, slots[:g]) + [slots[e]]  # as rs_ag_lane places them
    L = math.ceil(math.log2(g))
    # which step each b in G trades with e (spread evenly over the L steps)
    group = [b * L // g for b in range(g)]
    if rank == e:
        rs: list[list[Transfer]] = [[] for _ in range(L)]
        ag: list[list[Transfer]] = [[] for _ in range(L)]
        for b in range(g):
            port = port_of(0, b)
            rs[group[b]].append(Transfer(b, (blocks[b],), (blocks[e],), REDUCE, False, port))
            ag[group[b]].append(Transfer(b, (blocks[e],), (blocks[b],), COPY, False, port))
        return ([Step(tuple(x), "reduce-scatter") for x in rs]
                + [Step(tuple(x), "all-gather") for x in reversed(ag)])
    rs_steps, ag_steps = rs_ag_lane(rank, peers, slots[:g], port_of=port_of)
    port = port_of(0, e)
    s = group[rank]
    rs_steps[s] = Step(rs_steps[s].transfers + (Transfer(e, (blocks[e],), (blocks[rank],), REDUCE, False, port),),
                       "reduce-scatter")
    a = L - 1 - s  # all-gather runs the steps in reverse
    ag_steps[a] = Step(ag_steps[a].transfers + (Transfer(e, (blocks[rank],), (blocks[e],), COPY, False, port),),
                       "all-gather")
    return rs_steps + ag_steps


def _fold_plan(dims: tuple[int, ...]):
    """Fold pairs per non-power-of-two side: ``[(k, [(src, tgt), …]), …]``."""
    torus = Torus(dims)
    virt = tuple(1 << (d.bit_length() - 1) for d in dims)
    plan = []
    for k, (d, v) in enumerate(zip(dims, virt)):
        if d == v:
            continue
        pairs = []
        for x in range(torus.size):
            c = torus.coords(x)
            if c[k] >= v and all(c[j] < virt[j] for j, _ in plan):
                t = list(c)
                t[k] -= d - v
                pairs.append((x, torus.rank(t)))
        plan.append((k, pairs))
    return virt, [pairs for _, pairs in plan]


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
    torus = Torus(dims)
    p = torus.size
    if p == 1:
        return Schedule(algorithm, rank, p, count, dims, (), (), {})
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
