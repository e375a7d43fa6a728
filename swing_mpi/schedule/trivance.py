"""Trivance allreduce schedules (Jürß, Addanki, Schmid, 2026): both neighbours at distance ``3^k``.

Algorithm:
    On a ring of ``d`` the in-dimension step ``t`` pairs node ``c`` with both
    ``c + s_t`` and ``c − s_t``, ``s_t = 3^t`` for ``t < L − 1`` and, on the
    last of the ``L = ⌈log3 d⌉`` steps, ``s_{L−1} = ⌈(d − 3^{L−1})/2⌉`` (which
    is ``3^{L−1}`` when ``d`` is a power of three). After ``t`` steps a node
    has heard from the ``3^t`` nodes around it, three times as many as
    before, so a ring of ``3^L`` needs ``L`` steps where Swing needs
    ``⌈log2 d⌉`` (and the two peers of a step use both ports of the dimension).

    ``trivance-bw`` is a reduce-scatter then an all-gather, composed over the
    dimensions by :mod:`.dimwise` (every peer differs in one coordinate) from
    one ring program per side, :func:`trivance_program`: the partial of the
    block ``j`` places ahead of a node moves along a path of steps ``t`` with
    a sign ``a_t`` each, ``Σ a_t·s_t ≡ j``, smallest step first. On a side
    of ``3^L`` the paths are the balanced-ternary digits of ``j``, so every
    block leaves every node exactly once and the data drops to a third
    every step; on other sides the paths are chosen by a greedy cover that
    keeps the data shrinking about as fast (:func:`trivance_paths`), again
    every block once. So each rank sends
    ``count·(p−1)/p`` elements per lane and phase on every shape, the
    minimum; what other sides pay is route length (Ξ routed), not bytes. The
    vector is cut into ``2D`` lanes as for ``swing-bw`` (plain lanes start in
    dimension ``k``; mirrored lanes run the mirror image ``c ↦ −c``, the
    distances negated), so at every step each dimension carries two lanes,
    each on both of its ports: all ``2D`` ports busy.

    ``trivance-lat``, the whole vector every step: :mod:`.trivance_lat`.

Restrictions:
    Commutative ops (the API sends non-commutative ones to ``recdoub``).

Cost (n bytes, D dims, ``L_k = ⌈log3 d_k⌉``):
    2·Σ L_k·α + 2·n·(p−1)/p·β/(2D)·Ξ + n·(p−1)/p·γ
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..blocks import split, split_range
from .base import Range, Schedule, open_schedule, port_lanes
from .dimwise import DimwiseLane, dimwise_lane, interleave, lane_blocks
from .rings import RingProgram, mirror_program, program_from_rows, ring_loads

__all__ = ["log3_ceil", "trivance_distances", "trivance_paths", "trivance_program", "trivance_lane",
           "build_trivance_bw", "is_power_of_three"]


def log3_ceil(d: int) -> int:
    """Return ``⌈log3 d⌉`` (0 for ``d ≤ 1``), in integers."""
    L, w = 0, 1
    while w < d:
        w *= 3
        L += 1
    return L


def is_power_of_three(d: int) -> bool:
    """Tell whether ``d`` is ``3^m`` for some ``m ≥ 0``."""
    while d > 1 and d % 3 == 0:
        d //= 3
    return d == 1


def trivance_distances(d: int) -> tuple[int, ...]:
    """Return the step distances ``s_t`` of a ring of ``d``: ``1, 3, 9, …`` and ``⌈(d − 3^{L−1})/2⌉`` last."""
    L = log3_ceil(d)
    if L == 0:
        return ()
    w = 3 ** (L - 1)
    return tuple(3 ** t for t in range(L - 1)) + ((d - w + 1) // 2,)


@lru_cache(maxsize=256)
def trivance_paths(d: int) -> dict[int, tuple[int, int]]:
    """Map every offset ``j ≠ 0`` (mod ``d``) to its first move ``(step t, sign a)``: to ``j − a·s_t``.

    The partials must form a tree into the owner: a path's remaining offset
    ``j − a·s_t`` moves only at later steps, so a node sends each block once,
    at the first step of its path. Two constructions, the one with less
    routed ring load kept (:func:`_cover_paths` where they tie):
    :func:`_cover_paths` sends as much as it can early (the data drops about
    to a third every step), :func:`_latest_paths` moves every offset as late
    as it can. On ``3^L`` both are the balanced-ternary digits of ``j``.
    """
    s = trivance_distances(d)
    best: dict[int, tuple[int, int]] | None = None
    best_load = 0.0
    for make in (_cover_paths, _latest_paths):
        paths = make(d, s)
        load = sum(ring_loads(_build(d, s, paths)))
        if best is None or load < best_load - 1e-12:
            best, best_load = paths, load
    assert best is not None
    return best


def _reach(d: int, s: tuple[int, ...]) -> list[set[int]]:
    """``S_t``: the offsets that steps ``t, t+1, …`` can bring to the owner (``S_L = {0}``)."""
    out = [{0}]
    for st in reversed(s):
        out.append({(x + a * st) % d for x in out[-1] for a in (0, 1, -1)})
    return out[::-1]


def _near(j: int, d: int) -> int:
    return min(j, d - j)


def _cover_paths(d: int, s: tuple[int, ...]) -> dict[int, tuple[int, int]]:
    """Paths that leave as few offsets as possible for later steps.

    ``G_t`` is the set of offsets still held after ``t`` steps (``G_0``: all).
    Step ``t`` keeps a small ``G_{t+1} ⊆ S_{t+1}`` (the owner first, then
    greedily the offset that lets the most of ``G_t`` reach it by ``±s_t``,
    nearest first), and every other offset of ``G_t`` moves to a kept one.
    Every ``G_t`` lies in ``S_t``, so the cover always exists, and ``G_L = {0}``.
    """
    S = _reach(d, s)
    held = set(range(d))
    first: dict[int, tuple[int, int]] = {}
    for t, st in enumerate(s):
        left = set(held)
        keep: set[int] = set()
        c = 0
        while True:
            keep.add(c)
            left -= {c, (c + st) % d, (c - st) % d}
            if not left:
                break
            cands = {y for u in left for y in (u, (u - st) % d, (u + st) % d) if y in S[t + 1]}
            c = max(cands, key=lambda y: (sum(1 for x in (y, (y + st) % d, (y - st) % d) if x in left),
                                          -_near(y, d), -y))
        for j in sorted(held - keep):
            a = min((a for a in (1, -1) if (j - a * st) % d in keep), key=lambda a: (_near((j - a * st) % d, d), -a))
            first[j] = (t, a)
        held = keep
    if held != {0}:
        raise AssertionError(f"trivance cover paths on {d} end holding {sorted(held)}")
    return first


def _latest_paths(d: int, s: tuple[int, ...]) -> dict[int, tuple[int, int]]:
    """Paths built from the owner back: each offset moves first at the latest step that can take it.

    The offsets reaching the owner at the last step are ``±s_{L−1}``, those one
    step earlier add ``±s_{L−2}``, and so on; an offset keeps the first path
    found (fewest hops among those found at one step). Every offset is reached
    because ``s_{L−1}`` lies between ``⌈(d − 3^{L−1})/2⌉`` and ``3^{L−1}``.
    """
    hops: dict[int, int] = {0: 0}
    first: dict[int, tuple[int, int]] = {}
    for t in reversed(range(len(s))):
        dist = _near(s[t] % d, d)
        for h, na, j in sorted((hops[j] + dist, -a, j) for j in hops for a in (1, -1)):
            child = (j - na * s[t]) % d  # j + a·s_t
            if child not in hops:
                hops[child] = h
                first[child] = (t, -na)
    if len(hops) != d:
        raise AssertionError(f"trivance paths cover {len(hops)} of {d} offsets")
    return first


def _build(d: int, s: tuple[int, ...], paths: dict[int, tuple[int, int]]) -> RingProgram:
    rows: list[list[dict[int, int]]] = [[{} for _ in range(d)] for _ in s]
    for j, (t, a) in paths.items():
        for c in range(d):
            q = (c + a * s[t]) % d
            rows[t][c][q] = rows[t][c].get(q, 0) | (1 << ((c + j) % d))
    return program_from_rows(d, rows, "trivance")


@lru_cache(maxsize=256)
def trivance_program(d: int) -> RingProgram:
    """Build Trivance's reduce-scatter on a ring of ``d``: step ``t`` sends to ``c ± s_t`` (:func:`trivance_paths`)."""
    return _build(d, trivance_distances(d), trivance_paths(d))


@lru_cache(maxsize=256)
def trivance_lane(dims: tuple[int, ...], start_dim: int, sign: int) -> DimwiseLane:
    """Return the lane that starts in ``start_dim`` (``sign=-1``: the mirror image), dimensions interleaved."""
    progs = tuple(None if d == 1 else trivance_program(d) if sign == 1 else mirror_program(trivance_program(d), a=0)
                  for d in dims)
    plan = interleave([prog.steps if prog is not None else 0 for prog in progs], start_dim)
    return DimwiseLane(tuple(dims), progs, tuple(plan))


@lru_cache(maxsize=256)
def _placement(lane: DimwiseLane, part: Range) -> tuple[Range, ...]:
    return tuple(lane_blocks(lane, split_range(part, math.prod(lane.dims))))


def build_trivance_bw(rank: int, dims: tuple[int, ...], count: int, *, algorithm: str = "trivance-bw") -> Schedule:
    """Bandwidth-optimal Trivance: reduce-scatter then all-gather on all ``2D`` lanes.

    ``meta["blocks"][lane][b]`` (also ``meta["owned"]``) is the element
    range of block ``b``, which rank ``b`` owns after the reduce-scatter.
    """
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims

    def port_of(q: int) -> int | None:
        return torus.port_towards(rank, q)

    lanes = port_lanes(dims)
    parts = split(count, len(lanes))
    out_lanes, names, placed = [], [], []
    for (name, start, sign), part in zip(lanes, parts):
        lane = trivance_lane(dims, start, sign)
        blocks = _placement(lane, part)
        rs, ag = dimwise_lane(rank, lane, blocks, port_of=port_of)
        out_lanes.append(tuple(rs + ag))
        names.append(name)
        placed.append(blocks)
    kinds = tuple("trivance" if d > 1 else "" for d in dims)
    meta: dict[str, object] = {"blocks": tuple(placed), "owned": tuple(placed),
                               "programs": (kinds,) * len(out_lanes)}
    return Schedule(algorithm, rank, p, count, dims, tuple(out_lanes), tuple(names), meta)
