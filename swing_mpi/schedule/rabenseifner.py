"""Rabenseifner's allreduce: recursive halving reduce-scatter + recursive doubling all-gather.

Algorithm:
    Bandwidth-optimal, one port (one lane). Step ``s`` pairs every rank with
    an XOR partner and the block sets follow from the generic Listing-1
    machinery (:func:`blockset.rs_ag_lane`): reduce-scatter for ``s = 0 … L−1``
    (the payload halves every step), all-gather in reverse. Every block is
    reduced by its one owner and then copied, so all ranks get bit-identical
    results.

    On a torus (all sides powers of two) this is the "torus-optimized" form
    of the paper's Table 2: step ``s`` XORs one coordinate, cycling through
    the dimensions with :func:`swing.lane_plan` (dimension ``k``, in-dimension
    step ``t``: ``c_k → c_k XOR 2^t``, peer distance ``2^⌊s/D⌋`` on a cube);
    on a ring it is plain ``r XOR 2^s``. The nearest peer comes first, when
    the payload is largest.

Restrictions:
    Commutative ops (a block's operands are combined in XOR-tree order, not
    rank order; the API sends non-commutative ops to ``recdoub``).

Non-powers of two and odd p:
    MPICH's fold on the rank count (:func:`recdoub.fold_ranks`, :func:`recdoub.fold_steps`):
    ``p' = 2^⌊log2 p⌋``, ``rem = p − p'``. First every even rank ``r < 2·rem``
    hands its whole vector to ``r + 1`` (which reduces it, ``r``'s operand
    first) and sits out; the ``p'`` survivors take virtual ids (``r // 2``
    for ``r < 2·rem``, else ``r − rem``) and run the 1-D form
    ``v XOR 2^s`` over ``p'`` blocks owned by the virtual ids; last,
    ``r + 1`` hands the result back to ``r``. Ports of folded runs are the
    first hop of a minimal route on the real torus.

Cost (n bytes, L = log2 p'):
    2·L·α + 2·n·(p'−1)/p'·β·Ξ + n·(p'−1)/p'·γ
    (+ 2α + 2·n·β + n·γ when p is not a power of two).
    Ξ is the congestion factor of the torus-optimized form: Σ_s 2^⌊s/D⌋/2^{s+1}
    on a D-dimensional cube (1.5 / 1.17 / 1.07 on 2-D / 3-D / 4-D).
    Every rank sends each non-owned block exactly once in the reduce-scatter;
    all ranks together send ``2·count·(p'−1)`` (+ ``2·rem·count`` for the fold).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from ..blocks import split, split_range
from ..topology import Torus
from .base import Range, Schedule, Step, merge_ranges, open_schedule, port_lanes
from .blockset import place_blocks, rs_ag_lane
from .recdoub import fold_ranks, fold_real, fold_steps, fold_virtual
from .swing import dim_peer_table, lane_plan

__all__ = ["build_rabenseifner", "build_xor_bw", "xor_peer", "xor_direction", "xor_peer_table"]


def xor_peer(c: int, t: int, d: int, sign: int = 1) -> int:
    """``c XOR 2^t`` on a ring of ``d`` (a power of two); ``sign = −1``: mirrored.

    The mirrored peer moves the same distance ``2^t`` the other way:
    ``c − ((c XOR 2^t) − c) mod d`` (Swing's rule for mirroring, "flip the
    sign of the offset"; the authors' libswing ``get_peer_recdoub`` does the
    same). It is an involution too: a ``c`` with bit ``t`` clear moves
    ``−2^t`` and lands on a coordinate with bit ``t`` set (the borrow leaves
    the low bits alone), which moves ``+2^t`` back.
    """
    q = c ^ (1 << t)
    return q if sign > 0 else (2 * c - q) % d


def xor_direction(c: int, t: int, sign: int = 1) -> int:
    """``+1`` or ``−1``: which way :func:`xor_peer` moves ``c`` (by ``2^t``)."""
    up = 1 if (c >> t) & 1 == 0 else -1
    return up if sign > 0 else -up


def xor_peer_table(dims: tuple[int, ...], start_dim: int, sign: int) -> tuple[tuple[int, ...], ...]:
    """``peers[s][x]``: per-dimension XOR peers along ``lane_plan(dims, start_dim)``."""
    return dim_peer_table(dims, start_dim, sign, xor_peer)


def build_xor_bw(rank: int, dims: tuple[int, ...], count: int, *, mirrored: bool,
                 algorithm: str) -> Schedule:
    """XOR-peer reduce-scatter + all-gather: one lane, or ``2D`` lanes if ``mirrored``.

    Shared by ``rabenseifner`` and ``recdoub-mirrored`` (see their modules).
    """
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims
    pw, rem = fold_ranks(p)
    meta: dict = {}
    if rem == 0:
        vdims = dims
        vr: int | None = rank

        def to_rank(v: int) -> int:
            return v
    else:
        meta["fallback"] = (f"{p} ranks is not a power of two: {rem} even ranks fold onto their "
                            f"odd neighbours; {pw} survivors run on a 1-D ring of virtual ids")
        vdims = (pw,)
        vr = fold_virtual(rank, rem)

        def to_rank(v: int) -> int:
            return fold_real(v, rem)

    if mirrored:
        lanes = port_lanes(vdims)
    else:
        lanes = [("xor", next(k for k, d in enumerate(vdims) if d > 1), 1)]
    parts = split(count, len(lanes))
    out_lanes: list[tuple[Step, ...]] = []
    owned = []  # per lane, the range each rank owns after the reduce-scatter (for schedule/halves.py)
    for (_, start, sign), part in zip(lanes, parts):
        peers = xor_peer_table(vdims, start, sign)
        blocks, mine = _xor_layout(vdims, start, sign, part, p, rem)
        owned.append(mine)
        core: list[Step]
        if vr is None:
            core = [Step((), "reduce-scatter")] * len(peers) + [Step((), "all-gather")] * len(peers)
        else:
            port_of = _port_fn(rank, vr, torus, vdims, start, sign, to_rank, folded=bool(rem))
            rs, ag = rs_ag_lane(vr, peers, blocks, to_rank=to_rank, port_of=port_of)
            core = rs + ag
        if rem:
            fold, unfold = fold_steps(rank, rem, torus, merge_ranges([part]))
            core = [fold] + core + [unfold]
        out_lanes.append(tuple(core))
    meta["owned"] = tuple(owned)
    return Schedule(algorithm, rank, p, count, dims, tuple(out_lanes), tuple(n for n, _, _ in lanes), meta)


@lru_cache(maxsize=64)
def _xor_layout(vdims: tuple[int, ...], start: int, sign: int, part: Range, p: int,
                rem: int) -> tuple[tuple[Range, ...], tuple[Range, ...]]:
    """One lane's blocks (by virtual id) and the range each real rank owns after its reduce-scatter.

    The same for every rank, so built once per lane (building it per rank made a schedule cost O(p)).
    """
    pw = p - rem
    blocks = tuple(split_range(part, pw))
    mine = [(part[0], part[0])] * p  # folded ranks own nothing
    for v, rng in enumerate(place_blocks(xor_peer_table(vdims, start, sign), blocks)):
        mine[fold_real(v, rem) if rem else v] = rng
    return blocks, tuple(mine)


def _port_fn(rank: int, vr: int, torus: Torus, vdims: tuple[int, ...], start: int, sign: int,
             to_rank: Callable[[int], int], *, folded: bool) -> Callable[[int, int], int | None]:
    """Ports: on the real torus the direction the XOR step moves; folded: a minimal route."""
    if folded:
        return lambda s, q: torus.port_towards(rank, to_rank(q))
    plan = lane_plan(vdims, start)
    coords = torus.coords(vr)

    def port_of(s: int, q: int) -> int | None:
        k, t = plan[s]
        return 2 * k if xor_direction(coords[k], t, sign) > 0 else 2 * k + 1
    return port_of


def build_rabenseifner(rank: int, dims: tuple[int, ...], count: int, *,
                       algorithm: str = "rabenseifner") -> Schedule:
    """Rabenseifner (torus-optimized on power-of-two tori), one lane."""
    return build_xor_bw(rank, dims, count, mirrored=False, algorithm=algorithm)
