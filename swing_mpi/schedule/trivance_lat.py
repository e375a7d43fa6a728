"""Latency-optimal Trivance (``trivance-lat``): the whole vector to both neighbours at distance ``3^k``.

Algorithm:
    One lane, one dimension per step (:func:`~.dimwise.interleave`, starting
    in dimension 0). Exact ops (integers, bitwise and logical ops): every rank
    sends its partial sum and reduces the partials it receives. A rank's
    partial covers a *window* of ``w`` consecutive coordinates of the
    dimension; a three-way step (distance ``w``, both peers) makes it ``3w``,
    and the three windows are disjoint, so nothing is counted twice. Each
    side ``d`` runs one of two plans, the one with fewer steps (:func:`side_plan`):

    - *windows*, for ``d = 2^a·3^b``: ``b`` three-way steps, then ``a``
      two-way ones (distance ``w``: send to ``c − w``, take from ``c + w``,
      the window doubles): ``a + b`` steps, ``⌈log3 d⌉`` on a power of three;
    - *fold*: coordinate ``c ≥ v = 3^⌊log3 d⌋`` hands its vector to
      ``c mod v`` (a node takes up to two, in one step), sits out while the
      others run the three-way steps of ``v``, and gets the result back last:
      ``log3 v + 2`` steps (64: 5, where windows would take 6).

    Inexact ops (floating point, user ops): the *contributions form*, as for
    ``swing-lat``: along Trivance's own peers (``c ± s_t``, no fold) a rank
    takes from its ``+`` peer the contributions it lacks, then from its ``−``
    peer what it still lacks, so nothing arrives twice, and every rank
    combines all ``p`` in rank order: bit-identical on all ranks, ``p`` slots.

Restrictions:
    Commutative ops (the API sends non-commutative ones to ``recdoub``).

Cost (n bytes, exact ops, windows on every side, ``L = Σ`` steps):
    L·α + n·L·β + 2·n·L·γ on three-way steps (n to each of two ports);
    a fold adds two steps of up to 2n each; the contributions form receives n·(p−1).
"""

from __future__ import annotations

from functools import lru_cache

from ..topology import Torus
from .base import COPY, REDUCE, Range, Schedule, Step, Transfer, merge_ranges, open_schedule
from .blockset import bits
from .dimwise import fold_pairs, interleave
from .trivance import log3_ceil, trivance_distances

__all__ = ["side_plan", "build_trivance_lat"]


@lru_cache(maxsize=256)
def side_plan(d: int) -> tuple[int, tuple[tuple[int, bool], ...]]:
    """Return ``(v, steps)`` of a side: the ``v`` coordinates that run ``steps`` (``v < d``: the rest fold).

    Each step is ``(distance, both)``: ``both`` a three-way step, else a
    two-way one. Windows where ``d = 2^a·3^b`` and not longer than the fold.
    """
    if d == 1:
        return 1, ()
    b = 0
    v = 1
    while v * 3 <= d:
        v *= 3
        b += 1
    fold = tuple((3 ** t, True) for t in range(b))
    rest, a, three = d, 0, 0
    while rest % 2 == 0:
        rest //= 2
        a += 1
    while rest % 3 == 0:
        rest //= 3
        three += 1
    if rest == 1 and (v == d or a + three <= b + 2):
        steps, w = [], 1
        for _ in range(three):
            steps.append((w, True))
            w *= 3
        for _ in range(a):
            steps.append((w, False))
            w *= 2
        return d, tuple(steps)
    return v, fold


@lru_cache(maxsize=64)
def _fold_plan(dims: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[tuple[tuple[int, int], ...], ...]]:
    """Per folded side, ``(source, target)`` pairs: coordinate ``c ≥ v`` onto ``c mod v``.

    Only ranks inside the sides folded before take part, so each fold is one
    step and every rank is in at most one pair per fold as a source.
    """
    virt = tuple(side_plan(d)[0] for d in dims)
    return virt, fold_pairs(dims, virt, lambda c, d, v: c % v)


@lru_cache(maxsize=64)
def _window_steps(dims: tuple[int, ...]) -> tuple[tuple[tuple[tuple[int, bool, bool], ...] | None, ...], ...]:
    """Per core step and rank: ``((peer, sends, receives), …)`` (``None``: folded away)."""
    torus = Torus(dims)
    plans = [side_plan(d) for d in dims]
    inside = [all(c < v for c, (v, _) in zip(torus.coords(x), plans)) for x in range(torus.size)]
    rows = []
    for k, t in interleave([len(steps) for _, steps in plans], 0):
        v, steps = plans[k]
        w, both = steps[t]
        row: list[tuple[tuple[int, bool, bool], ...] | None] = []
        for x in range(torus.size):
            if not inside[x]:
                row.append(None)
                continue
            c = torus.coords(x)
            up, down = (torus.rank(c[:k] + ((c[k] + sw) % v,) + c[k + 1:]) for sw in (w, -w))
            if up == down:  # a ring of 2w: one peer, both ways
                row.append(((up, True, True),))
            elif both:
                row.append(((up, True, True), (down, True, True)))
            else:  # two-way step: the window grows towards +, so data flows towards −
                row.append(((up, False, True), (down, True, False)))
        rows.append(tuple(row))
    return tuple(rows)


def _ring_peers(c: int, d: int, t: int) -> list[int]:
    """Distinct coordinates ``c ± s_t`` on a ring of ``d`` (``+`` first; one where they coincide)."""
    s = trivance_distances(d)[t]
    out = [(c + s) % d]
    if (c - s) % d != out[0]:
        out.append((c - s) % d)
    return out


@lru_cache(maxsize=64)
def _gather_plan(dims: tuple[int, ...]) -> tuple[tuple[tuple[dict[int, int], dict[int, int]], ...], ...]:
    """Contributions form: per step and rank, ``(sends, receives)`` as ``{peer: contributions}``.

    A rank receives from its ``+`` peer what it lacks, then from its ``−``
    peer what it still lacks, so no contribution arrives twice.
    """
    torus = Torus(dims)
    p = torus.size
    coords = [torus.coords(x) for x in range(p)]
    have = [1 << x for x in range(p)]
    plan = []
    for k, t in interleave([log3_ceil(d) for d in dims], 0):
        out: list[dict[int, int]] = [{} for _ in range(p)]
        inc: list[dict[int, int]] = [{} for _ in range(p)]
        new = list(have)
        for x in range(p):
            got = have[x]
            for qc in _ring_peers(coords[x][k], dims[k], t):
                cc = list(coords[x])
                cc[k] = qc
                q = torus.rank(cc)
                m = have[q] & ~got
                if m:
                    out[q][x] = inc[x][q] = m
                    got |= m
            new[x] = got
        plan.append(tuple(zip(out, inc)))
        have = new
    if any(h != (1 << p) - 1 for h in have):
        raise AssertionError("trivance-lat contributions do not reach every rank")
    return tuple(plan)


def build_trivance_lat(rank: int, dims: tuple[int, ...], count: int, *, exact: bool = True,
                       algorithm: str = "trivance-lat") -> Schedule:
    """Latency-optimal Trivance of ``rank``: one lane, the whole vector (or the missing contributions) each step.

    ``exact=True``: partials sent and reduced (:func:`side_plan` per side).
    ``exact=False``: contributions gathered along Trivance's peers, then
    combined in rank order on every rank (``p`` slots).
    """
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims
    n = count
    whole = ((0, n),) if n else ()

    def port(q: int) -> int | None:
        return torus.port_towards(rank, q)

    if exact:
        _, folds = _fold_plan(dims)
        fold: list[Step] = []
        unfold: list[Step] = []
        for pairs in folds:
            tr: list[Transfer] = []
            back: list[Transfer] = []
            for src, tgt in pairs:
                if rank == src:
                    tr.append(Transfer(tgt, whole, (), REDUCE, False, port(tgt)))
                    back.append(Transfer(tgt, (), whole, COPY, False, port(tgt)))
                elif rank == tgt:
                    tr.append(Transfer(src, (), whole, REDUCE, False, port(src)))
                    back.append(Transfer(src, whole, (), COPY, False, port(src)))
            fold.append(Step(tuple(tr), "fold"))
            unfold.append(Step(tuple(back), "unfold"))
        unfold.reverse()
        core = []
        for row in _window_steps(dims):
            core.append(Step(tuple(Transfer(q, whole if s else (), whole if r else (), REDUCE, False, port(q))
                                   for q, s, r in row[rank] or ()), "exchange"))
        return Schedule(algorithm, rank, p, count, dims, (tuple(fold + core + unfold),), ("whole",), {})

    plan = _gather_plan(dims)

    def slots(mask: int) -> tuple[Range, ...]:
        return merge_ranges([(b * n, (b + 1) * n) for b in bits(mask)])

    steps: list[Step] = []
    for moves in plan:
        out, inc = moves[rank]
        tr = [Transfer(q, slots(out.get(q, 0)), slots(inc.get(q, 0)), COPY, False, port(q))
              for q in sorted(set(out) | set(inc)) if n]
        steps.append(Step(tuple(tr), "exchange"))
    steps.append(Step((), "combine", combine=True))
    return Schedule(algorithm, rank, p, count, dims, (tuple(steps),), ("contributions",),
                    {"form": "contributions"}, slots=p, input_slot=rank, result_slot=p - 1)
