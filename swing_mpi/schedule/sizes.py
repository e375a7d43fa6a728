"""Schedules that carry message sizes only, for readers of every rank of a large torus.

A reader of sizes (the network simulator reading a count whose blocks are uneven, so that every
rank's schedule differs and must be built; the cost model's reader) needs each transfer's
element count, not its ranges. Building the ranges is most of a schedule's cost: a Swing step on
128x128 sends up to 8,192 blocks, sorted and merged into ranges, for every rank. Inside
:func:`sizes_only` the block-set builders (:mod:`.dimwise`, :mod:`.blockset`) give each transfer
one placeholder range ``(0, n)`` of its true length ``n`` instead, summed from the blocks'
lengths with numpy. Peers, steps, actions and counts are those of the real schedule
(``tests/unit/test_schedule.py`` compares them on several shapes and counts); the ranges are not,
so such a schedule must never run and is never cached with the real ones
(:func:`swing_mpi.schedule.build_sizes`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from .base import Range

__all__ = ["sizes_only", "sizing", "placeholder", "product_size", "mask_size"]

_SIZES_ONLY: ContextVar[bool] = ContextVar("swing_mpi_schedule_sizes_only", default=False)
_LENGTHS: dict[int, tuple[Sequence[Range], np.ndarray]] = {}
_LENGTHS_KEPT = 32


@contextmanager
def sizes_only() -> Iterator[None]:
    """Build placeholder ranges of the true lengths inside the ``with`` block (this thread only)."""
    token = _SIZES_ONLY.set(True)
    try:
        yield
    finally:
        _SIZES_ONLY.reset(token)


def sizing() -> bool:
    """Whether builders are inside :func:`sizes_only`."""
    return _SIZES_ONLY.get()


def placeholder(n: int) -> tuple[Range, ...]:
    """One range of ``n`` elements (none for 0): a transfer's size without its place."""
    return ((0, n),) if n > 0 else ()


def _lengths(blocks: Sequence[Range]) -> np.ndarray:
    """Elements of every block, as an array (kept for the last few block layouts, by identity)."""
    hit = _LENGTHS.get(id(blocks))
    if hit is not None and hit[0] is blocks:
        return hit[1]
    arr = np.fromiter((b - a for a, b in blocks), dtype=np.int64, count=len(blocks))
    if len(_LENGTHS) >= _LENGTHS_KEPT:
        _LENGTHS.pop(next(iter(_LENGTHS)))
    _LENGTHS[id(blocks)] = (blocks, arr)  # holding ``blocks`` keeps its id from being reused
    return arr


def product_size(blocks: Sequence[Range], dims: tuple[int, ...], sets: Sequence[Sequence[int]]) -> int:
    """Elements of the blocks ``x`` with ``x[j]`` in ``sets[j]``, block ids row-major over ``dims``."""
    sub = _lengths(blocks).reshape(dims)
    for j, s in enumerate(sets):
        if len(s) != dims[j]:  # a whole side needs no selection
            sub = sub.take(s, axis=j)
    return int(sub.sum())


def mask_size(blocks: Sequence[Range], mask: int) -> int:
    """Elements of the blocks whose bits are set in ``mask``."""
    if mask <= 0:
        return 0
    lengths = _lengths(blocks)
    raw = np.frombuffer(mask.to_bytes((mask.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    chosen = np.unpackbits(raw, bitorder="little")[:len(lengths)].astype(bool)
    return int(lengths[:len(chosen)][chosen].sum())
