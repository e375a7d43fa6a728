"""Reduce-scatter and all-gather: the two halves of a bandwidth-optimal allreduce schedule.

Algorithm:
    A bandwidth-optimal allreduce (``swing-bw``, ``ring``, ``bucket``,
    ``rabenseifner``, …) is a reduce-scatter that leaves every rank owning one
    block of every lane's part, then an all-gather. Each half is a collective
    of its own, with MPI's layout: block ``i`` of the vector belongs to rank
    ``i`` (``MPI_Reduce_scatter``'s ``recvcounts``, ``MPI_Allgather``'s
    receive buffer).

    1. The allreduce schedule is built for a *virtual* vector of ``L·p``
       units (``L`` lanes, ``p`` ranks): every block of every lane is one unit.
    2. Which rank owns which unit after the reduce-scatter: a builder may say
       it (``Schedule.meta["owned"]``: per lane, the range each rank owns);
       otherwise it is read off every rank's schedule (received and never
       passed on during the ``fold`` and ``reduce-scatter`` steps), which
       needs no help from the builder but builds ``p`` schedules. Cached per
       (algorithm, dims); wrong or missing ownership raises ``ValueError``.
    3. Each unit is given a target rank: its owner, or, for owners with more
       than one unit in a lane (the ranks that took over a folded neighbour's
       part), a rank that owns none, preferably that neighbour.
    4. Every range of the kept steps is relabelled from units to the user's
       layout: unit (lane ``P``, target ``t``) becomes sub-range ``P`` of the
       user's block of ``t`` (:func:`~swing_mpi.blocks.split_range` into
       ``L``). A contiguous run of units becomes several user ranges (the
       executor packs them into one message), so MPI's rank order is reached
       with no permutation copy, and uneven or zero counts need nothing
       special (a unit of zero elements drops out of its messages).
    5. The reduce-scatter keeps the ``fold`` and ``reduce-scatter`` steps and
       ends with a ``hand-off`` step where an owner sends units to their
       targets; the all-gather starts with the reverse hand-off and keeps the
       ``all-gather`` and ``unfold`` steps.

Restrictions:
    Algorithms whose registry entry says ``halves`` (bandwidth-optimal ones).
    Commutative ops: blocks are reduced in the schedule's order, not rank order.
    ``p = 1`` is an empty schedule.

Cost:
    Each half moves what the same half of the allreduce moves: per rank about
    ``n·(p−1)/p`` elements (plus the fold's whole part when an XOR schedule
    runs on a rank count that is not a power of two, and the hand-off of one
    block per folded rank), in the allreduce's step count of that half (plus
    one hand-off step where there is one).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..blocks import split, split_range
from .base import COPY, Range, Schedule, Step, Transfer, merge_ranges

__all__ = ["REDUCE_SCATTER", "ALL_GATHER", "HALF_PHASES", "build_half", "unit_owners", "unit_targets"]

REDUCE_SCATTER = "reduce-scatter"
ALL_GATHER = "all-gather"
HALF_PHASES = {REDUCE_SCATTER: ("fold", "reduce-scatter"), ALL_GATHER: ("all-gather", "unfold")}
"""The step phases each half keeps from the allreduce schedule."""


def _build(algorithm: str, dims: tuple[int, ...], rank: int, count: int) -> Schedule:
    from . import algorithm_info, build_schedule  # the registry imports this module's users

    if "reduce_scatter" not in algorithm_info(algorithm).collectives:
        raise ValueError(f"{algorithm} has no reduce-scatter / all-gather half")
    return build_schedule(algorithm, dims, rank, count)


def _size(dims: tuple[int, ...]) -> int:
    p = 1
    for d in dims:
        p *= d
    return p


@lru_cache(maxsize=64)
def unit_owners(algorithm: str, dims: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """Return ``(L, owner)``: the lane count and the rank owning each of the ``L·p`` units after the reduce-scatter.

    Raises ``ValueError`` if the schedule's reduce-scatter does not leave every
    unit with exactly one owner (then it has no usable half).
    """
    p = _size(dims)
    lanes = len(_build(algorithm, dims, 0, 0).lanes)
    units = lanes * p
    owner = [-1] * units
    keep = HALF_PHASES[REDUCE_SCATTER]
    owned: Any = _build(algorithm, dims, 0, units).meta.get("owned") if p > 1 else None
    if owned is not None:  # the builder says where blocks end up: no need to read every rank's schedule
        for t_ranges in owned:
            for t, (a, b) in enumerate(t_ranges):
                for u in range(a, b):
                    if owner[u] != -1:
                        raise ValueError(f"{algorithm} on {'x'.join(map(str, dims))}: unit {u} owned by ranks "
                                         f"{owner[u]} and {t} (its schedule's meta['owned'])")
                    owner[u] = t
    for t in range(p if owned is None else 0):
        s = _build(algorithm, dims, t, units)
        got = bytearray(units)
        for lane in s.lanes:
            for st in lane:
                if st.phase not in keep:
                    continue
                for tr in st.transfers:
                    for a, b in tr.recv:
                        got[a:b] = b"\x01" * (b - a)
                    for a, b in tr.send:
                        got[a:b] = bytes(b - a)
        for u in range(units):
            if got[u]:
                if owner[u] != -1:
                    raise ValueError(f"{algorithm} on {'x'.join(map(str, dims))}: unit {u} ends on ranks "
                                     f"{owner[u]} and {t}; no reduce-scatter half")
                owner[u] = t
    if p > 1 and -1 in owner:
        raise ValueError(f"{algorithm} on {'x'.join(map(str, dims))}: unit {owner.index(-1)} has no owner after "
                         f"the reduce-scatter; no reduce-scatter half")
    if p == 1:
        owner = [0] * units
    return lanes, tuple(owner)


@lru_cache(maxsize=64)
def unit_targets(algorithm: str, dims: tuple[int, ...]) -> tuple[int, ...]:
    """Return the rank whose block each unit belongs to (one unit per rank and lane)."""
    lanes, owner = unit_owners(algorithm, dims)
    p = _size(dims)
    target = [-1] * len(owner)
    for a, b in split(len(owner), lanes):
        taken = [False] * p
        spare = []
        for u in range(a, b):
            if not taken[owner[u]]:
                taken[owner[u]] = True
                target[u] = owner[u]
            else:
                spare.append(u)
        for u in spare:
            o = owner[u]
            near = [t for t in (o - 1, o + 1) if 0 <= t < p and not taken[t]]
            t = near[0] if near else taken.index(False)
            taken[t] = True
            target[u] = t
    return tuple(target)


def build_half(algorithm: str, dims: tuple[int, ...], rank: int, blocks: tuple[Range, ...], *,
               half: str) -> Schedule:
    """Return ``rank``'s reduce-scatter or all-gather schedule delivering ``blocks[t]`` to rank ``t``.

    ``blocks[t]`` is the element range of rank ``t``'s block in the user's
    vector (any order, disjoint; empty ranges allowed). The schedule's
    ``count`` is the vector's length, the largest end of a block.
    """
    if half not in HALF_PHASES:
        raise ValueError(f"half must be {REDUCE_SCATTER!r} or {ALL_GATHER!r}, got {half!r}")
    dims = tuple(dims)
    p = _size(dims)
    if len(blocks) != p:
        raise ValueError(f"need one block per rank ({p}), got {len(blocks)}")
    count = max((b for _, b in blocks), default=0)
    if p == 1:
        return Schedule(algorithm, rank, p, count, dims, (), (), {"collective": half})
    lanes, owner = unit_owners(algorithm, dims)
    target = unit_targets(algorithm, dims)
    user: list[tuple[Range, ...]] = []
    for lane, (a, b) in enumerate(split(len(owner), lanes)):
        for u in range(a, b):
            rng = split_range(blocks[target[u]], lanes)[lane]
            user.append((rng,) if rng[1] > rng[0] else ())

    def relabel(ranges: tuple[Range, ...]) -> tuple[Range, ...]:
        return merge_ranges([r for a, b in ranges for u in range(a, b) for r in user[u]])

    virtual = _build(algorithm, dims, rank, len(owner))
    keep = HALF_PHASES[half]
    out_lanes = []
    for lane_steps, (a, b) in zip(virtual.lanes, split(len(owner), lanes)):
        steps = []
        for st in lane_steps:
            if st.phase not in keep:
                continue
            trs = []
            for t in st.transfers:
                send, recv = relabel(t.send), relabel(t.recv)
                if send or recv:
                    trs.append(Transfer(t.peer, send, recv, t.action, t.peer_first, t.port))
            steps.append(Step(tuple(trs), st.phase, st.combine))
        moves = [u for u in range(a, b) if owner[u] != target[u]]
        if moves:
            hand = _hand_off(rank, moves, owner, target, user, to_owner=half == ALL_GATHER)
            steps = steps + [hand] if half == REDUCE_SCATTER else [hand] + steps
        out_lanes.append(tuple(steps))
    meta: dict[str, Any] = {"collective": half}
    if half == REDUCE_SCATTER:  # what the executor must leave in the work vector: this rank's block
        meta["result"] = tuple(r for r in (blocks[rank],) if r[1] > r[0])
    return Schedule(algorithm, rank, p, count, dims, tuple(out_lanes), virtual.lane_names, meta)


def _hand_off(rank: int, moves: list[int], owner: tuple[int, ...], target: tuple[int, ...],
              user: list[tuple[Range, ...]], *, to_owner: bool) -> Step:
    """Move units between owner and target (reduce-scatter: to the target; all-gather: to the owner)."""
    send: dict[int, list[Range]] = {}
    recv: dict[int, list[Range]] = {}
    for u in moves:
        src, dst = (target[u], owner[u]) if to_owner else (owner[u], target[u])
        if rank == src:
            send.setdefault(dst, []).extend(user[u])
        elif rank == dst:
            recv.setdefault(src, []).extend(user[u])
    trs = []
    for peer in sorted(set(send) | set(recv)):
        s, r = merge_ranges(send.get(peer, [])), merge_ranges(recv.get(peer, []))
        if s or r:
            trs.append(Transfer(peer, s, r, COPY))
    return Step(tuple(trs), "hand-off")
