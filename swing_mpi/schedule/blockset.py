r"""Block sets for bandwidth-optimal reduce-scatter + all-gather.

Given any sequence of peer functions ``π(·, s)``, ``s = 0 … L−1``, each an
involution on ``{0 … n−1}``, the blocks a rank sends at every step follow from
the paper's Listing 1 recursion plus one de-duplication rule::

    R(x, L) = ∅
    R(x, t) = ⋃_{u=t…L−1} ({π(x,u)} ∪ R(π(x,u), u+1))
    raw(r, s) = ({q} ∪ R(q, s+1)) \ {r}            q = π(r, s)
    send(r, s) = {b ∈ raw(r, s) : no later s' has b ∈ raw(r, s')}

Swing, recursive halving (Rabenseifner) and the mirrored XOR schedule differ
only in ``π``. Sets are Python ints used as bitmasks, memoised per peer table,
so a 64×64 torus costs a few milliseconds per rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from .base import COPY, REDUCE, Range, Step, Transfer, merge_ranges
from .sizes import mask_size, placeholder, sizing

__all__ = ["BlockSets", "rs_ag_lane", "place_blocks", "bits"]


def bits(mask: int) -> list[int]:
    """Return the indices of the set bits of ``mask``, ascending (linear in the mask's length)."""
    if mask < 0:
        raise ValueError("negative mask")
    digits = bin(mask)[:1:-1]  # least significant bit first
    return [i for i, c in enumerate(digits) if c == "1"]


class _NotLaminarError(Exception):
    pass


class BlockSets:
    """Reduce-scatter block sets for one peer table ``peers[s][x]``."""

    def __init__(self, peers: Sequence[Sequence[int]]) -> None:
        """Check that every step of ``peers`` is an involution; sets are computed lazily."""
        self.peers = [tuple(row) for row in peers]
        self.L = len(self.peers)
        self.n = len(self.peers[0]) if self.peers else 1
        for s, row in enumerate(self.peers):
            for x, q in enumerate(row):
                if row[q] != x:
                    raise ValueError(f"peer table is not an involution at step {s}: {x}->{q}->{row[q]}")
        self._reach: dict[tuple[int, int], int] = {}
        self._send: dict[int, tuple[int, ...]] = {}
        self._order: list[int] | None | bool = False

    def reach(self, x: int, t: int) -> int:
        """``R(x, t)`` as a bitmask."""
        if t >= self.L:
            return 0
        key = (x, t)
        got = self._reach.get(key)
        if got is None:
            got = 0
            for u in range(t, self.L):
                q = self.peers[u][x]
                got |= (1 << q) | self.reach(q, u + 1)
            self._reach[key] = got
        return got

    def send_sets(self, r: int) -> tuple[int, ...]:
        """``send(r, s)`` for every step, as bitmasks."""
        got = self._send.get(r)
        if got is None:
            out = [0] * self.L
            later = 0
            for s in range(self.L - 1, -1, -1):
                q = self.peers[s][r]
                raw = ((1 << q) | self.reach(q, s + 1)) & ~(1 << r)
                out[s] = raw & ~later
                later |= raw
            got = tuple(out)
            self._send[r] = got
        return got

    def block_order(self) -> list[int] | None:
        """Find a block order in which every send set is one contiguous run, or ``None``.

        ``H(r, s)``, the blocks ``r`` is still responsible for after step ``s``,
        shrinks from all blocks to ``{r}``. When these sets form a binary
        laminar family (every group of one level splits into exactly two
        groups of the next, and every send set is one of those groups), a
        depth-first order of that tree makes every send set, and so every
        message and every reduction, a single slice. That holds for Swing on
        power-of-two sides and for the XOR schedules (it is the negabinary
        bit-reversal remap of the authors' later work, found here from the
        schedule itself); it fails for other sides, which keep block order.
        """
        if self._order is not False:
            return self._order  # type: ignore[return-value]
        self._order = None
        n, L = self.n, self.L
        full = (1 << n) - 1
        H = []  # H[s][r]
        cur = [full] * n
        for s in range(L):
            nxt = []
            for r in range(n):
                sent = self.send_sets(r)[s]
                if sent | (cur[r] & ~sent) != cur[r] or cur[r] & sent != sent:
                    return None
                nxt.append(cur[r] & ~sent)
            # every send set must be a group of this level, groups partition the blocks
            groups = set(nxt)
            if sum(bin(g).count("1") for g in groups) != n:
                return None
            for r in range(n):
                if self.send_sets(r)[s] not in groups and self.send_sets(r)[s]:
                    return None
            H.append(nxt)
            cur = nxt
        if any(H[-1][r] != 1 << r for r in range(n)) if L else n != 1:
            return None
        order: list[int] = []

        def dfs(mask: int, s: int) -> None:
            if s == L:
                order.extend(bits(mask))
                return
            low = (mask & -mask).bit_length() - 1
            first = H[s][low]
            rest = mask & ~first
            dfs(first, s + 1)
            if rest:
                low2 = (rest & -rest).bit_length() - 1
                if H[s][low2] != rest:
                    raise _NotLaminarError
                dfs(rest, s + 1)

        try:
            dfs(full, 0)
        except _NotLaminarError:
            return None
        self._order = order
        return order

    def covers_all(self, r: int) -> bool:
        """Whether ``r`` reaches every other rank (the schedule is complete)."""
        total = 0
        for m in self.send_sets(r):
            total |= m
        return total == ((1 << self.n) - 1) & ~(1 << r)


REMAP_MAX = 1024
"""Largest group for which the contiguous block order is searched (it needs every
rank's block sets; beyond this, schedules keep block order: same bytes, more slices)."""


@lru_cache(maxsize=256)
def _cached_blocksets(peers: tuple[tuple[int, ...], ...]) -> BlockSets:
    return BlockSets(peers)


def blocksets(peers: Sequence[Sequence[int]]) -> BlockSets:
    return _cached_blocksets(tuple(tuple(r) for r in peers))


def place_blocks(peers: Sequence[Sequence[int]], slots: Sequence[Range]) -> list[Range]:
    """Place block ``b`` (owned by ``b``) on one of the ``slots`` of a part, in order.

    With a contiguous block order (:meth:`BlockSets.block_order`) block ``b``
    takes the slot at its position in that order; otherwise slot ``b``. Every
    schedule that trades blocks outside ``rs_ag_lane`` (the odd-p extra rank)
    must place them with this same function.
    """
    bs = blocksets(peers)
    order = bs.block_order() if bs.n <= REMAP_MAX else None
    if order is None:
        return list(slots)
    out: list[Range] = [(0, 0)] * bs.n
    for i, b in enumerate(order):
        out[b] = slots[i]
    return out


def _block_ranges(mask: int, blocks: Sequence[Range]) -> tuple[Range, ...]:
    if sizing():
        return placeholder(mask_size(blocks, mask))
    return merge_ranges(sorted(blocks[b] for b in bits(mask)))


def rs_ag_lane(
    vr: int,
    peers: Sequence[Sequence[int]],
    blocks: Sequence[Range],
    *,
    to_rank: Callable[[int], int] = lambda v: v,
    port_of: Callable[[int, int], int | None] = lambda s, q: None,
) -> tuple[list[Step], list[Step]]:
    """Reduce-scatter and all-gather steps of virtual rank ``vr`` in one lane.

    ``peers[s][x]`` is the virtual peer of ``x`` at step ``s``; ``blocks[b]``
    is the element range of block ``b`` (owned by virtual rank ``b``);
    ``to_rank`` maps virtual ids to communicator ranks; ``port_of(s, q)`` the
    port used to reach virtual peer ``q`` at step ``s``.
    """
    bs = blocksets(peers)
    if not bs.covers_all(vr):
        raise ValueError("peer sequence does not reach every rank: no reduce-scatter schedule")
    blocks = place_blocks(peers, blocks)
    mine = bs.send_sets(vr)
    rs: list[Step] = []
    ag: list[Step] = []
    for s in range(bs.L):
        q = bs.peers[s][vr]
        theirs = bs.send_sets(q)[s]
        send = _block_ranges(mine[s], blocks)
        recv = _block_ranges(theirs, blocks)
        port = port_of(s, q)
        rank_q = to_rank(q)
        rs.append(Step((Transfer(rank_q, send, recv, REDUCE, False, port),), "reduce-scatter"))
        ag.append(Step((Transfer(rank_q, recv, send, COPY, False, port),), "all-gather"))
    ag.reverse()
    return rs, ag
