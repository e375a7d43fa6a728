"""Bucket allreduce: ring reduce-scatter along each dimension, then all-gather back.

Algorithm:
    On a torus with ``A`` dimensions of side > 1 the vector is cut into
    ``2A`` parts (:func:`~swing_mpi.blocks.split`, as ``swing-bw`` does), one
    per lane, and all lanes run at once so every port carries data. Lane ``i``
    (``i < A``, "plain") visits the active dimensions in the cyclic order
    ``i, i+1, …`` and sends in the ``+`` direction; lane ``A + i``
    ("mirrored") visits them in the same order and sends in the ``−``
    direction.

    Within a lane the segment a rank owns shrinks dimension by dimension:
    it starts as the lane's part; a ring reduce-scatter (:func:`ring.ring_steps`)
    along dimension ``k`` among the ``d_k`` ranks that differ only in
    coordinate ``k`` (they all own the same segment, because they agree on
    every coordinate visited so far) cuts it into ``d_k`` sub-blocks and
    leaves the rank with coordinate ``c_k`` owning sub-block ``c_k`` fully
    reduced along ``k``. After the last dimension each rank owns a distinct
    ``1/p`` of the part, reduced over all ranks. The all-gather undoes this
    in reverse dimension order (ring all-gather of the sub-blocks along the
    last dimension first).

    On a square torus the ``A`` plain lanes are in ``A`` different dimensions
    at every step and each mirrored lane uses the opposite direction of its
    plain twin: the ``2A`` lanes use ``2A`` distinct ports per step. Where
    every side is 2 the mirrored lanes would repeat the plain ones (a ring of
    2 has one neighbour) and are left out (:func:`~.base.lane_signs`).

Restrictions:
    Commutative ops (each ring reduces in cyclic order; the API sends
    non-commutative ops to ``recdoub``). Every element is reduced by one
    owner and then copied, so results are bit-identical on all ranks.

Non-powers of two and odd p:
    None needed: rings of any size, including odd sides and sides of 2
    (where the ``+`` and ``−`` neighbour coincide; one transfer per step).
    Sides of 1 are skipped; ``p = 1`` is an empty schedule.

Cost (n bytes, ``A`` active dimensions of sides ``d_k``):
    2·Σ(d_k−1)·α + 2·n·(p−1)/p·β/(2A) + n·(p−1)/p·γ      (Ξ = 1: every message goes one hop)
    All ranks together send exactly ``2·count·(p−1)`` elements; one rank
    at most ``2·count·(p−1)/p + 2·(2A)·Σ(d_k−1)`` (block rounding).
"""

from __future__ import annotations

from functools import lru_cache

from ..blocks import split, split_range
from ..topology import Torus
from .base import Schedule, Step, open_schedule, port_lanes
from .ring import ring_steps

__all__ = ["build_bucket", "bucket_lanes"]


def bucket_lanes(dims: tuple[int, ...]) -> list[tuple[str, list[int], int]]:
    """``(name, dimension order, sign)`` of every lane (``2A`` of them; ``A`` where every side is 2)."""
    active = [k for k, d in enumerate(dims) if d > 1]
    a = len(active)
    order = [[active[(i + j) % a] for j in range(a)] for i in range(a)]
    return [(name, order[active.index(k)], sign) for name, k, sign in port_lanes(dims)]


def build_bucket(rank: int, dims: tuple[int, ...], count: int, *, algorithm: str = "bucket") -> Schedule:
    """Bucket allreduce of ``rank``: ``2·Σ(d_k−1)`` steps on each of ``2A`` lanes."""
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims
    coords = torus.coords(rank)
    lanes = bucket_lanes(tuple(dims))
    parts = split(count, len(lanes))
    out_lanes, names = [], []
    for (name, order, sign), part in zip(lanes, parts):
        seg = part
        rs_all: list[Step] = []
        ag_per_dim: list[list[Step]] = []
        for k in order:
            d, c = dims[k], coords[k]
            sub = split_range(seg, d)
            fwd, back = (2 * k, 2 * k + 1) if sign > 0 else (2 * k + 1, 2 * k)
            rs, ag = ring_steps(c, d, sub, torus.shift(rank, k, sign), torus.shift(rank, k, -sign),
                                sign=sign, port_next=fwd, port_prev=back)
            rs_all += rs
            ag_per_dim.append(ag)
            seg = sub[c]
        steps = rs_all + [st for ag in reversed(ag_per_dim) for st in ag]
        out_lanes.append(tuple(steps))
        names.append(name)
    return Schedule(algorithm, rank, p, count, tuple(dims), tuple(out_lanes), tuple(names),
                    {"owned": _owned(tuple(dims), count)})


@lru_cache(maxsize=16)
def _owned(dims: tuple[int, ...], count: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per lane, the range each rank owns after the reduce-scatter (for ``schedule/halves.py``).

    The same for every rank, so built once per shape and count (all ``p`` ranks' ranges each time
    made a rank's schedule cost O(p) splits: 0.35 s a rank on 64x64).
    """
    torus = Torus(dims)
    lanes = bucket_lanes(dims)
    parts = split(count, len(lanes))
    out = []
    for (_, order, _), part in zip(lanes, parts):
        mine = []
        for r in range(torus.size):
            seg, c = part, torus.coords(r)
            for k in order:
                seg = split_range(seg, torus.dims[k])[c[k]]
            mine.append(seg)
        out.append(tuple(mine))
    return tuple(out)
