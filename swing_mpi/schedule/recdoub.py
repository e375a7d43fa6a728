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
    MPICH's fold on the rank count: with ``p' = 2^⌊log2 p⌋`` and
    ``rem = p − p'``, each even rank ``r < 2·rem`` hands its vector to
    ``r + 1`` (which reduces ``r``'s operand first) and sits out; the others
    renumber and run recursive doubling; the result is handed back last.

Cost:
    ⌈log2 p⌉·α + n·⌈log2 p⌉·β + n·⌈log2 p⌉·γ   (plus 2α + 2nβ + nγ when p is not a power of two)
"""

from __future__ import annotations

from ..topology import Torus
from .base import COPY, REDUCE, Schedule, Step, Transfer

__all__ = ["build_recdoub", "fold_ranks"]


def fold_ranks(p: int) -> tuple[int, int]:
    """``(p', rem)``: the power of two that runs the core and the folded count."""
    pw = 1 << (p.bit_length() - 1)
    return pw, p - pw


def build_recdoub(rank: int, dims: tuple[int, ...], count: int, *,
                  algorithm: str = "recdoub") -> Schedule:
    torus = Torus(dims)
    p = torus.size
    if p == 1:
        return Schedule(algorithm, rank, p, count, dims, (), (), {})
    whole = ((0, count),) if count else ()
    pw, rem = fold_ranks(p)

    def real(v: int) -> int:  # new rank -> communicator rank
        return 2 * v + 1 if v < rem else v + rem

    steps: list[Step] = []
    back: tuple[Transfer, ...] = ()
    if rem:
        tr: tuple[Transfer, ...] = ()
        if rank < 2 * rem:
            q = rank + 1 if rank % 2 == 0 else rank - 1
            port = torus.port_towards(rank, q)
            if rank % 2 == 0:
                tr = (Transfer(q, whole, (), REDUCE, False, port),)
                back = (Transfer(q, (), whole, COPY, False, port),)
            else:
                tr = (Transfer(q, (), whole, REDUCE, True, port),)
                back = (Transfer(q, whole, (), COPY, False, port),)
        steps.append(Step(tr, "fold"))
    if rank < 2 * rem and rank % 2 == 0:
        vr = None
    else:
        vr = rank // 2 if rank < 2 * rem else rank - rem
    mask = 1
    while mask < pw:
        tr = ()
        if vr is not None:
            q = real(vr ^ mask)
            tr = (Transfer(q, whole, whole, REDUCE, q < rank, torus.port_towards(rank, q)),)
        steps.append(Step(tr, "exchange"))
        mask <<= 1
    if rem:
        steps.append(Step(back, "unfold"))
    return Schedule(algorithm, rank, p, count, tuple(dims), (tuple(steps),), ("whole",), {})
