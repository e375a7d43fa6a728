"""Every message of every (lane, step), read from the per-rank schedules, and the bytes each rank reduces.

Algorithm:
    The schedules of all ranks are read, sizes only
    (:func:`~swing_mpi.schedule.build_sizes`: no ranges built), through the model's
    :func:`~swing_mpi.model.routing.collect_traffic`, which builds a few
    representative ranks and proves (on extra ranks) that a rank's messages,
    relative to its own coordinates, repeat with a period ``P`` per (lane,
    step); where no period holds it builds every rank. The messages of every
    rank are then the representative's, translated: ``dst = src + offset``
    (mod the sides). The elements each rank reduces per (lane, step)
    (receives whose action is ``REDUCE``, plus a ``combine`` step's
    ``(slots − 1)·count``) are recorded while the schedules are read and
    checked for the same period on every rank that was built.

    A half (``reduce_scatter``, ``allgather``) is the allreduce schedule's
    reducing or copying transfers (:func:`~swing_mpi.model.cost.part_of`), as
    the model prices it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..model.cost import PARTS, part_of
from ..model.routing import Traffic, collect_traffic
from ..schedule import ALGORITHMS, algorithm_info, build_sizes
from ..schedule.base import REDUCE, Schedule

__all__ = ["Messages", "StepMessages", "read_messages"]


@dataclass(frozen=True)
class StepMessages:
    """The messages of one (lane, step), all ranks: parallel arrays, elements at the build count."""

    src: np.ndarray
    dst: np.ndarray
    elems: np.ndarray


@dataclass(frozen=True)
class Messages:
    """What every rank sends and reduces, for a vector of ``count`` elements."""

    algorithm: str
    collective: str
    dims: tuple[int, ...]
    count: int
    steps: dict[tuple[int, int], StepMessages]
    """``(lane, step)`` → its messages (steps without any are left out)."""
    reduce: np.ndarray
    """``[lane, step, rank]`` elements reduced when that step's receives are in."""
    nlanes: int
    nsteps: int
    phases: tuple[str, ...]
    symmetry: str
    """How the ranks were read (``parity``, ``periodic``, ``full``: see the model's routing)."""
    built: int
    """Schedules built."""


def _reduce_table(s: Schedule, nlanes: int, nsteps: int) -> np.ndarray:
    out = np.zeros((nlanes, nsteps), dtype=np.int64)
    for li, lane in enumerate(s.lanes):
        for k, st in enumerate(lane):
            n = sum(t.recv_count for t in st.transfers if t.action == REDUCE)
            if st.combine:
                n += (s.slots - 1) * s.count
            out[li, k] = n
    return out


def _box_ranks(P: tuple[int, ...], dims: tuple[int, ...]) -> np.ndarray:
    box = np.array(np.unravel_index(np.arange(math.prod(P)), P)).reshape(len(P), -1)
    return np.asarray(np.ravel_multi_index(tuple(box), dims))


@lru_cache(maxsize=64)
def read_messages(algorithm: str, dims: tuple[int, ...], count: int, collective: str = "allreduce") -> Messages:
    """Read every rank's messages of ``algorithm`` on ``dims`` for ``count`` elements (cached).

    ``collective``: ``allreduce`` or one half (:data:`~swing_mpi.model.cost.PARTS`).
    """
    info = algorithm_info(algorithm)
    if collective not in PARTS:
        raise ValueError(f"collective must be one of {', '.join(PARTS)}, got {collective!r}")
    if collective != "allreduce" and collective not in info.collectives:
        halves = ", ".join(n for n, i in ALGORITHMS.items() if collective in i.collectives)
        raise ValueError(f"{algorithm} has no {collective} half; algorithms that have one: {halves}")
    recorded: dict[int, Schedule] = {}

    def get(rank: int) -> Schedule:
        s = part_of(build_sizes(algorithm, dims, rank, count), collective)
        recorded[rank] = s
        return s

    traffic = collect_traffic(get, dims, count)
    reduce = _reduce_per_rank(traffic, recorded)
    if reduce is None:  # the reductions do not repeat with the messages' period: read every rank
        recorded.clear()
        traffic = collect_traffic(get, dims, count, symmetry="full")
        reduce = _reduce_per_rank(traffic, recorded)
        assert reduce is not None
    return Messages(algorithm, collective, dims, count, _expand(traffic), reduce, traffic.nlanes, traffic.nsteps,
                    tuple(traffic.phases), traffic.symmetry, traffic.built)


def _reduce_per_rank(traffic: Traffic, recorded: dict[int, Schedule]) -> np.ndarray | None:
    """``[lane, step, rank]`` reduced elements from the representatives, or None if a built rank disagrees."""
    dims = traffic.torus.dims
    p = math.prod(dims)
    nl, ns = traffic.nlanes, traffic.nsteps
    tables = {r: _reduce_table(s, nl, ns) for r, s in recorded.items()}
    coords = np.array(np.unravel_index(np.arange(p), dims))  # [D, p]
    out = np.zeros((nl, ns, p), dtype=np.int64)
    built = np.array(sorted(tables), dtype=np.int64)
    for li in range(nl):
        for k in range(ns):
            P = tuple(int(v) for v in traffic.periods[li, k])
            reps = _box_ranks(P, dims)
            vals = np.array([tables[int(r)][li, k] for r in reps], dtype=np.int64)
            rep_of = np.ravel_multi_index(tuple(c % q for c, q in zip(coords, P)), P)
            out[li, k] = vals[rep_of]
            if len(built) and np.any(out[li, k, built] != np.array([tables[int(r)][li, k] for r in built])):
                return None
    return out


def _expand(traffic: Traffic) -> dict[tuple[int, int], StepMessages]:
    """Every rank's messages per (lane, step), translated from its representative's pattern."""
    dims = traffic.torus.dims
    p = math.prod(dims)
    D = len(dims)
    dims_a = np.array(dims, dtype=np.int64)[:, None]
    coords = np.array(np.unravel_index(np.arange(p), dims), dtype=np.int64)  # [D, p]
    out: dict[tuple[int, int], StepMessages] = {}
    for li in range(traffic.nlanes):
        for k in range(traffic.nsteps):
            ids = traffic.rep_ids[(li, k)]
            if not ids.any():
                continue
            P = tuple(int(v) for v in traffic.periods[li, k])
            pid_of = ids[np.ravel_multi_index(tuple(c % q for c, q in zip(coords, P)), P)]
            srcs, dsts, elems = [], [], []
            for pid in np.unique(pid_of):
                if pid == 0:
                    continue
                ranks = np.nonzero(pid_of == pid)[0]
                for delta, n in traffic.patterns[int(pid)]:
                    d = (coords[:, ranks] + np.array(delta, dtype=np.int64).reshape(D, 1)) % dims_a
                    srcs.append(ranks)
                    dsts.append(np.ravel_multi_index(tuple(d), dims))
                    elems.append(np.full(len(ranks), n, dtype=np.int64))
            if srcs:
                out[(li, k)] = StepMessages(np.concatenate(srcs), np.concatenate(dsts), np.concatenate(elems))
    return out
