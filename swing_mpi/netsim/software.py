"""The compiled engine's software costs as the simulator charges them: threads, segments, overlap.

The engine (``swing_mpi._core``, measured by ``swing-mpi probe``) posts a step's
lanes together and advances a rank in lockstep (the simulator's ``cpu="lockstep"``,
each lane's ``α`` the probe's ``alpha_s`` = ``step_s / lanes``), and reduces:

* **on T threads.** ``T`` is ``threads`` (``$SWING_MPI_THREADS``; by default the
  node's cores over its ranks, so a one-rank node's cores: ``swing-mpi simulate
  --cores``). A block is split over at most ``nbytes // split_bytes`` threads
  (:data:`SPLIT_BYTES`, the engine's smallest part; smaller blocks run on one).
  The cost per byte on ``k`` threads, :func:`gamma_threads`, is the probe's
  ``gamma_threads_s_per_byte[k]`` where it measured ``k``, else extrapolated from
  the largest measured count ``m < k`` with the parallel efficiency measured
  there: ``g(k) = g1 / (1 + (k-1)·e)``, ``e = (g1/g(m) - 1) / (m-1)`` clipped to
  0..1 (with threads 1 and 2 measured: ``e = g1/g2 - 1``; nothing measured beyond
  one thread: ``e = 0``, no gain).
* **segment by segment, overlapped, with T >= 2.** A lane's step longer than a
  segment (``segment_bytes``, 1 MiB by default) arrives as segments; each is
  queued on the worker threads as it comes in, while the next is on the wire.
  What the step still costs once its data is in (:func:`exposed_reduction`) is
  the last segment's reduction plus whatever of the others the transfer did not
  hide: ``γ_last·last + max(0, γ_T·(n - last) - transfer)``. The workers are the
  rank's, shared by its lanes: the simulator queues the earlier segments' work of
  every lane on one pool from the moment the step is posted, and each lane's last
  segment after it (:mod:`.engine`).
* **with T = 1, after the data is in.** The engine queues nothing without a second
  thread: each segment is reduced on the thread that also drives MPI, so the
  simulator charges the whole ``γ1·n`` after the step's data is in, as before
  (shared memory needs that thread to copy the next segment; a NIC would not, so
  this is the pessimistic reading).

A costs file without ``lanes_together`` (the interpreted executor's) keeps the
old model: lanes in series (``cpu="rank"``), ``gamma_s_per_byte`` on one thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["SPLIT_BYTES", "DEFAULT_SEGMENT", "gamma_threads", "gamma_table", "exposed_reduction",
           "reduction_seconds", "engine_preset"]

SPLIT_BYTES = 256 << 10
"""The engine's smallest part of a threaded reduction (``executor.REDUCE_MIN_BYTES``): a block of ``n`` bytes runs
on at most ``n // SPLIT_BYTES`` threads."""
DEFAULT_SEGMENT = 1 << 20
"""Segment bytes where the costs file does not say (``$SWING_MPI_SEGMENT``'s default)."""


def gamma_threads(measured: Mapping[int, float], threads: int, gamma_1: float | None = None) -> float:
    """Seconds per byte reduced on ``threads`` threads: measured, else extrapolated (see the module's docstring).

    ``measured``: ``{threads: s/B}``; ``gamma_1``: the one-thread cost where ``measured`` has no 1.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    if threads in measured:
        return float(measured[threads])
    g1 = measured.get(1, gamma_1)
    if g1 is None:
        raise ValueError("no one-thread reduction cost to extrapolate from")
    below = [k for k in measured if 1 < k < threads and measured[k] > 0]
    e = 0.0
    if below:
        m = max(below)
        e = min(1.0, max(0.0, (g1 / measured[m] - 1.0) / (m - 1)))
    return float(g1) / (1.0 + (threads - 1) * e)


def gamma_table(measured: Mapping[int, float], threads: int, gamma_1: float | None = None) -> tuple[float, ...]:
    """``(g(1), g(2), ..., g(threads))``: :func:`gamma_threads` for every count up to ``threads``."""
    return tuple(gamma_threads(measured, k, gamma_1) for k in range(1, threads + 1))


def exposed_reduction(nbytes: float, gamma_s_per_byte: float, segment_bytes: int, threads: int,
                      transfer_s: float, gamma_last_s_per_byte: float | None = None) -> float:
    """Seconds of a lane step's reduction left after its data is in (one lane alone on the rank's threads).

    With ``threads >= 2`` and segments: the last segment's reduction (at ``gamma_last_s_per_byte``, default
    ``gamma_s_per_byte``) plus the rest's beyond ``transfer_s`` (arrival minus post). Otherwise all of it.
    """
    if nbytes <= 0:
        return 0.0
    if threads < 2 or segment_bytes <= 0:
        return gamma_s_per_byte * nbytes
    last = min(nbytes, segment_bytes)
    g_last = gamma_s_per_byte if gamma_last_s_per_byte is None else gamma_last_s_per_byte
    return g_last * last + max(0.0, gamma_s_per_byte * (nbytes - last) - transfer_s)


def _threads_for(nbytes: np.ndarray, threads: int, split_bytes: int) -> np.ndarray:
    """Threads a block of ``nbytes`` is split over: ``min(threads, max(1, nbytes // split_bytes))``."""
    if split_bytes <= 0:
        return np.full(nbytes.shape, threads, dtype=np.int64)
    return np.clip(np.floor_divide(nbytes, split_bytes).astype(np.int64), 1, threads)


def reduction_seconds(nbytes: np.ndarray, gammas: tuple[float, ...], segment_bytes: int,
                      split_bytes: int = SPLIT_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(early_s, last_s)`` for blocks of ``nbytes`` reduced with ``gammas`` (``g(1)..g(T)``).

    ``T = len(gammas)``. With ``T >= 2`` and ``segment_bytes > 0``: ``early_s`` is the work of every segment but
    the last, on the pool's ``T`` threads (it may hide behind the transfer), ``last_s`` the last segment's, split
    as the engine splits it. Otherwise ``early_s`` is 0 and ``last_s`` the whole block's.
    """
    g = np.asarray(gammas, dtype=float)
    T = len(gammas)
    nbytes = np.asarray(nbytes, dtype=float)
    if T == 0:
        raise ValueError("gammas must hold at least the one-thread cost")
    if T < 2 or segment_bytes <= 0:
        k = _threads_for(nbytes, T, split_bytes)
        return np.zeros_like(nbytes), nbytes * g[k - 1]
    last = np.minimum(nbytes, segment_bytes)
    k = _threads_for(last, T, split_bytes)
    return (nbytes - last) * g[T - 1], last * g[k - 1]


def engine_preset(costs: Any, cores: int = 1) -> dict[str, object]:
    """Return the ``engine`` preset's :class:`~.params.SimParams` fields for a one-rank node of ``cores``.

    ``costs``: a :class:`swing_mpi.engine_costs.EngineCosts`. With ``lanes_together`` (the compiled engine):
    ``cpu="lockstep"``, ``α = alpha_s``, ``threads = cores``, ``γ`` per thread count from
    :func:`gamma_table` and the costs' segment. Without: the old model (``cpu="rank"``, one thread), where
    ``cores`` must be 1.
    """
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be an int >= 1, got {cores!r}")
    if not costs.lanes_together:
        if cores != 1:
            raise ValueError(f"the engine's costs from {costs.source} were measured with lanes in series and no "
                             "threads (no lanes_together): --cores needs a probe of the compiled engine")
        return {"alpha_s": costs.alpha_s, "gamma_s_per_byte": costs.gamma_s_per_byte, "cpu": "rank"}
    measured = dict(costs.gamma_threads_s_per_byte)
    gammas = gamma_table(measured, cores, costs.gamma_s_per_byte)
    segment = DEFAULT_SEGMENT if costs.segment_bytes is None else costs.segment_bytes
    return {"alpha_s": costs.alpha_s, "gamma_s_per_byte": gammas[-1], "cpu": "lockstep", "threads": cores,
            "gamma_threads": gammas, "segment_bytes": segment}
