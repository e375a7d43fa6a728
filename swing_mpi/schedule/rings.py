"""Ring programs: a reduce-scatter on one ring of ``d`` nodes, written with coordinates.

Algorithm:
    At in-dimension step ``t`` node ``c`` sends to peer ``c'`` its partial
    sums of a set ``M(c, t, c')`` of block coordinates and stops being
    responsible for them; ``H(c, t)``, the coordinates ``c`` is still
    responsible for after ``t`` steps, shrinks from the whole ring to
    ``{c}``. :class:`RingProgram` holds the masks; the programs:

    - *involution*: the Listing-1 block sets of any involutive peer sequence
      (:class:`~.blockset.BlockSets`; Swing's peers on an even ring);
    - *circulant*: any ``d``, ``⌈log2 d⌉`` steps; at step ``t`` every node
      sends to the node ``s_t`` ahead (``1, 2, 4, …`` and ``d − 2^{L−1}``
      last), the data halving on every node (:func:`circulant_program`);
    - *two-way*: odd ``d``, ``(d−1)/2`` steps of one block to each
      neighbour, every block's partial converging on its owner from both
      sides (:func:`twoway_program`);
    - *two-sided*: odd ``d``, blocks from both sides along the circulant's
      paths of a ring of ``(d+1)/2`` (:func:`twosided_program`);
    - *staged*: ``d = r_0·r_1·…``, a circulant, two-way or two-sided program
      per radix, the later ones with longer skips (:func:`staged_program`;
      ``15``: two-way on 5 with skip 1, then the circulant on 3 with skip 5);
    - *extra node* (the paper's odd-``p`` scheme, kept for comparison): an
      even program on ``0 … d−2`` while the extra node ``e = d−1`` trades
      directly with every other node;
    - *ring*: the classic ring reduce-scatter in one direction, ``d−1`` steps
      of one block coordinate to the next node;
    - the *mirror* of any of them (:func:`mirror_program`): every move the
      other way round.

    :func:`check_program` proves a program by following contributor sets;
    :func:`link_loads` and :func:`ring_loads` give what each step puts on the
    ring's links. :mod:`.dimwise` composes one program per dimension into a
    torus schedule.

Restrictions:
    Commutative ops (partials are combined in the order they arrive).

Cost:
    Per node and program ``d − 1`` block coordinates sent, in
    :attr:`RingProgram.steps` steps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .blockset import bits, blocksets

__all__ = [
    "RingProgram", "program_from_rows", "involution_program", "extra_node_program", "ring_program",
    "mirror_program", "check_program", "ring_loads", "link_loads", "circulant_program", "twoway_program",
    "twosided_program", "staged_program", "STAGE_PROGRAMS", "STAGE_KINDS", "odd_radices",
]


@dataclass(frozen=True)
class RingProgram:
    """A reduce-scatter on one ring: ``sends[t][c]`` is ``((peer, mask), …)``, sorted by peer."""

    d: int
    sends: tuple[tuple[tuple[tuple[int, int], ...], ...], ...]
    kind: str = ""

    @property
    def steps(self) -> int:
        """Number of steps."""
        return len(self.sends)

    def __hash__(self) -> int:
        """Hash of the fields, computed once (programs key several caches, and ``sends`` is large)."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.d, self.sends, self.kind))
            object.__setattr__(self, "_hash", h)
        return h

    def mask(self, c: int, t: int, peer: int) -> int:
        """Block coordinates ``c`` sends to ``peer`` at step ``t`` (0 if none)."""
        return _tables(self)[0][t][c].get(peer, 0)

    def peers(self, c: int, t: int) -> list[int]:
        """Every node ``c`` sends to or receives from at step ``t``, ascending."""
        return list(_tables(self)[1][t][c])

    def held_bits(self, c: int, t: int) -> tuple[int, ...]:
        """``bits(H(c, t))``: the block coordinates of :meth:`held`, ascending."""
        return _tables(self)[2][t][c]

    def held(self, c: int, t: int) -> int:
        """``H(c, t)``: block coordinates ``c`` is responsible for after ``t`` steps."""
        return _held(self)[t][c]

    def held_table(self) -> tuple[tuple[int, ...], ...]:
        """Return every ``H(c, t)`` as ``[t][c]`` (one cache lookup for all)."""
        return _held(self)


@lru_cache(maxsize=512)
def _held(prog: RingProgram) -> tuple[tuple[int, ...], ...]:
    full = (1 << prog.d) - 1
    cur = [full] * prog.d
    out = [tuple(cur)]
    for row in prog.sends:
        cur = [h & ~_sent(row[c]) for c, h in enumerate(cur)]
        out.append(tuple(cur))
    return tuple(out)


@lru_cache(maxsize=512)
def _tables(prog: RingProgram) -> tuple[list[list[dict[int, int]]], list[list[tuple[int, ...]]],
                                        list[list[tuple[int, ...]]]]:
    """Per step and node: masks by peer, the peers (sending or receiving) ascending, ``bits`` of ``H``."""
    masks = [[dict(row[c]) for c in range(prog.d)] for row in prog.sends]
    peers = []
    for row in prog.sends:
        talk: list[set[int]] = [{q for q, _ in row[c]} for c in range(prog.d)]
        for c in range(prog.d):
            for q, m in row[c]:
                if m and q != c:
                    talk[q].add(c)
        peers.append([tuple(sorted(x)) for x in talk])
    held = [[tuple(bits(h)) for h in row] for row in _held(prog)]
    return masks, peers, held


def _sent(msgs: tuple[tuple[int, int], ...]) -> int:
    m = 0
    for _, x in msgs:
        m |= x
    return m


def program_from_rows(d: int, rows: Sequence[Sequence[dict[int, int]]], kind: str) -> RingProgram:
    """Build a program from ``rows[t][c]``, node ``c``'s masks by peer at step ``t`` (empty masks dropped)."""
    return RingProgram(d, tuple(tuple(tuple(sorted((q, m) for q, m in row[c].items() if m)) for c in range(d))
                                 for row in rows), kind)


def involution_program(peers: Sequence[Sequence[int]], kind: str = "involution") -> RingProgram:
    """Build the Listing-1 ("latest step wins") program of an involutive peer sequence."""
    bs = blocksets(peers)
    d = bs.n
    rows = [[{bs.peers[s][c]: bs.send_sets(c)[s]} for c in range(d)] for s in range(bs.L)]
    return program_from_rows(d, rows, kind)


def extra_node_program(inner: RingProgram, kind: str = "extra-node", *, spread: bool = False) -> RingProgram:
    """Build the paper's odd ring of ``inner.d + 1``: ``inner`` on ``0 … d−2``, ``e = d−1`` trades directly.

    Member ``g`` trades with ``e`` at step ``⌊g·L/(d−1)⌋`` (spread evenly over
    the ``L`` steps of ``inner``); ``e`` then sends its partial of block
    coordinate ``g`` and ``g`` its partial of block ``e``.
    """
    g = inner.d
    d, e = g + 1, g
    L = max(inner.steps, 1)
    rows: list[list[dict[int, int]]] = [[{} for _ in range(d)] for _ in range(L)]
    for t in range(inner.steps):
        for c in range(g):
            for q, m in inner.sends[t][c]:
                rows[t][c][q] = m
    for c in range(g):
        t = c * L // g if spread else L - 1
        rows[t][e][c] = 1 << c
        rows[t][c][e] = rows[t][c].get(e, 0) | (1 << e)
    return program_from_rows(d, rows, kind)


def circulant_program(d: int) -> RingProgram:
    """Build a translation-invariant reduce-scatter for a ring of any ``d`` in ``⌈log2 d⌉`` steps.

    Step ``t`` sends to ``c + s_t`` with skips ``s_t = 2^t`` for ``t < L−1``
    and ``s_{L−1} = r = d − 2^{L−1}``; every node sends to the same side, so
    a lane uses one port per step and its mirror the other. A node's partial
    of the block ``j`` places ahead of it travels along the steps of a set
    ``T(j)`` with ``Σ_{t∈T} s_t = j``, smallest step first: ``T(j)`` is the
    binary representation of ``j`` for ``j < r`` and ``{L−1}`` plus that of
    ``j − r`` otherwise. Dropping the smallest step of a set gives the set of
    the remaining distance, so every node sends each block once, at the
    smallest step of its set, and the data halves every step on every node
    (unlike an extra node, which holds more than the others for a while).
    """
    L = max(1, (d - 1).bit_length())
    r = d - (1 << (L - 1))
    skips = [1 << t for t in range(L - 1)] + [r]
    path: dict[int, list[int]] = {}
    for u in range(1 << (L - 1)):
        steps = [t for t in range(L - 1) if u >> t & 1]
        if u < r:
            path[u] = steps
        path[r + u] = steps + [L - 1]
    rows: list[list[dict[int, int]]] = [[{} for _ in range(d)] for _ in range(L)]
    for j, steps in path.items():
        if not steps:
            continue
        t = steps[0]
        for c in range(d):
            q = (c + skips[t]) % d
            rows[t][c][q] = rows[t][c].get(q, 0) | (1 << ((c + j) % d))
    return program_from_rows(d, rows, "circulant")


def twoway_program(d: int) -> RingProgram:
    """Build the two-way program of an odd ring: every block converges on its owner from both sides.

    With ``h = (d−1)/2``: at step ``t < h`` node ``c`` sends its partial of
    block ``c + h − t`` to ``c + 1`` and of block ``c − (h − t)`` to ``c − 1``.
    The partial of block ``o`` starts at ``o − h`` and ``o + h`` and gains one
    node per step on each side, so ``o`` has every contribution after ``h``
    steps, and every message goes one hop: ``d − 1`` block-hops in all, the
    ring's minimum, in about half of a one-way ring's steps. Both ports of
    the dimension carry a block at every step (the mirrored lane runs the
    same moves).
    """
    if d % 2 == 0 or d < 3:
        raise ValueError(f"the two-way program needs an odd ring of at least 3, got {d}")
    h = (d - 1) // 2
    rows = [[{(c + 1) % d: 1 << ((c + h - t) % d), (c - 1) % d: 1 << ((c - (h - t)) % d)} for c in range(d)]
            for t in range(h)]
    return program_from_rows(d, rows, "two-way")


def twosided_program(d: int) -> RingProgram:
    """Build the two-sided circulant of an odd ring: blocks come from both sides, the skips of the circulant.

    With ``h = (d−1)/2``, the block ``j ≤ h`` places ahead of a node travels
    forward and the block ``j`` places behind backward, each along the path of
    offset ``j`` in the circulant's construction for a ring of ``h + 1``
    (skips ``1, 2, 4, …`` and ``h + 1 − 2^{L−1}`` last, ``L = ⌈log2(h+1)⌉``),
    never wrapping around. So it takes one or two steps fewer than the
    circulant and ``h/2``-ish fewer block-hops (11: 3 steps and 7 block-hops
    per direction against 4 steps and 18 one way), at the price of using both
    ports of the dimension in every step, as two-way does (which needs ``h``
    steps of one block each). Every node is treated alike.
    """
    if d % 2 == 0 or d < 3:
        raise ValueError(f"the two-sided circulant needs an odd ring of at least 3, got {d}")
    h = (d - 1) // 2
    rows: list[list[dict[int, int]]] = []
    for row in circulant_program(h + 1).sends:
        (q, m), = row[0]  # node 0 of the ring of h + 1: one peer per step, q = the skip, m = the offsets
        rows.append([{(c + q) % d: _shift(m, c, d, 1), (c - q) % d: _shift(m, c, d, -1)} for c in range(d)])
    return program_from_rows(d, rows, "two-sided")


def _shift(mask: int, c: int, d: int, sign: int) -> int:
    """Return the blocks ``c + sign·j`` (mod ``d``) for the offsets ``j`` in ``mask``."""
    return sum(1 << ((c + sign * j) % d) for j in bits(mask))


STAGE_PROGRAMS: dict[str, Callable[[int], RingProgram]] = {
    "circulant": circulant_program, "two-way": twoway_program, "two-sided": twosided_program}
"""The one-ring programs a stage of :func:`staged_program` may run, by kind."""
STAGE_KINDS = tuple(STAGE_PROGRAMS)


def staged_program(d: int, stages: Sequence[tuple[int, str]]) -> RingProgram:
    """Build a ring program in stages of radices ``r_0·r_1·… = d``, each run by its own small program.

    Offset ``j`` (the block ``j`` places ahead) is written in mixed radix,
    ``j = Σ a_i·S_i`` with ``S_i = r_0·…·r_{i−1}`` and ``a_i`` an offset of
    stage ``i``'s ring of ``r_i``; stage ``i`` runs its program (one of
    :data:`STAGE_KINDS`, e.g. ``(5, "two-way")``) with every skip multiplied by
    ``S_i``, on the blocks whose lower digits are already reduced. A block's
    partial first moves in the stage of its lowest nonzero digit, as that
    stage's program moves offset ``a_i``, and the stages run one after the
    other: ``Σ`` of their steps (``15 = 5·3`` two-way then circulant: 2 + 2).
    Every stage program treats all nodes alike, so the whole does too.
    """
    if math.prod(r for r, _ in stages) != d or any(r < 2 for r, _ in stages):
        raise ValueError(f"stage radices {[r for r, _ in stages]} do not multiply to {d}")
    strides, starts, moves = [], [], []
    stride, start = 1, 0
    for r, kind in stages:
        if kind not in STAGE_KINDS:
            raise ValueError(f"stage kind must be one of {', '.join(STAGE_KINDS)}, got {kind!r}")
        prog = STAGE_PROGRAMS[kind](r)
        first: dict[int, tuple[int, int]] = {}  # offset -> (step, signed skip) of node 0's first move
        for t, row in enumerate(prog.sends):
            for q, m in row[0]:
                for a in bits(m):
                    first[a] = (t, q if q <= r // 2 else q - r)
        strides.append(stride)
        starts.append(start)
        moves.append(first)
        stride *= r
        start += prog.steps
    rows: list[list[dict[int, int]]] = [[{} for _ in range(d)] for _ in range(start)]
    for digits in itertools.product(*[range(r) for r, _ in stages]):
        j = sum(a * s for a, s in zip(digits, strides)) % d
        i = next((i for i, a in enumerate(digits) if a), None)
        if i is None:
            continue
        t, skip = moves[i][digits[i]]
        for c in range(d):
            q = (c + skip * strides[i]) % d
            rows[starts[i] + t][c][q] = rows[starts[i] + t][c].get(q, 0) | (1 << ((c + j) % d))
    return program_from_rows(d, rows, "+".join(f"{kind}-{r}" for r, kind in stages))


def odd_radices(d: int) -> list[tuple[int, ...]]:
    """Every ordered factorization of an odd ``d`` into odd factors ≥ 3 (``(d,)`` first)."""
    out: list[tuple[int, ...]] = [(d,)]
    for f in range(3, d):
        if d % f == 0 and f % 2:
            out.extend((f,) + rest for rest in odd_radices(d // f))
    return out


def ring_program(d: int, direction: int = 1) -> RingProgram:
    """Ring reduce-scatter: at step ``t`` node ``c`` sends block ``c − direction·(t+1)`` to ``c + direction``."""
    rows = [[{(c + direction) % d: 1 << ((c - direction * (t + 1)) % d)} for c in range(d)] for t in range(d - 1)]
    return program_from_rows(d, rows, "ring")


def mirror_program(prog: RingProgram, *, a: int | None = None) -> RingProgram:
    """``prog`` seen in a mirror ``c ↦ a − c mod d`` with ``a`` even: every move goes the other way round.

    ``a`` is 0 for an even ring (Swing's peers with the sign flipped) and
    ``d − 1`` for an odd one, so in both cases node ``c`` plays the part of a
    node of its own parity and leaves by the other port than in ``prog``.
    """
    d = prog.d
    if a is None:
        a = d - 1 if d % 2 else 0

    def sig(c: int) -> int:
        return (a - c) % d

    def sig_mask(m: int) -> int:
        out = 0
        for b in bits(m):
            out |= 1 << sig(b)
        return out

    rows = [[{sig(q): sig_mask(m) for q, m in row[sig(c)]} for c in range(d)] for row in prog.sends]
    return program_from_rows(d, rows, prog.kind + "-mirrored")


def check_program(prog: RingProgram) -> None:
    """Prove ``prog`` is a reduce-scatter by following contributor sets; raise ``ValueError`` if not.

    Node ``c`` starts with ``{c}`` as the contributors of every block. A
    message from ``c`` adds ``c``'s set for each block it carries to the
    receiver's (the two must be disjoint: nothing counted twice) and ``c``
    drops the block; a dropped block may not be received again. At the end
    node ``c`` must hold block ``c`` with every node as contributor and
    nothing else.
    """
    d = prog.d
    full = (1 << d) - 1
    contrib = [[1 << c for _ in range(d)] for c in range(d)]  # contrib[c][b]; 0: dropped
    for t, row in enumerate(prog.sends):
        new = [list(x) for x in contrib]
        for c in range(d):
            for q, m in row[c]:
                if q == c or not 0 <= q < d:
                    raise ValueError(f"step {t}: node {c} sends to bad peer {q}")
                for b in bits(m):
                    if not contrib[c][b]:
                        raise ValueError(f"step {t}: node {c} sends block {b} it no longer holds")
                    new[c][b] = 0
        for c in range(d):
            for q, m in row[c]:
                for b in bits(m):
                    if not contrib[q][b] or not new[q][b]:
                        raise ValueError(f"step {t}: node {q} receives block {b} it has given away")
                    if new[q][b] & contrib[c][b]:
                        raise ValueError(f"step {t}: block {b} at node {q} would count a contribution twice")
                    new[q][b] |= contrib[c][b]
        contrib = new
    for c in range(d):
        for b in range(d):
            want = full if b == c else 0
            if contrib[c][b] != want:
                raise ValueError(f"node {c} ends with block {b} summing {bin(contrib[c][b])}, wants {bin(want)}")


def link_loads(prog: RingProgram) -> list[dict[tuple[int, int], int]]:
    """Per step: block coordinates on every directed link ``(node, ±1)`` of the ring (cached).

    Messages take the shorter way round (a tie the ``+`` way), as on the torus.
    """
    return [dict(x) for x in _link_loads(prog)]


@lru_cache(maxsize=512)
def _link_loads(prog: RingProgram) -> tuple[tuple[tuple[tuple[int, int], int], ...], ...]:
    d = prog.d
    out = []
    for row in prog.sends:
        link: dict[tuple[int, int], int] = {}
        for c in range(d):
            for q, m in row[c]:
                n = bin(m).count("1")
                f = (q - c) % d
                step, hops = (1, f) if f <= d - f else (-1, d - f)
                x = c
                for _ in range(hops):
                    link[(x, step)] = link.get((x, step), 0) + n
                    x = (x + step) % d
        out.append(tuple(sorted(link.items())))
    return tuple(out)


def ring_loads(prog: RingProgram) -> list[float]:
    """Per step: the most block coordinates on one directed link of the ring, divided by ``d``."""
    return [max((n for _, n in row), default=0) / prog.d for row in _link_loads(prog)]
