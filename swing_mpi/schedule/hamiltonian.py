"""Hamiltonian rings: the torus split into edge-disjoint Hamiltonian cycles, each run both ways.

Algorithm:
    A torus with ``A`` dimensions of side > 1 has ``2A`` links at every node;
    :func:`hamiltonian_cycles` splits its links into ``A`` edge-disjoint
    Hamiltonian cycles (each visits every rank once and moves one hop at a
    time). Every node has exactly two links in each cycle, so the ``A``
    cycles, each run in both directions, use all ``2A`` ports of every node,
    one port per lane. The vector is cut into ``2A`` parts
    (:func:`~swing_mpi.blocks.split`); part ``2i`` runs a ring reduce-scatter
    then all-gather (:func:`ring.ring_steps`) along cycle ``i`` forward, part
    ``2i + 1`` along cycle ``i`` backward. Block ``r`` of every part ends,
    fully reduced, at rank ``r`` (the cycle's order only decides who reduces
    it on the way).

    The cycles come from a search, not a formula: start from the ``A``
    factors "all links of dimension ``k``" (each a union of rings) and, on
    a unit square whose two ``i``-links lie in one factor and whose two
    ``j``-links lie in another, swap the pairs between the two factors. Both
    factors stay 2-regular; when the swapped links lay on two different
    cycles of each factor, both factors lose a cycle. The search takes every
    such merging swap it finds in a pass over the squares; a pass that finds
    none makes one swap that does not add cycles (squares that merge in one
    factor first), else any swap. The order of the squares comes from a
    fixed-seed generator of its own, so every rank, on any Python, finds the
    same cycles; a seed that has not finished within ``4p + 100`` moves is
    dropped for the next (64 seeds). The result is verified (every factor one
    cycle through all ``p`` ranks, every link in exactly one factor) before
    use, and cached per shape.

Restrictions:
    Commutative ops: each block is reduced in the order of its ring (the API
    sends non-commutative ops to ``recdoub``). Every block is reduced once and
    then copied, so results are bit-identical on all ranks.

    Shapes: the unit tests find the cycles on every 2-D torus ``a x b`` with
    ``3 <= a, b <= 12`` and on 2x2, on every 3-D torus with sides 2..6 except
    ``2 x 2 x c`` (in any order), and on 16x16, 15x16, 32x32, 8x8x8, 4x4x4x4.
    No decomposition exists on ``2 x b`` with ``b`` odd: in a side of 2 both
    links join the same two nodes, a Hamiltonian cycle on more than two nodes
    takes at most one of them, so each of the two cycles takes exactly one
    of each pair and crosses the side ``b`` times, an odd number. The search
    finds none on ``2 x b`` with ``b`` even nor on ``2 x 2 x c`` either, so a
    torus with ``A >= 2`` active dimensions of which at least ``A − 1`` have
    side 2 is not searched (2x2 is, and has two cycles). On those shapes, and
    wherever the search runs out of seeds, the schedule is ``bucket``'s (the
    same lanes on the same ports, ring steps per dimension; ``Ψ = 1`` and
    ``Ξ = 1`` too, and fewer steps), and ``meta["fallback"]`` says so. A ring
    (``A = 1``) is its own single cycle; ``p = 1`` is an empty schedule.

Cost (n bytes, p ranks, A active dimensions):
    2·(p−1)·α + 2·n·(p−1)/p·β/(2A) + n·(p−1)/p·γ        (Ψ = 1, Ξ = 1: every message one hop)
    All ranks together send exactly ``2·count·(p−1)`` elements, every port of
    every rank carries one message per step. Against ``bucket`` (the same
    bytes per port) it takes ``2(p−1)`` steps instead of ``2·Σ(d_k−1)``:
    the paper's Hamiltonian-ring baseline, worth it only where ``α`` does
    not matter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ..blocks import split, split_range
from ..topology import Torus
from .base import Schedule, Step, open_schedule
from .bucket import build_bucket
from .ring import ring_steps

__all__ = ["HamiltonianCycle", "build_hamiltonian", "hamiltonian_cycles", "search_is_hopeless"]

_SEEDS = 64
_TRIES_PER_MOVE = 32


@dataclass(frozen=True)
class HamiltonianCycle:
    """One cycle through every rank: ``order[i]`` leaves by ``ports[i]`` to ``order[i + 1]``.

    The link arrives at ``order[i + 1]`` on the opposite port ``ports[i] ^ 1``
    (``2k`` is ``+`` along dimension ``k``, ``2k + 1`` is ``−``).
    """

    order: tuple[int, ...]
    ports: tuple[int, ...]

    def position(self, rank: int) -> int:
        """Return where ``rank`` sits on the cycle."""
        return self.order.index(rank)


class _Rng:
    """A 64-bit linear congruential generator (Knuth's MMIX constants): the same draws everywhere."""

    def __init__(self, seed: int) -> None:
        self.state = (seed * 0x9E3779B97F4A7C15 + 1) & (2**64 - 1)

    def below(self, n: int) -> int:
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        return (self.state >> 33) % n

    def shuffle(self, xs: list) -> None:
        for i in range(len(xs) - 1, 0, -1):
            j = self.below(i + 1)
            xs[i], xs[j] = xs[j], xs[i]


def search_is_hopeless(dims: tuple[int, ...]) -> bool:
    """Tell whether the search is not run on ``dims``: ``2 x b`` (``b >= 3``) and ``2 x 2 x c``."""
    active = [d for d in dims if d > 1]
    twos = sum(d == 2 for d in active)
    return len(active) >= 2 and twos >= len(active) - 1 and not (len(active) == twos == 2)


class _Factors:
    """``A`` 2-factors of the torus: link ``e = u·A + a`` joins ``u`` to ``u + e_{act[a]}``."""

    def __init__(self, dims: tuple[int, ...]) -> None:
        torus = Torus(dims)
        self.act = [k for k, d in enumerate(torus.dims) if d > 1]
        self.A = len(self.act)
        self.p = torus.size
        self.E = self.p * self.A
        self.end = [torus.shift(e // self.A, self.act[e % self.A], 1) for e in range(self.E)]
        A, end = self.A, self.end
        self.squares = [(u * A + i, end[u * A + j] * A + i, u * A + j, end[u * A + i] * A + j)
                        for u in range(self.p) for i in range(A) for j in range(i + 1, A)]
        self.fac = [e % A for e in range(self.E)]

    def incidence(self, f: int) -> list[list[int]]:
        inc: list[list[int]] = [[] for _ in range(self.p)]
        for e in range(self.E):
            if self.fac[e] == f:
                inc[e // self.A].append(e)
                inc[self.end[e]].append(e)
        return inc

    def label(self, f: int) -> tuple[list[int], int]:
        """Cycle number of every link of factor ``f`` (-1 elsewhere) and the number of cycles."""
        inc = self.incidence(f)
        lab = [-1] * self.E
        n = 0
        for e0 in range(self.E):
            if self.fac[e0] != f or lab[e0] >= 0:
                continue
            e, u = e0, e0 // self.A
            while lab[e] < 0:
                lab[e] = n
                w = self.end[e] if e // self.A == u else e // self.A
                x, y = inc[w]
                e, u = (y if x == e else x), w
            n += 1
        return lab, n

    def swap(self, sq: tuple[int, int, int, int]) -> tuple[int, int]:
        e1, e2, f1, f2 = sq
        F, G = self.fac[e1], self.fac[f1]
        self.fac[e1] = self.fac[e2] = G
        self.fac[f1] = self.fac[f2] = F
        return F, G

    def relabel(self) -> None:
        """Label every cycle of every factor (ids unique over all factors) and list its links."""
        self.lab = [-1] * self.E
        self.members: dict[int, set[int]] = {}
        self.ncyc = [0] * self.A
        for f in range(self.A):
            lab, n = self.label(f)
            base = len(self.members)
            for c in range(n):
                self.members[base + c] = set()
            for e in range(self.E):
                if lab[e] >= 0:
                    self.lab[e] = base + lab[e]
                    self.members[base + lab[e]].add(e)
            self.ncyc[f] = n

    def _join(self, c1: int, c2: int, gone: tuple[int, int], new: tuple[int, int]) -> None:
        """Cycles ``c1`` and ``c2`` become one: links ``gone`` leave it, links ``new`` join it."""
        big, small = (c1, c2) if len(self.members[c1]) >= len(self.members[c2]) else (c2, c1)
        keep = self.members[big]
        for e in gone:
            keep.discard(e)
        for e in self.members.pop(small):
            if e not in gone:  # a link that left has its new cycle's label already, or gets it next
                self.lab[e] = big
                keep.add(e)
        for e in new:
            keep.add(e)
            self.lab[e] = big

    def valid(self, sq: tuple[int, int, int, int]) -> bool:
        """Tell whether the square's two ``i``-links share one factor and its ``j``-links another."""
        e1, e2, f1, f2 = sq
        fac = self.fac
        return fac[e1] != fac[f1] and fac[e2] == fac[e1] and fac[f2] == fac[f1]

    def search(self, seed: int, max_moves: int) -> bool:
        """Swap until every factor is one cycle (True) or the budget is spent (False).

        A pass over the squares (in a seeded order) takes every swap that
        merges two cycles in both factors, keeping cycle labels up to date by
        relabelling the smaller cycle; a pass that finds none makes one swap
        that does not add cycles (else any swap) and relabels everything.
        """
        self.relabel()
        rng = _Rng(seed)
        squares = list(self.squares)
        rng.shuffle(squares)
        lab = self.lab
        moves = 0
        while sum(self.ncyc) > self.A:
            if moves >= max_moves:
                return False
            merged = False
            for sq in squares:
                if not self.valid(sq):
                    continue
                e1, e2, f1, f2 = sq
                if lab[e1] != lab[e2] and lab[f1] != lab[f2]:
                    cf1, cf2, cg1, cg2 = lab[e1], lab[e2], lab[f1], lab[f2]
                    F, G = self.swap(sq)
                    self._join(cf1, cf2, (e1, e2), (f1, f2))
                    self._join(cg1, cg2, (f1, f2), (e1, e2))
                    self.ncyc[F] -= 1
                    self.ncyc[G] -= 1
                    moves += 1
                    merged = True
            if merged:
                continue
            rng.shuffle(squares)
            others = [sq for sq in squares if self.valid(sq)]
            if not others:
                return False
            # squares that merge in one factor first: when the other factor's two links run the
            # same way round their cycle, the swap keeps that cycle whole and the count drops
            others.sort(key=lambda sq: lab[sq[0]] == lab[sq[1]] and lab[sq[2]] == lab[sq[3]])
            for sq in others[:_TRIES_PER_MOVE]:  # a swap that does not add cycles
                F, G = self.swap(sq)
                if self.label(F)[1] + self.label(G)[1] <= self.ncyc[F] + self.ncyc[G]:
                    break
                self.swap(sq)
            else:  # none: take the first one anyway (a step uphill)
                self.swap(others[0])
            moves += 1
            self.relabel()
            lab = self.lab
        return True

    def cycles(self) -> tuple[HamiltonianCycle, ...]:
        """Walk every factor from rank 0 (it must be one cycle) and check the walk."""
        out = []
        for f in range(self.A):
            inc = self.incidence(f)
            if any(len(x) != 2 for x in inc):
                raise AssertionError(f"factor {f} is not 2-regular")
            order, ports = [0], []
            e, u = inc[0][0], 0
            while True:
                k = self.act[e % self.A]
                forward = e // self.A == u
                w = self.end[e] if forward else e // self.A
                ports.append(2 * k if forward else 2 * k + 1)
                if w == 0:
                    break
                order.append(w)
                x, y = inc[w]
                e, u = (y if x == e else x), w
            if len(order) != self.p or len(set(order)) != self.p:
                raise AssertionError(f"factor {f} is not one cycle through all {self.p} ranks")
            out.append(HamiltonianCycle(tuple(order), tuple(ports)))
        return tuple(out)


@lru_cache(maxsize=64)
def hamiltonian_cycles(dims: tuple[int, ...]) -> tuple[HamiltonianCycle, ...] | None:
    """Find ``A`` edge-disjoint Hamiltonian cycles of the torus ``dims`` (``None`` where none were found).

    ``A`` is the number of sides > 1. The same for every caller (deterministic).
    """
    dims = tuple(int(d) for d in dims)
    p = math.prod(dims)
    if p == 1 or search_is_hopeless(dims):
        return None
    for seed in range(_SEEDS):
        fs = _Factors(dims)
        if fs.search(seed, max_moves=4 * p + 100):
            return fs.cycles()
    return None


def build_hamiltonian(rank: int, dims: tuple[int, ...], count: int, *,
                      algorithm: str = "hamiltonian") -> Schedule:
    """Ring reduce-scatter + all-gather along ``A`` Hamiltonian cycles, both ways: ``2(p−1)`` steps, ``2A`` lanes."""
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims
    cycles = hamiltonian_cycles(dims)
    if cycles is None:
        base = build_bucket(rank, dims, count, algorithm=algorithm)
        meta = dict(base.meta)
        meta["fallback"] = (f"no {len([d for d in dims if d > 1])} edge-disjoint Hamiltonian cycles on "
                            f"{torus}: bucket's schedule (ring steps per dimension, the same ports)")
        return Schedule(algorithm, rank, p, count, dims, base.lanes, base.lane_names, meta)
    parts = split(count, 2 * len(cycles))
    lanes: list[tuple[Step, ...]] = []
    names: list[str] = []
    for i, cyc in enumerate(cycles):
        c = cyc.position(rank)
        after, before = cyc.order[(c + 1) % p], cyc.order[c - 1]
        out_fwd, out_back = cyc.ports[c], cyc.ports[c - 1] ^ 1
        for direction, part in ((1, parts[2 * i]), (-1, parts[2 * i + 1])):
            blocks = split_range(part, p)
            sub = [blocks[r] for r in cyc.order]  # position j ends owning block order[j]: rank r owns block r
            if direction > 0:
                rs, ag = ring_steps(c, p, sub, after, before, sign=1, port_next=out_fwd, port_prev=out_back)
            else:
                rs, ag = ring_steps(c, p, sub, before, after, sign=-1, port_next=out_back, port_prev=out_fwd)
            lanes.append(tuple(rs + ag))
            names.append(f"cycle-{i}{'+' if direction > 0 else '-'}")
    what = (f"{len(cycles)} edge-disjoint Hamiltonian cycles, each run both ways" if len(cycles) > 1
            else "the ring itself, run both ways")
    # one_hop_disjoint: every message goes one hop, and no directed link carries two lanes' messages (the
    # cost model prices such schedules without routing them; model.features._one_hop_disjoint)
    return Schedule(algorithm, rank, p, count, dims, tuple(lanes), tuple(names),
                    {"cycles": what, "one_hop_disjoint": True})
