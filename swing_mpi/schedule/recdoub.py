"""Recursive doubling (latency-optimal, XOR peers), order-preserving.

Algorithm:
    Rank ``r`` exchanges the whole vector with ``r XOR 2^s`` at step ``s``
    and both reduce, the lower rank's operand first. Every rank then holds
    the reduction of an aligned interval of ranks, in rank order, so the
    result is right for non-commutative ops and bit-identical on all ranks.

Restrictions:
    None: any op, commutative or not (this is where the API sends
    non-commutative ops).

Non-powers of two:
    MPICH's fold on the rank count (:func:`fold_steps`, shared with the XOR
    bandwidth schedules): with ``p' = 2^⌊log2 p⌋`` and
    ``rem = p − p'``, each even rank ``r < 2·rem`` hands its vector to
    ``r + 1`` (which reduces ``r``'s operand first) and sits out; the others
    renumber and run recursive doubling; the result is handed back last.

Cost:
    ⌈log2 p⌉·α + n·⌈log2 p⌉·β + n·⌈log2 p⌉·γ   (plus 2α + 2nβ + nγ when p is not a power of two)
"""

from __future__ import annotations

from ..topology import Torus
from .base import COPY, REDUCE, Range, Schedule, Step, Transfer, open_schedule

__all__ = ["build_recdoub", "fold_ranks", "fold_virtual", "fold_real", "fold_steps"]


def fold_ranks(p: int) -> tuple[int, int]:
    """Return ``(p', rem)``: the power of two that runs the core and the folded count."""
    pw = 1 << (p.bit_length() - 1)
    return pw, p - pw


def fold_virtual(rank: int, rem: int) -> int | None:
    """Return the virtual id of ``rank`` among the ``p'`` survivors of the fold (``None``: it sits out)."""
    if rank < 2 * rem:
        return None if rank % 2 == 0 else rank // 2
    return rank - rem


def fold_real(v: int, rem: int) -> int:
    """Return the communicator rank of virtual id ``v`` (the inverse of :func:`fold_virtual`)."""
    return 2 * v + 1 if v < rem else v + rem


def fold_steps(rank: int, rem: int, torus: Torus, ranges: tuple[Range, ...]) -> tuple[Step, Step]:
    """Return the fold (first) and unfold (last) step of ``rank`` on ``ranges``.

    An even rank ``r < 2·rem`` sends ``ranges`` to ``r + 1``, which reduces
    them with ``r``'s operand first, and gets the result back at the end;
    every other rank has two empty steps.
    """
    if rank >= 2 * rem:
        return Step((), "fold"), Step((), "unfold")
    q = rank + 1 if rank % 2 == 0 else rank - 1
    port = torus.port_towards(rank, q)
    if rank % 2 == 0:
        return (Step((Transfer(q, ranges, (), REDUCE, False, port),), "fold"),
                Step((Transfer(q, (), ranges, COPY, False, port),), "unfold"))
    return (Step((Transfer(q, (), ranges, REDUCE, True, port),), "fold"),
            Step((Transfer(q, ranges, (), COPY, False, port),), "unfold"))


def build_recdoub(rank: int, dims: tuple[int, ...], count: int, *,
                  algorithm: str = "recdoub") -> Schedule:
    """Build recursive doubling for ``rank``: ``⌈log2 p⌉`` whole-vector exchanges (+ fold and unfold)."""
    torus, alone = open_schedule(algorithm, rank, dims, count)
    if alone is not None:
        return alone
    p, dims = torus.size, torus.dims
    whole: tuple[Range, ...] = ((0, count),) if count else ()
    pw, rem = fold_ranks(p)
    vr = fold_virtual(rank, rem)
    steps: list[Step] = []
    mask = 1
    while mask < pw:
        tr: tuple[Transfer, ...] = ()
        if vr is not None:
            q = fold_real(vr ^ mask, rem)
            tr = (Transfer(q, whole, whole, REDUCE, q < rank, torus.port_towards(rank, q)),)
        steps.append(Step(tr, "exchange"))
        mask <<= 1
    if rem:
        fold, unfold = fold_steps(rank, rem, torus, whole)
        steps = [fold] + steps + [unfold]
    return Schedule(algorithm, rank, p, count, tuple(dims), (tuple(steps),), ("whole",), {})
