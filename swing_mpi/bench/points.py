"""The benchmark's points: a size and place's input, reference and buffers, and what is timed on them.

Below :mod:`~swing_mpi.bench.options`, :mod:`~swing_mpi.bench.timing` and
:mod:`~swing_mpi.bench.measure` (which uses these and re-exports them); imports no MPI.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from .results import ALLREDUCE, COLLECTIVES, MIN_ITERS, Collective

__all__ = [
    "DEFAULT_MAX_BYTES", "OWN_BUFFERS_MAX", "iterations_for", "point_sizes", "make_input", "page_array", "page_copy",
    "PointSettings", "Point", "Prepared",
]

DEFAULT_MAX_BYTES = 256 << 20
"""At most this many bytes moved per point (``--max-bytes``)."""

OWN_BUFFERS_MAX = 1 << 20
"""Sizes up to this many bytes give every algorithm its own arrays (see :class:`Point`)."""


class PointSettings(Protocol):
    """What a :class:`Point` reads of the bench's options (:class:`swing_mpi.bench.options.Config` has it)."""

    collective: str
    dtype: str
    seed: int
    op: str
    check: bool


def iterations_for(nbytes: int, iters: int, *, max_bytes: int | None = DEFAULT_MAX_BYTES,
                   min_iters: int = MIN_ITERS, seconds_per_call: float | None = None,
                   max_time: float | None = None) -> int:
    """Return the timed iterations for one point: ``iters``, fewer for large or slow points.

    At most ``max_bytes`` moved (``nbytes·iters``) and about ``max_time``
    seconds (from ``seconds_per_call``), but never fewer than ``min_iters``
    (or ``iters`` if that is smaller).
    """
    n = iters
    if max_bytes and nbytes > 0:
        n = min(n, max_bytes // nbytes)
    if max_time and seconds_per_call and seconds_per_call > 0:
        n = min(n, int(max_time / seconds_per_call))
    return max(n, min(min_iters, iters), 1)


def point_sizes(sizes: Sequence[int], itemsize: int, p: int = 1, collective: str = ALLREDUCE) -> list[int]:
    """Return the sizes really measured: whole elements, at least one; sorted, no duplicates.

    The reduce-scatter and the all-gather split the vector into ``p`` equal
    blocks, so their sizes are also rounded down to a multiple of ``p``
    elements (at least one element per rank).
    """
    unit = itemsize * (1 if collective == ALLREDUCE else max(p, 1))
    return sorted({max(1, n // unit) * unit for n in sizes})


def make_input(dtype: Any, count: int, rank: int, seed: int, op: str) -> np.ndarray:
    """Return ``count`` seeded random elements that differ per rank (positive floats; small ints for prod)."""
    rng = np.random.default_rng([seed, rank])
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(0.5, 1.5, count).astype(dt)
    if dt.kind == "c":
        return (rng.uniform(0.5, 1.5, count) + 1j * rng.uniform(0.5, 1.5, count)).astype(dt)
    if op == "prod":
        return rng.integers(1, 4, count).astype(dt)
    hi = 100 if dt.itemsize == 1 else 1 << 20
    return rng.integers(0, hi, count).astype(dt)


def page_array(count: int, dtype: np.dtype) -> np.ndarray:
    """Return an uninitialised array of ``count`` ``dtype`` elements at the start of fresh pages of its own.

    Every algorithm's arrays are placed alike. Where numpy's allocator puts them depends on what was
    allocated and freed before (from 128 KiB on, glibc maps a fresh region until a freed mapping
    raises its threshold, then carves from the heap), and the placement alone moved the same
    ``MPI_Allreduce`` of 1 MiB at p = 4 by up to 25 %, so the algorithm whose arrays were made first
    looked faster.
    """
    nbytes = count * dtype.itemsize
    return np.frombuffer(mmap.mmap(-1, max(nbytes, 1)), dtype, count)


def page_copy(a: np.ndarray) -> np.ndarray:
    """Return a copy of the 1-D array ``a`` placed as :func:`page_array` places arrays."""
    out = page_array(len(a), a.dtype)
    out[...] = a
    return out


class Point:
    """One (size, place) of a run: the input and the reference, shared by all algorithms.

    ``count`` is the full vector's elements (the allreduce's vector, the
    reduce-scatter's input, the all-gather's output), ``block`` the elements
    per rank (``count`` for allreduce). ``input`` is what this rank sends,
    ``ref`` what it must receive, computed by MPI's own collective.

    Up to :data:`OWN_BUFFERS_MAX` bytes each algorithm gets its own send and
    receive arrays (:meth:`buffers`), as each call site of an application has:
    what a library caches per buffer (ours: the checks and choice of a repeated
    call; MPI's: memory registrations) then sees the same calls as in the
    application, not algorithms taking turns on one array. Above that the
    algorithms share one pair (a per-call cost is lost in the data movement
    there, and ten algorithms' arrays on 16 ranks would not fit in memory).
    """

    def __init__(self, comm: Any, mpi_op: Any, cfg: PointSettings, nbytes: int, place: str) -> None:
        """Make the input of ``nbytes`` (rounded to whole blocks) and, if checking, the reference (collective)."""
        self.collective: Collective = COLLECTIVES[cfg.collective]
        self.dtype = np.dtype(cfg.dtype)
        p, self.rank = comm.Get_size(), comm.Get_rank()
        split = self.collective.name != ALLREDUCE
        self.block = max(1, nbytes // (self.dtype.itemsize * (p if split else 1)))
        self.count = self.block * p if split else self.block
        self.nbytes = self.count * self.dtype.itemsize
        self.place = place
        name = self.collective.name
        self.input = make_input(self.dtype, self.block if name == "allgather" else self.count,
                                self.rank, cfg.seed, cfg.op)
        self.ref = np.empty(self.block if name == "reduce_scatter_block" else self.count, self.dtype)
        self._recv_len = self.block if (name == "reduce_scatter_block" and place == "out") else self.count
        self._shared: tuple[np.ndarray, np.ndarray] | None = None
        if cfg.check:
            if self.collective.reduces:
                getattr(comm, self.collective.mpi_call)(self.input, self.ref, mpi_op)
            else:
                getattr(comm, self.collective.mpi_call)(self.input, self.ref)

    def buffers(self) -> tuple[np.ndarray, np.ndarray]:
        """Return a (send, recv) pair: send holds the input, recv is uninitialised.

        Fresh arrays up to :data:`OWN_BUFFERS_MAX` bytes, else the point's one shared pair;
        every array starts on a page of its own (:func:`page_array`).
        """
        if self.nbytes <= OWN_BUFFERS_MAX:
            return page_copy(self.input), page_array(self._recv_len, self.dtype)
        if self._shared is None:
            self._shared = (page_copy(self.input), page_array(self._recv_len, self.dtype))
        return self._shared

    def load(self, recv: np.ndarray) -> None:
        """Put the input where an in-place call reads it (the all-gather: this rank's block only)."""
        if self.place != "in":
            return
        if self.collective.name == "allgather":
            recv[self.rank * self.block:(self.rank + 1) * self.block] = self.input
        else:
            recv[...] = self.input

    def result(self, recv: np.ndarray) -> np.ndarray:
        """Return the part of ``recv`` that holds this rank's result."""
        if self.collective.name == "reduce_scatter_block":
            return recv[:self.block]
        return recv


class Prepared:
    """An algorithm on a point after its checked call and warmup: what to time, how often."""

    __slots__ = ("alg", "call", "recv", "wrong", "iters", "times", "trial")

    def __init__(self, alg: str, call: Callable[[], Any], recv: np.ndarray, wrong: int, iters: int,
                 trial: dict[str, Any] | None = None) -> None:
        """Hold what :func:`prepare_point` found; ``times`` (per call, one per iteration) fills while timing."""
        self.alg = alg
        self.call = call
        self.recv = recv
        self.wrong = wrong
        self.iters = iters
        self.times: list[float] = []
        self.trial = trial
        """``auto``'s trial on this point (:mod:`swing_mpi.online`), run before timing; ``None``: none."""
