"""How a vector of ``count`` elements is cut into parts and blocks.

One rule for every schedule: ``n`` pieces of near-equal size, the first
``count mod n`` pieces one element longer. All ranks compute the same layout
from ``count`` alone, so they agree on every boundary.
"""

from __future__ import annotations

__all__ = ["split", "split_range"]


def split(count: int, n: int) -> list[tuple[int, int]]:
    """``n`` contiguous ``(start, stop)`` pieces covering ``range(count)``."""
    if n < 1:
        raise ValueError(f"cannot split into {n} pieces")
    base, extra = divmod(count, n)
    out, start = [], 0
    for i in range(n):
        stop = start + base + (1 if i < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def split_range(rng: tuple[int, int], n: int) -> list[tuple[int, int]]:
    """:func:`split` applied to the range ``rng`` (offsets shifted)."""
    a, b = rng
    return [(a + s, a + e) for s, e in split(b - a, n)]
