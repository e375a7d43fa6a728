"""Reduce-scatter + all-gather on a torus, composed of one ring program per dimension.

Algorithm:
    Each dimension ``k`` runs a ring program (:mod:`.rings`): at in-dimension
    step ``t`` node ``c`` of the ring sends peer ``c'`` its partials of the
    block coordinates ``M(c, t, c')`` and keeps ``H(c, t)``.

    A lane is a sequence of (dimension ``k``, in-dimension step ``t``). At
    such a step rank ``x`` runs step ``t`` of dimension ``k``'s program on
    its ring (the ranks that differ from ``x`` in coordinate ``k`` only) for
    every block ``b`` it is still responsible for in the other dimensions:
    it sends ``{b : b_k ∈ M(x_k, t, c'), b_j ∈ H_j(x_j) for j ≠ k}``. Why it
    is correct: a rank's partial of block ``b`` always sums the contributions
    of a product set ``∏_j C_j`` whose factor ``C_j`` is exactly what the
    one-dimensional program of dimension ``j`` has summed for coordinate
    ``b_j`` at ``x_j`` so far (a message changes only the factor of its own
    dimension, and sender and receiver agree on every other factor because
    they agree on every other coordinate and every dimension's progress). So
    the torus schedule is right for any interleaving of the dimensions as
    soon as each ring program is right, which
    :func:`~.rings.check_program` proves for a program by following
    contributor sets. Every peer differs from the rank in exactly one
    coordinate. Each rank sends each block it does not own exactly once in
    each phase (``count·(p−1)/p`` elements per lane and phase), and every
    block is reduced by its owner and then copied, so floating-point results
    are bit-identical on all ranks.

    The all-gather runs the steps in reverse: ``x`` sends ``y`` the final
    blocks it received from ``y`` in the reduce-scatter step and receives
    what it sent.

    Also here: :func:`interleave` (a lane's order of dimensions),
    :func:`lane_order` / :func:`lane_blocks` (a block layout in which every
    message is one contiguous run where the programs nest) and
    :func:`fold_pairs` (folding sides longer than a virtual torus's).

Restrictions:
    Commutative ops (partials are combined in the order they arrive).

Cost:
    Per lane and phase ``count·(p−1)/p`` elements per rank, in ``Σ_k L_k``
    steps (``L_k`` the steps of dimension ``k``'s program).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..topology import Torus
from .base import COPY, REDUCE, Range, Step, Transfer, merge_ranges
from .blockset import bits
from .rings import RingProgram
from .sizes import placeholder, product_size, sizing

__all__ = ["interleave", "DimwiseLane", "dimwise_lane", "lane_order", "lane_blocks", "fold_pairs"]


def interleave(steps: Sequence[int], start_dim: int) -> list[tuple[int, int]]:
    """List ``(dimension, in-dimension step)`` for each step of a lane.

    Start in ``start_dim``, then cycle through the dimensions that still have
    steps left (``steps[k]`` per dimension).
    """
    left = list(steps)
    done = [0] * len(steps)
    out: list[tuple[int, int]] = []
    k = start_dim
    D = len(steps)
    while any(left):
        kk = next((k + i) % D for i in range(D) if left[(k + i) % D])
        out.append((kk, done[kk]))
        done[kk] += 1
        left[kk] -= 1
        k = (kk + 1) % D
    return out


@dataclass(frozen=True)
class DimwiseLane:
    """One lane: a ring program per dimension (``None`` for sides of 1) and the step order."""

    dims: tuple[int, ...]
    programs: tuple[RingProgram | None, ...]
    plan: tuple[tuple[int, int], ...]


def _coords_sets(lane: DimwiseLane, x: tuple[int, ...], done: Sequence[int]) -> list[Sequence[int]]:
    out: list[Sequence[int]] = []
    for j, (d, prog) in enumerate(zip(lane.dims, lane.programs)):
        out.append([0] if prog is None or d == 1 else prog.held_bits(x[j], done[j]))
    return out


def _product(sets: Sequence[Sequence[int]], strides: Sequence[int]) -> list[int]:
    ids = [0]
    for vals, s in zip(sets, strides):
        ids = [i + v * s for i in ids for v in vals]
    return ids


@lru_cache(maxsize=64)
def _strides(dims: tuple[int, ...]) -> tuple[int, ...]:
    out, s = [], 1
    for d in reversed(dims):
        out.append(s)
        s *= d
    return tuple(reversed(out))


def dimwise_lane(
    rank: int,
    lane: DimwiseLane,
    blocks: Sequence[Range],
    *,
    port_of: Callable[[int], int | None] = lambda q: None,
) -> tuple[list[Step], list[Step]]:
    """Reduce-scatter and all-gather steps of ``rank`` in one lane; ``blocks[b]`` is block ``b``'s range."""
    torus = Torus(lane.dims)
    strides = _strides(torus.dims)
    x = torus.coords(rank)
    done = [0] * len(lane.dims)
    rs: list[Step] = []
    ag: list[Step] = []

    sized = sizing()

    def ranges(sets: list[Sequence[int]]) -> tuple[Range, ...]:
        if sized:
            return placeholder(product_size(blocks, torus.dims, sets))
        return merge_ranges(sorted(blocks[b] for b in _product(sets, strides)))

    for k, t in lane.plan:
        prog = lane.programs[k]
        assert prog is not None
        sets = _coords_sets(lane, x, done)
        rs_tr, ag_tr = [], []
        for qc in prog.peers(x[k], t):
            mine, theirs = prog.mask(x[k], t, qc), prog.mask(qc, t, x[k])
            sets[k] = bits(mine)
            send = ranges(sets)
            sets[k] = bits(theirs)
            recv = ranges(sets)
            q = rank + (qc - x[k]) * strides[k]
            port = port_of(q)
            rs_tr.append(Transfer(q, send, recv, REDUCE, False, port))
            ag_tr.append(Transfer(q, recv, send, COPY, False, port))
        rs.append(Step(tuple(rs_tr), "reduce-scatter"))
        ag.append(Step(tuple(ag_tr), "all-gather"))
        done[k] += 1
    ag.reverse()
    return rs, ag


def _tree(prog: RingProgram) -> list[dict[int, list[int]]] | None:
    """Map, per step ``t``, each group ``H(c, t)`` to its children ``H(·, t+1)``.

    Children are ordered by lowest coordinate; ``None`` when the sets do not nest.
    """
    d = prog.d
    out = []
    for t in range(prog.steps):
        parents = set(prog.held(c, t) for c in range(d))
        kids = set(prog.held(c, t + 1) for c in range(d))
        if sum(bin(k).count("1") for k in kids) != d:
            return None
        tree: dict[int, list[int]] = {P: [] for P in parents}
        for k in sorted(kids, key=lambda m: m & -m):
            owner = [P for P in parents if k & ~P == 0]
            if len(owner) != 1:
                return None
            tree[owner[0]].append(k)
        out.append(tree)
    return out


def lane_order(lane: DimwiseLane) -> list[int] | None:
    """Find a block order in which every responsibility set ``∏_j H_j(x_j)`` is one contiguous run.

    When every dimension's sets nest (each ``H(c, t+1)`` inside one
    ``H(·, t)``), a depth-first walk that splits the dimension of each lane
    step in turn lists them contiguously, and with them every message of a
    laminar program (Swing on power-of-two sides: the negabinary bit-reversal
    order). ``None`` when some dimension does not nest.
    """
    trees = []
    for d, prog in zip(lane.dims, lane.programs):
        tr = _tree(prog) if prog is not None and d > 1 else []
        if tr is None:
            return None
        trees.append(tr)
    strides = _strides(lane.dims)
    order: list[int] = []
    groups = [(1 << d) - 1 if d > 1 else 1 for d in lane.dims]

    def walk(s: int) -> None:
        if s == len(lane.plan):
            order.append(sum(bits(g)[0] * st for g, st in zip(groups, strides)))
            return
        k, t = lane.plan[s]
        parent = groups[k]
        for child in trees[k][t][parent]:
            groups[k] = child
            walk(s + 1)
        groups[k] = parent

    walk(0)
    return order if len(order) == len(set(order)) == Torus(lane.dims).size else None


def lane_blocks(lane: DimwiseLane, slots: Sequence[Range]) -> list[Range]:
    """Place block ``b`` (owned by rank ``b``) on a slot: in :func:`lane_order`, else in rank order."""
    order = lane_order(lane)
    if order is None:
        return list(slots)
    out: list[Range] = [(0, 0)] * len(slots)
    for i, b in enumerate(order):
        out[b] = slots[i]
    return out


def fold_pairs(dims: tuple[int, ...], virt: tuple[int, ...],
               onto: Callable[[int, int, int], int]) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per side longer than its virtual side, ``(source, target)`` pairs that fold it away.

    On side ``k`` (sides in order, those with ``dims[k] == virt[k]`` skipped) every rank with
    coordinate ``c ≥ virt[k]`` there, and inside the sides folded before, is a source; its target
    has coordinate ``onto(c, dims[k], virt[k])`` there. So each fold is one step and every rank is
    a source at most once per fold.
    """
    torus = Torus(dims)
    plan: list[tuple[tuple[int, int], ...]] = []
    done: list[int] = []
    for k, (d, v) in enumerate(zip(dims, virt)):
        if d == v:
            continue
        pairs = []
        for x in range(torus.size):
            c = torus.coords(x)
            if c[k] >= v and all(c[j] < virt[j] for j in done):
                tgt = list(c)
                tgt[k] = onto(c[k], d, v)
                pairs.append((x, torus.rank(tgt)))
        plan.append(tuple(pairs))
        done.append(k)
    return tuple(plan)
