"""calibrate's measuring: time every candidate at every size, interleaved, as the bench times calls.

Rounds time one call of each live candidate (a new order each round, the same on every rank), each
from a barrier, the time of a call being its slowest rank's; larger sizes settle each timed call with
untimed ones of the same candidate; a candidate far behind is dropped at larger sizes (:func:`beaten`);
close ones race (:mod:`swing_mpi.calibrate.race`). docs/auto.md ("Calibrating") says why each rule is so.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mpi4py import MPI

from ..api import allreduce
from ..bench.measure import page_array, page_copy
from ..bench.timing import barrier, order_seed, shuffled
from ..choose import CLOSE_FACTOR, candidates
from ..reducer import Reducer
from ..schedule import ALGORITHMS, NATIVE, build_schedule
from ..units import format_size
from .race import (
    CONTEND_FLOOR,
    CONTEND_ROUNDS,
    CONTEND_TIME,
    narrowed,
    race_basis,
    race_groups,
    table_groups,
    to_confirm,
)

__all__ = ["Series", "series_for", "Measured", "beaten", "timed_round", "measure", "measure_gamma", "say",
           "DEFAULT_ITERS", "DEFAULT_WARMUP", "DEFAULT_POINT_TIME", "DEFAULT_DROP", "DEFAULT_DROP_FROM",
           "DEFAULT_SETTLE", "SETTLE_FROM", "ITEMSIZE"]

DEFAULT_ITERS = 40
DEFAULT_WARMUP = 1
DEFAULT_POINT_TIME = 1.0
DEFAULT_DROP = 3.0
DEFAULT_DROP_FROM = 64 << 10
GROWING = 0.8
"""A candidate is dropped only where its time grows at least like ``size^GROWING`` (see :func:`beaten`) ..."""
DROP_PLAIN_FROM = 1 << 20
"""... below this size; from here on, ``--drop`` times slower at two sizes in a row is enough: past any
latency floor, a gap that wide does not close (188 stored calibrations: of 252 such candidates the closest
any came to the fastest at a larger size was 1.37x; swing-lat on 16 ranks at 16 MiB, kept by the closing rule
at 6.5x then 4.0x: 11 s a call, a fifth of a 56 s calibration)."""
DEFAULT_SETTLE = 2
SETTLE_FROM = 16 << 10
"""From this size on, each timed call follows ``--settle`` untimed calls of the same candidate."""
MAX_WORK_BYTES = 1 << 30
"""A candidate whose work buffer (swing-lat's contributions form: ``p`` vectors) would pass this is not run."""
ITEMSIZE = 8
OWN_ARRAYS_UP_TO = 1 << 20
"""Up to this size every candidate gets its own arrays, so repeated calls take the API's repeat path as a
program's would (it is keyed by the arrays); larger ones share, to save memory where the path costs nothing.
Every array starts pages of its own, as in the bench (:func:`swing_mpi.bench.measure.page_array`): the
allocator's placement alone moved one candidate's time by up to 25 %, in favour of the ones set up first."""



@dataclass(frozen=True)
class Series:
    """One measured curve: an algorithm on a dtype with SUM."""

    name: str
    algorithm: str
    dtype: str
    exact: bool


def series_for(dims: tuple[int, ...], *, native: bool = True, exact: bool = True,
               algorithms: Sequence[str] | None = None) -> list[Series]:
    """Every candidate on float64 SUM, plus int64 SUM for algorithms whose schedule depends on exactness."""
    cands = [a for a in candidates(dims, exact=False, commutative=True, native_ok=native)
             if algorithms is None or a in algorithms]
    out = [Series(f"{a}/float64", a, "float64", False) for a in cands]
    if exact:
        valid = candidates(dims, exact=True, commutative=True, native_ok=False)
        out += [Series(f"{a}/int64", a, "int64", True) for a in cands
                if a != NATIVE and ALGORITHMS[a].uses_exact and a in valid]
    return out


def say(comm: Any, msg: str) -> None:
    """Print ``msg`` on rank 0's stderr (progress)."""
    if comm.Get_rank() == 0:
        print(msg, file=sys.stderr, flush=True)


@dataclass
class Measured:
    """Medians (seconds, max over ranks per call) of every series at every size; ``None``: not measured."""

    sizes: list[int]
    series: list[Series]
    medians: dict[str, list[float | None]]
    rounds: dict[str, list[list[float]]]
    """All rounds' times per series and size (for held-out checks)."""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _work_bytes(s: Series, dims: tuple[int, ...], count: int) -> int:
    if s.algorithm == NATIVE:
        return count * ITEMSIZE
    return build_schedule(s.algorithm, dims, 0, count, exact=s.exact).slots * count * ITEMSIZE


def beaten(before: tuple[float, float, int] | None, now: tuple[float, float, int], *,
           drop: float = DEFAULT_DROP, drop_from: int = DEFAULT_DROP_FROM) -> bool:
    """Tell whether to stop measuring a candidate at larger sizes.

    ``before`` and ``now`` are its ``(time / fastest time, time, size)`` at
    the previous and this size. True when it is at least ``drop`` times
    slower at both, the gap is not closing, this size is at least
    ``drop_from`` and its own time grew nearly in proportion to the size
    (by ``(size ratio)^``:data:`GROWING`): past its latency floor, where a
    widening gap keeps widening. Below that, a gap may be a per-step cost that
    larger vectors amortize (four lanes of short messages on shared memory).
    From :data:`DROP_PLAIN_FROM` on (the previous size), ``drop`` times slower at
    both sizes is enough.
    """
    if before is None:
        return False
    (r0, t0, n0), (r1, t1, n1) = before, now
    if not (n1 >= drop_from and n1 > n0 and r0 >= drop and r1 >= drop):
        return False
    return n0 >= DROP_PLAIN_FROM or (r1 >= r0 and t1 >= t0 * (n1 / n0) ** GROWING)


def timed_round(comm: Any, calls: Sequence[Any], which: Sequence[int], samples: list[list[float]],
           settle: Sequence[int]) -> float:
    """Time one call of each of ``calls[which]`` (barrier before each, max over ranks); return the time spent.

    The barrier is the bench's (:func:`swing_mpi.bench.timing.barrier`): with ``SWING_MPI_WAIT=backoff``
    (the lab) a nonblocking one waited on sleeping, so candidates are timed as the bench times them.

    ``settle`` (one number per call): untimed calls of the same candidate, each from a barrier,
    just before its timed one (their time counts in the time spent), so the timed
    call finds what its own traffic leaves behind, as in a program that calls it
    repeatedly, not what the previous candidate left (a drained or a refilled link
    queue).
    """
    mine = np.zeros(2 * len(which))
    for i, j in enumerate(which):
        t0 = time.perf_counter()
        for _ in range(settle[j]):
            barrier(comm)
            calls[j]()
        mine[len(which) + i] = time.perf_counter() - t0
        barrier(comm)
        t0 = time.perf_counter()
        calls[j]()
        mine[i] = time.perf_counter() - t0
    comm.Allreduce(MPI.IN_PLACE, mine, op=MPI.MAX)
    for i, j in enumerate(which):
        samples[j].append(float(mine[i]))
    return float(mine.sum())


def measure(comm: Any, sizes: Sequence[int], series: Sequence[Series], *, dims: tuple[int, ...],
            iters: int = DEFAULT_ITERS, warmup: int = DEFAULT_WARMUP, point_time: float = DEFAULT_POINT_TIME,
            drop: float = DEFAULT_DROP, drop_from: int = DEFAULT_DROP_FROM, settle: int = 0,
            contend_time: float = CONTEND_TIME, contend_floor: float = CONTEND_FLOOR,
            progress: bool = True) -> Measured:
    """Time every live series at every size (collective; the same result on every rank)."""
    t_start = time.perf_counter()
    rank = comm.Get_rank()
    seed = order_seed(comm)  # orders of its own for each calibration, the same on every rank
    sizes = sorted({max(ITEMSIZE, int(n) // ITEMSIZE * ITEMSIZE) for n in sizes})
    m = Measured(sizes, list(series), {s.name: [] for s in series}, {s.name: [] for s in series})
    live = list(series)
    behind: dict[str, tuple[float, float, int]] = {}
    last_round = 0.0
    for n in sizes:
        count = n // ITEMSIZE
        run = []
        for s in live:
            if _work_bytes(s, dims, count) > MAX_WORK_BYTES:
                m.notes.append(f"{s.name}: not run from {format_size(n)} (work buffer over "
                               f"{format_size(MAX_WORK_BYTES)})")
                continue
            run.append(s)
        rng = np.random.default_rng([12345, rank, count])
        bufs = {"float64": rng.uniform(0.5, 1.5, count), "int64": rng.integers(0, 1 << 20, count).astype(np.int64)}
        # every measured array on pages of its own, placed alike whatever was allocated before (page_array)
        pair = lambda a: (page_copy(a), page_array(len(a), a.dtype))  # noqa: E731
        if n <= OWN_ARRAYS_UP_TO:  # each candidate its own arrays: every call takes the API's repeat path
            arrays = [pair(bufs[s.dtype]) for s in run]
        else:
            shared = {k: pair(v) for k, v in bufs.items()}
            arrays = [shared[s.dtype] for s in run]
        calls = [lambda s=s, src=src, dst=dst: allreduce(comm, src, dst, MPI.SUM, algorithm=s.algorithm, dims=dims)
                 for s, (src, dst) in zip(run, arrays)]
        # warm up (first call: plan, connections) unless a round of the previous size already took over half
        # the time cap: there a call's own cost dwarfs its first-call extra, and a warm-up round would double it
        for _ in range(max(0, warmup) if last_round < point_time / 2 else 0):
            for c in calls:
                c()
        samples: list[list[float]] = [[] for _ in run]
        spent, rounds = 0.0, 0
        # settling calls make the contenders' times true; a candidate already --drop times slower than the
        # fastest at the last size gets none (swing-lat at 16 MiB on 16 ranks: 2.3 s a call, 4.5 s saved)
        settle_here = [settle if n >= SETTLE_FROM and (s.name not in behind or behind[s.name][0] < drop) else 0
                       for s in run]
        orders = shuffled(len(run), seed=seed + count)  # a new order each round, the same on every rank
        while rounds < max(1, iters) and (not rounds or spent < point_time):
            spent += timed_round(comm, calls, next(orders), samples, settle_here)
            rounds += 1
        last_round = spent / max(1, rounds)
        # the few within CLOSE_FACTOR of the fastest get more rounds of their own where the time cap left
        # them few: the pick among them is what matters, and a round of two or three is cheap
        # (per decision table: an exact-only leader must not hide the float64 table's close race)
        groups = table_groups(run)
        again = to_confirm(groups, samples)
        if again:  # a candidate's one slow call must not keep it out of the race (CONFIRM_WITHIN)
            timed_round(comm, calls, random.Random(seed + count + 2).sample(again, len(again)), samples, settle_here)
        races = race_groups(groups, race_basis(samples))
        n_close = len({j for r in races for j in r})
        extra = 0.0
        want = min(CONTEND_ROUNDS, iters)
        cap = max(contend_time * point_time, contend_floor)
        pick = random.Random(seed + count + 1)  # the same orders on every rank (samples are max over ranks: equal too)
        while extra < cap:
            close = sorted({j for r in races if len(r) > 1 and min(len(samples[j]) for j in r) < want for j in r})
            if not close:
                break
            extra += timed_round(comm, calls, pick.sample(close, len(close)), samples, settle_here)
            races = [narrowed(r, samples) for r in races]
        close = sorted({j for r in races for j in r})  # the same count as n_close: every table's race, at its end
        most = max(len(x) for x in samples) if samples else rounds  # before any call confirming a drop below
        meds = {s.name: float(np.median(samples[j])) for j, s in enumerate(run)}
        best = min(meds.values()) if meds else math.inf
        dropped = []
        for j, s in enumerate(run):
            now = (meds[s.name] / best, meds[s.name], n)
            if n < sizes[-1] and beaten(behind.get(s.name), now, drop=drop, drop_from=drop_from):
                # giving up on a candidate for every larger size rests on two calls at least, and on its best
                # one: in the 8x8 lab one call of bucket at 256 KiB took 1.5 s (0.5 s as a rule) and dropped
                # it, at 3.2x the fastest, from the sizes where it is the fastest (16 MiB)
                if len(samples[j]) < 2:
                    timed_round(comm, calls, [j], samples, settle_here)
                    meds[s.name] = float(np.median(samples[j]))
                low = min(samples[j])
                if beaten(behind.get(s.name), (low / best, low, n), drop=drop, drop_from=drop_from):
                    dropped.append(s)
                now = (meds[s.name] / best, meds[s.name], n)
            behind[s.name] = now
        for s in series:
            m.medians[s.name].append(meds.get(s.name))
            m.rounds[s.name].append(list(samples[run.index(s)]) if s in run else [])
        live = [s for s in run if s not in dropped]
        if progress:
            fastest = min(meds, key=lambda k: meds[k]) if meds else "-"
            more = f" (+{most - rounds} of {n_close} within {CLOSE_FACTOR - 1:.0%}" \
                   f"{f', {len(close)} to the end' if len(close) < n_close else ''})" if most > rounds else ""
            say(comm, f"calibrate: {format_size(n):>9}: {len(run)} candidates x {rounds} rounds{more}, fastest "
                       f"{fastest} {best * 1e6:.1f} us" + (f"; stop measuring {', '.join(s.name for s in dropped)}"
                                                          if dropped else "")
                       + f" [{time.perf_counter() - t_start:.1f} s]")
        del calls, bufs, arrays
    m.seconds = time.perf_counter() - t_start
    return m


def measure_gamma(comm: Any, nbytes: int = 4 << 20, *, iters: int = 9) -> float:
    """Return seconds per byte of our float64 SUM kernel, all ranks reducing at once (max over ranks).

    Collective. Times :class:`swing_mpi.reducer.Reducer` (the kernel the
    executor runs) on ``nbytes`` while every rank does the same, so shared
    cores and memory bandwidth count as they do during an allreduce.
    """
    count = max(1, int(nbytes) // ITEMSIZE)
    red = Reducer(MPI.SUM, MPI.DOUBLE)
    rng = np.random.default_rng([7, comm.Get_rank()])
    a = rng.uniform(0.5, 1.5, count).view(np.uint8)
    b = rng.uniform(0.5, 1.5, count).view(np.uint8)
    reps = 4
    ts = []
    for i in range(max(1, iters) + 1):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            red(a, b, True)
        if i:
            ts.append((time.perf_counter() - t0) / reps)
    mine = sorted(ts)[len(ts) // 2] / (count * ITEMSIZE)
    return float(comm.allreduce(mine, op=MPI.MAX))
