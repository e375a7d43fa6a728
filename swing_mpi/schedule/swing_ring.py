"""Swing's program on one ring: the step offsets and the reduce-scatter program of a side.

Below :mod:`.swing` (which builds the schedules and re-exports these) and
:mod:`.programs` (which picks the program of every lane on every side), so that
neither imports the other. :data:`EVEN_OFFSETS` was found by
:func:`~.swing.search_offsets`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from .rings import RingProgram, circulant_program, involution_program, mirror_program

__all__ = ["EVEN_OFFSETS", "rho", "delta", "ring_offsets", "offset_table", "dim_program"]

EVEN_OFFSETS: dict[int, tuple[int, ...]] = {
    6: (1, -1, 1), 10: (1, -1, 1, -3), 12: (1, -1, 1, -5), 14: (1, -1, 3, -3), 18: (1, -1, 1, -3, 5),
    20: (1, -1, 1, -3, 7), 22: (1, -1, 1, -5, 5), 24: (1, -1, 1, -5, 7), 26: (1, -1, 3, -3, 9),
    28: (1, -1, 3, -3, 11), 30: (1, -1, 3, -5, 9), 34: (1, -1, 1, -3, 5, -11), 36: (1, -1, 1, -3, 5, -13),
    38: (1, -1, 1, -3, 7, -11), 40: (1, -1, 1, -3, 7, -13), 42: (1, -1, 1, -5, 5, -15), 44: (1, -1, 1, -5, 5, -17),
    46: (1, -1, 1, -5, 7, -15), 48: (1, -1, 1, -5, 7, -17), 50: (1, -1, 3, -3, 9, -15), 52: (1, -1, 3, -3, 9, -17),
    54: (1, -1, 3, -3, 11, -15), 56: (1, -1, 3, -3, 11, -17), 58: (1, -1, 3, -5, 9, -19), 60: (1, -1, 3, -5, 9, -21),
    62: (1, -1, 3, -5, 11, -19),
}
"""Step offsets of even sides that are not powers of two, up to 62 (:func:`~.swing.search_offsets`'s
choice: the lowest routed ring load, later steps weighted down as the data halves)."""


def rho(t: int) -> int:
    """Return Swing's signed offset at in-dimension step ``t`` (1, −1, 3, −5, 11, −21, …)."""
    return (1 - (-2) ** (t + 1)) // 3


def delta(t: int) -> int:
    """Return the hop distance ``|ρ(t)|`` (1, 1, 3, 5, 11, 21, …)."""
    return abs(rho(t))


def ring_offsets(d: int) -> tuple[int, ...]:
    """Signed offsets of the in-dimension steps on an even ring of ``d``.

    Swing's ``ρ(t)`` on power-of-two sides; on other even sides the offsets of
    :data:`EVEN_OFFSETS` where known (same number of steps, less traffic).
    """
    return EVEN_OFFSETS.get(d) or tuple(rho(t) for t in range(math.ceil(math.log2(d))))


def offset_table(d: int, offsets: Sequence[int], sign: int = 1) -> tuple[tuple[int, ...], ...]:
    """Peer table of an even ring: at step ``t`` even ``c`` goes ``+offsets[t]``, odd ``c`` the other way."""
    return tuple(tuple((c + sign * (o if c % 2 == 0 else -o)) % d for c in range(d)) for o in offsets)


@lru_cache(maxsize=256)
def dim_program(d: int, sign: int = 1) -> RingProgram | None:
    """Return the reduce-scatter program of one ring of ``d`` (``None`` for ``d = 1``); ``sign=-1``: mirrored.

    Even ``d``: Listing-1 block sets of :func:`ring_offsets`. Odd ``d``: the
    circulant program (:func:`~.rings.circulant_program`; for ``d = 3`` it
    is the two-step ring), ``⌈log2 d⌉`` steps either way. (The all-ports
    lanes of ``swing-bw`` may run another odd program: :mod:`.programs`.)
    """
    if d == 1:
        return None
    if d % 2 == 0:
        prog = involution_program(offset_table(d, ring_offsets(d)), "swing")
    else:
        prog = circulant_program(d)
    return prog if sign == 1 else mirror_program(prog)
