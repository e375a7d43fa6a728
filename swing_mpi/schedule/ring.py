"""Ring allreduce: reduce-scatter then all-gather around a ring in rank order.

Algorithm:
    The vector is cut into ``p`` blocks (:func:`~swing_mpi.blocks.split`),
    block ``b`` owned by rank ``b``. Reduce-scatter, steps ``s = 0 … p−2``:
    rank ``r`` sends its partial sum of block ``r−s−1`` to ``r+1`` and
    receives block ``r−s−2`` from ``r−1``, reducing it into its own (the
    predecessor's partial first). After ``p−1`` steps rank ``r`` holds block
    ``r`` fully reduced. All-gather, steps ``s = 0 … p−2``: ``r`` sends final
    block ``r−s`` to ``r+1`` and receives block ``r−s−1`` from ``r−1``.
    One lane, one port at a time (the ring runs over the communicator's rank
    order, whatever the torus shape; ports are the first hop of a minimal
    route to the neighbour in rank order).

Restrictions:
    Commutative ops: block ``b`` is reduced in the cyclic order
    ``b+1, b+2, …, p−1, 0, …, b`` (the API sends non-commutative ops to
    ``recdoub``). Every block is reduced once and then copied, so all ranks
    get bit-identical results, floating point included.

Non-powers of two and odd p:
    Nothing special: any ``p ≥ 1`` (``p = 1`` is an empty schedule; ``p = 2``
    sends and receives with the same neighbour in one transfer).

Cost (n bytes, blocks of n/p):
    2·(p−1)·α + 2·n·(p−1)/p·β + n·(p−1)/p·γ
    Rank ``r`` sends exactly ``2·count − |block r| − |block r+1|`` elements
    (reduce-scatter never sends block ``r``; all-gather never forwards block
    ``r+1``, whose chain ends at ``r``); all ranks together ``2·count·(p−1)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..blocks import split
from .base import COPY, REDUCE, Range, Schedule, Step, Transfer, open_schedule

__all__ = ["build_ring", "ring_steps"]


def _one_way(nxt: int, prv: int, send: Range, recv: Range, action: str, peer_first: bool,
             port_next: int | None, port_prev: int | None) -> tuple[Transfer, ...]:
    """Send ``send`` to ``nxt`` and receive ``recv`` from ``prv`` (one transfer if they coincide)."""
    snd = (send,) if send[1] > send[0] else ()
    rcv = (recv,) if recv[1] > recv[0] else ()
    if nxt == prv:
        return (Transfer(nxt, snd, rcv, action, peer_first, port_next),)
    return (Transfer(nxt, snd, (), action, False, port_next),
            Transfer(prv, (), rcv, action, peer_first, port_prev))


def ring_steps(c: int, d: int, sub: Sequence[Range], nxt: int, prv: int, *, sign: int = 1,
               port_next: int | None = None, port_prev: int | None = None,
               ) -> tuple[list[Step], list[Step]]:
    """Ring reduce-scatter and all-gather steps of position ``c`` on a ring of ``d``.

    ``sub[b]`` is the element range of sub-block ``b`` (owned by position
    ``b`` at the end of the reduce-scatter). Data flows from position ``c``
    to ``c + sign``: ``nxt`` is that rank, ``prv`` the rank at ``c − sign``.
    Returns ``(reduce_scatter, all_gather)``, each ``d − 1`` steps.
    """
    rs: list[Step] = []
    ag: list[Step] = []
    pf = sign > 0  # the partial coming from c − sign holds the lower positions (sign +1)
    for s in range(d - 1):
        send = sub[(c - sign * (s + 1)) % d]
        recv = sub[(c - sign * (s + 2)) % d]
        rs.append(Step(_one_way(nxt, prv, send, recv, REDUCE, pf, port_next, port_prev),
                       "reduce-scatter"))
    for s in range(d - 1):
        send = sub[(c - sign * s) % d]
        recv = sub[(c - sign * (s + 1)) % d]
        ag.append(Step(_one_way(nxt, prv, send, recv, COPY, False, port_next, port_prev),
                       "all-gather"))
    return rs, ag


def build_ring(rank: int, dims: tuple[int, ...], count: int, *, algorithm: str = "ring") -> Schedule:
    """Build the ring allreduce of ``rank``: ``2(p−1)`` steps over ranks in rank order."""
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims
    nxt, prv = (rank + 1) % p, (rank - 1) % p
    rs, ag = ring_steps(rank, p, split(count, p), nxt, prv, sign=1,
                        port_next=torus.port_towards(rank, nxt),
                        port_prev=torus.port_towards(rank, prv))
    owned = (tuple(split(count, p)),)  # rank r ends the reduce-scatter owning block r (schedule/halves.py)
    return Schedule(algorithm, rank, p, count, tuple(dims), (tuple(rs + ag),), ("ring",), {"owned": owned})
