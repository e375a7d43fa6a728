"""``swing-mpi calibrate``: measure every candidate here and write the tuning file ``auto`` reads.

Run under mpiexec on the machines, ranks and torus shape you care about::

    mpiexec -n 16 python -m mpi4py -m swing_mpi calibrate --dims 4x4     # writes ~/.config/swing_mpi/tuning.json
    mpiexec -n 4 python -m mpi4py -m swing_mpi calibrate --dry-run

Measurement:
    The candidates are every registered algorithm that runs on the torus
    (:func:`swing_mpi.choose.candidates`) and ``native`` (``MPI_Allreduce``
    through our ``allreduce``, as ``auto`` calls it), on float64 SUM; the
    algorithms whose schedule depends on the op being exact (``swing-lat``)
    are also measured on int64 SUM. Sizes go from small to large. At each
    size, rounds time one call of every live candidate (interleaved, so a
    burst of machine noise spreads over all of them, in a new random order each
    round, the same on every rank, so that no candidate always follows the same
    one: a light call timed after a long one runs slower); from 16 KiB
    on each timed call follows ``--settle`` (2) untimed calls of the same
    candidate (none for a candidate already ``--drop`` times slower than the
    fastest at the size before: its settled time cannot change the pick, and
    its calls are the longest), so it is timed in the state its own traffic leaves (a program
    calls the same allreduce repeatedly), not in what the previous candidate
    left: over rate-limited links with a burst allowance a call right after
    a lighter one can run far faster than in a steady stream (3x4 lab, 1 MiB:
    swing-bw 78 ms interleaved, 97 ms after one settling call, 113 ms after
    two, 111 ms back to back); each call, settling ones too, starts from a
    barrier, as the bench times calls (settling calls back to back, which
    presumably leaves the ranks skewed, slowed the timed call after them on
    Open MPI with 16 ranks at 16 MiB: ours 78 -> 88 ms, ``MPI_Allreduce``'s
    85 -> 87 ms, and auto
    kept ``MPI_Allreduce`` where the bench timed ours 10 % faster); a timed
    call's time is the maximum over ranks; the median over the
    rounds is kept. Rounds stop after ``--iters``, or once the size has used
    ``--point-time`` seconds (at least one round). Where that left few rounds
    (slow links, large sizes), the candidates within 25 % of the fastest of their decision table
    (float64, or int64 for the exact ops: :func:`table_groups`) get
    rounds of their own, up to 7 samples each or three times ``--point-time`` more
    (at least 8 s): the pick among close contenders is what a noisy median gets
    wrong. A candidate timed once there within 2x of the fastest gets a second
    call first, and until it has three calls its best one decides whether it is
    within the 25 % (:func:`to_confirm`, :func:`race_basis`): one slow call must
    not keep the fastest out of the race. After each such round a contender whose every sample (three or more) is
    slower than the leader's median drops out (:func:`narrowed`), so the two or
    three that matter share the time left. ``--warmup`` untimed calls
    per candidate come first, except after a size whose rounds took over half
    of ``--point-time`` each (there a warm-up would double the time). From
    ``--drop-from`` on, a candidate at least ``--drop`` times slower than the
    fastest at two sizes in a row, falling further behind, and past its latency floor (its
    time grows nearly in proportion to the size) is not measured at larger
    sizes: it only loses more there (:func:`beaten`). That keeps a
    calibration over slow links to minutes.

Decision table:
    The medians, per (p, dims, op class), are the table ``auto`` decides
    from for calls like them (:class:`swing_mpi.tuning.DecisionTable`,
    interpolated between sizes). The exact class reuses the float64 times
    of algorithms whose schedule does not depend on exactness.

Model:
    For calls the table does not cover (another p or shape), ``auto`` prices
    our schedules with ``T = K·α + n·(moved·β + reduced·γ)``
    (:mod:`swing_mpi.model.features`). γ is measured apart (the executor's
    reduction kernel, all ranks at once); α, β and a per-call constant are
    fitted to every measured point of our algorithms by non-negative least
    squares on relative errors, once per network kind. The kind whose fit is
    better (``flat``: a rank's own traffic is the bottleneck; ``torus``:
    routed link sharing) is written to the file; ``$SWING_MPI_NETWORK``
    forces it. ``native_below_bytes`` (where the model hands vectors to
    ``MPI_Allreduce``) is the size step that agrees best with where native
    was at least ``--native-margin`` faster than all of ours.

Progress goes to stderr, the report to stdout (rank 0): the measured
medians, auto / fastest on held-out rounds (the pick from the even rounds,
timed on the odd ones) and the model's pick / fastest at every point, the
fit, and the decision table.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import platform
import random
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .choose import candidates
from .model.features import NETWORKS
from .model.fit import Fit, fit_constants, nnls
from .schedule import ALGORITHMS, NATIVE, build_schedule
from .tuning import TUNING_ENV, DecisionTable, Tuning, default_tuning_path, network_override, save_tuning
from .units import format_size, parse_size, parse_sizes

__all__ = [
    "add_arguments", "run", "main", "Series", "beaten", "series_for", "Measured", "measure", "measure_gamma", "fit",
    "Fit", "narrowed", "table_groups", "contenders", "race_basis", "to_confirm", "native_threshold", "tables_from",
    "calibrate", "report",
    "nnls", "DEFAULT_SIZES",
]

DEFAULT_SIZES = "8,64,256,1K,4K,16K,64K,256K,1M,4M,16M"
DEFAULT_ITERS = 40
DEFAULT_WARMUP = 1
DEFAULT_POINT_TIME = 1.0
DEFAULT_DROP = 3.0
DEFAULT_DROP_FROM = 64 << 10
DEFAULT_NATIVE_MARGIN = 0.10
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
CONTEND_MARGIN = 0.25
"""Candidates this close to the fastest at a size are its contenders."""
CONTEND_ROUNDS = 7
"""Contenders get rounds of their own until each has this many samples ..."""
CONTEND_TIME = 3.0
"""... or these rounds have taken this many times ``--point-time`` ..."""
CONFIRM_WITHIN = 2.0
"""A candidate timed once at a size, within this factor of its table's fastest but not within
``CONTEND_MARGIN``, gets a second call before the races are drawn, and with fewer than three calls its
best one decides whether it races: one slow call must not keep it out (shared memory, Open MPI, 16 ranks,
16 MiB: swing-bw-1port took 150 ms in its one round, native 77 ms; head to head swing-bw-1port was the
faster, 1.11-1.17x, in three launches of three)."""
CONTEND_FLOOR = 8.0
"""... or this many seconds, if more: on shared memory (``--point-time`` 1 s) a round of six contenders at
16 MiB on 16 ranks takes 1.6 s with its settling calls, and three samples each ordered two candidates
that a launch of 15 calls each orders the other way (4 launches out of 4)."""
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


def _say(comm: Any, msg: str) -> None:
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


def narrowed(close: Sequence[int], samples: Sequence[Sequence[float]], *, least: int = 3) -> list[int]:
    """Return the contenders still worth rounds: drop each whose every sample is slower than the leader's median.

    ``close``: indices into ``samples`` (each candidate's times so far). The
    leader is the one with the smallest median; a candidate is judged only
    once it has ``least`` samples (three slower samples in a row happen to an
    equal one in one case of eight). The leader's rivals then share the time
    left, so the pick among the two or three that matter gets their samples.
    """
    import statistics

    if len(close) < 2:
        return list(close)
    lead = min(close, key=lambda j: statistics.median(samples[j]))
    bar = statistics.median(samples[lead])
    return [j for j in close if j == lead or len(samples[j]) < least or min(samples[j]) <= bar]


def race_basis(samples: Sequence[Sequence[float]]) -> list[float]:
    """Return the time each candidate races on: its median from three calls on, its best call before."""
    import statistics

    return [statistics.median(x) if len(x) >= 3 else min(x, default=math.inf) for x in samples]


def to_confirm(groups: Sequence[Sequence[int]], samples: Sequence[Sequence[float]], *,
               margin: float = CONTEND_MARGIN, within: float = CONFIRM_WITHIN) -> list[int]:
    """Return the candidates to time once more before the races (:data:`CONFIRM_WITHIN`).

    Those timed once, outside ``margin`` of their table's fastest but within ``within`` times it.
    """
    basis = race_basis(samples)
    out: set[int] = set()
    for g in groups:
        if not g:
            continue
        lead = min(basis[j] for j in g)
        out |= {j for j in g if len(samples[j]) == 1 and lead * (1 + margin) < basis[j] <= lead * within}
    return sorted(out)


def table_groups(run: Sequence[Series]) -> list[list[int]]:
    """Return, for each decision table :func:`tables_from` builds, the indices into ``run`` of its candidates.

    The inexact table holds every float64 series; the exact table every int64 series plus the float64
    series of the algorithms that have none (their schedule does not depend on exactness), so a series may
    be in both. Contenders are judged within a table: an exact-only leader (swing-lat's reduced form on
    int64) must not hide the close race among the float64 ones.
    """
    inexact = [j for j, s in enumerate(run) if not s.exact]
    exact_algs = {s.algorithm for s in run if s.exact}
    if not exact_algs:
        return [inexact] if inexact else []
    exact = [j for j, s in enumerate(run) if s.exact or s.algorithm not in exact_algs]
    return [g for g in (inexact, exact) if g]


def contenders(groups: Sequence[Sequence[int]], first: Sequence[float], *,
               margin: float = CONTEND_MARGIN) -> list[list[int]]:
    """Return each table's candidates within ``margin`` of that table's fastest (``first``: their medians)."""
    out = []
    for g in groups:
        lead = min(first[j] for j in g)
        out.append([j for j in g if first[j] <= lead * (1 + margin)])
    return out


def _round(comm: Any, calls: Sequence[Any], which: Sequence[int], samples: list[list[float]],
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
    import numpy as np
    from mpi4py import MPI

    from .bench.timing import barrier

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
    import numpy as np
    from mpi4py import MPI

    from .api import allreduce
    from .bench.measure import page_array, page_copy
    from .bench.timing import order_seed, shuffled

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
            spent += _round(comm, calls, next(orders), samples, settle_here)
            rounds += 1
        last_round = spent / max(1, rounds)
        # the few within CONTEND_MARGIN of the fastest get more rounds of their own where the time cap left
        # them few: the pick among them is what matters, and a round of two or three is cheap
        # (per decision table: an exact-only leader must not hide the float64 table's close race)
        groups = table_groups(run)
        again = to_confirm(groups, samples)
        if again:  # a candidate's one slow call must not keep it out of the race (CONFIRM_WITHIN)
            _round(comm, calls, random.Random(seed + count + 2).sample(again, len(again)), samples, settle_here)
        races = contenders(groups, race_basis(samples))
        n_close = len({j for r in races for j in r})
        extra = 0.0
        want = min(CONTEND_ROUNDS, iters)
        cap = max(contend_time * point_time, contend_floor)
        pick = random.Random(seed + count + 1)  # the same orders on every rank (samples are max over ranks: equal too)
        while extra < cap:
            close = sorted({j for r in races if len(r) > 1 and min(len(samples[j]) for j in r) < want for j in r})
            if not close:
                break
            extra += _round(comm, calls, pick.sample(close, len(close)), samples, settle_here)
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
                    _round(comm, calls, [j], samples, settle_here)
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
            more = f" (+{most - rounds} of {n_close} within {CONTEND_MARGIN:.0%}" \
                   f"{f', {len(close)} to the end' if len(close) < n_close else ''})" if most > rounds else ""
            _say(comm, f"calibrate: {format_size(n):>9}: {len(run)} candidates x {rounds} rounds{more}, fastest "
                       f"{fastest} {best * 1e6:.1f} us" + (f"; stop measuring {', '.join(s.name for s in dropped)}"
                                                          if dropped else "")
                       + f" [{time.perf_counter() - t_start:.1f} s]")
        del calls, bufs, arrays
    m.seconds = time.perf_counter() - t_start
    return m


def tables_from(m: Measured, *, p: int, dims: tuple[int, ...]) -> list[DecisionTable]:
    """Build the decision tables of a measurement: float64 SUM (inexact) and int64 SUM (exact)."""
    out = []
    for exact, dtype in ((False, "float64"), (True, "int64")):
        times: dict[str, tuple[float | None, ...]] = {}
        for s in m.series:
            if not s.exact:
                times.setdefault(s.algorithm, tuple(m.medians[s.name]))
        if exact:
            mine = [s for s in m.series if s.exact]
            if not mine:
                continue
            for s in mine:
                times[s.algorithm] = tuple(m.medians[s.name])
        times = {a: ts for a, ts in times.items() if any(t is not None for t in ts)}
        if times:
            out.append(DecisionTable(p=p, dims=dims, exact=exact, sizes=tuple(m.sizes), times=tuple(times.items()),
                                     dtype=dtype, op="sum"))
    return out


# -- fitting ------------------------------------------------------------------------------

def fit(m: Measured, dims: tuple[int, ...], *, gamma: float, network: str | None = None) -> Fit:
    """Fit α, β and a per-call constant to our algorithms' medians, for each network kind."""
    return fit_constants([(s.algorithm, s.exact, n, t) for s in m.series if s.algorithm != NATIVE
                          for n, t in zip(m.sizes, m.medians[s.name]) if t is not None], dims,
                         gamma=gamma, network=network)


def measure_gamma(comm: Any, nbytes: int = 4 << 20, *, iters: int = 9) -> float:
    """Return seconds per byte of our float64 SUM kernel, all ranks reducing at once (max over ranks).

    Collective. Times :class:`swing_mpi.executor.Reducer` (the kernel the
    executor runs) on ``nbytes`` while every rank does the same, so shared
    cores and memory bandwidth count as they do during an allreduce.
    """
    import numpy as np
    from mpi4py import MPI

    from .executor import Reducer

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


def native_threshold(m: Measured, *, margin: float = DEFAULT_NATIVE_MARGIN) -> int | None:
    """Return below which size the model should hand vectors to ``native``, or ``None``.

    At each size ``native`` wins if its float64 median is at least ``margin``
    below the best of ours. The threshold is the step that agrees with the
    most sizes (native below it, ours from it on); ties go to the smaller.
    """
    nat = m.medians.get(f"{NATIVE}/float64")
    if not nat:
        return None
    sizes, wins = [], []
    for i, n in enumerate(m.sizes):
        ours = [m.medians[s.name][i] for s in m.series if s.algorithm != NATIVE and not s.exact]
        ours_t = [t for t in ours if t is not None]
        t_nat = nat[i]
        if t_nat is not None and ours_t:
            sizes.append(n)
            wins.append(t_nat <= (1.0 - margin) * min(ours_t))
    best_i, best_err = 0, len(sizes) + 1
    for i in range(len(sizes) + 1):
        err = sum(1 for w in wins[:i] if not w) + sum(1 for w in wins[i:] if w)
        if err < best_err:
            best_i, best_err = i, err
    if best_i == 0:
        return None
    return sizes[best_i] if best_i < len(sizes) else sizes[-1] + 1


# -- the command ------------------------------------------------------------------------

def calibrate(comm: Any, *, sizes: Sequence[int], dims: tuple[int, ...], iters: int = DEFAULT_ITERS,
              warmup: int = DEFAULT_WARMUP, point_time: float = DEFAULT_POINT_TIME, drop: float = DEFAULT_DROP,
              drop_from: int = DEFAULT_DROP_FROM, native: bool = True, exact: bool = True,
              margin: float = DEFAULT_NATIVE_MARGIN, algorithms: Sequence[str] | None = None,
              settle: int = DEFAULT_SETTLE, progress: bool = True) -> tuple[Tuning, Fit, Measured]:
    """Measure, build the tables, fit the model; return ``(Tuning, Fit, Measured)``, equal on every rank."""
    p = comm.Get_size()
    forced = network_override()
    series = series_for(dims, native=native, exact=exact, algorithms=algorithms)
    if not [s for s in series if s.algorithm != NATIVE]:
        raise ValueError("no algorithm of ours to measure")
    m = measure(comm, sizes, series, dims=dims, iters=iters, warmup=warmup, point_time=point_time, drop=drop,
                drop_from=drop_from, settle=settle, progress=progress)
    gamma = measure_gamma(comm, min(max(max(m.sizes), 64 << 10), 4 << 20))
    f = fit(m, dims, gamma=gamma, network=forced)
    below = native_threshold(m, margin=margin) if native else None
    source = (f"swing-mpi calibrate on {socket.gethostname()}, p={p}, dims {'x'.join(map(str, dims))}, "
              f"{_dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    tuning = Tuning(f.alpha, f.beta, f.gamma, below, f.network, tuple(tables_from(m, p=p, dims=dims)), source)
    return tuning, f, m


def _class_series(m: Measured, exact: bool) -> dict[str, Series]:
    """Algorithm -> the series its times come from, for one op class (as :func:`tables_from` builds it)."""
    out = {s.algorithm: s for s in m.series if not s.exact}
    if exact:
        out.update({s.algorithm: s for s in m.series if s.exact})
    return out


def _held_out(rounds: dict[str, list[float]]) -> float | None:
    """Return auto / fastest when the pick is made on the even rounds and timed on the odd ones."""
    import numpy as np

    usable = {k: v for k, v in rounds.items() if len(v) >= 2}
    if not usable:
        return None
    even = {k: float(np.median(v[0::2])) for k, v in usable.items()}
    odd = {k: float(np.median(v[1::2])) for k, v in usable.items()}
    pick = min(even, key=lambda k: even[k])
    return odd[pick] / min(odd.values())


def report(tuning: Tuning, f: Fit, m: Measured, *, p: int, dims: tuple[int, ...]) -> str:
    """Return the calibration report: medians, auto / fastest per point, the fit and the decision table."""
    from dataclasses import replace

    from .choose import choose

    shape = "x".join(map(str, dims))
    model_only = replace(tuning, tables=())
    lines = [f"# swing-mpi calibrate: p={p}, dims {shape}, {len(m.sizes)} sizes, {len(m.series)} series, "
             f"measured in {m.seconds:.1f} s"]
    has_exact = any(s.exact for s in m.series)
    for exact in ((False, True) if has_exact else (False,)):
        by_alg = _class_series(m, exact)
        algs = list(by_alg)
        lines += ["", f"## {'int64 SUM (exact ops)' if exact else 'float64 SUM (inexact ops)'}: median us "
                      "(max over ranks per call); '-' not measured (clearly beaten at smaller sizes)",
                  "## auto/fastest: pick from the even rounds, timed on the odd rounds (held out); "
                  "model: what the model alone would pick there"]
        head = f"| {'size':>9} | " + " | ".join(f"{a:>10}" for a in algs) + \
            f" | {'fastest':<16} | {'auto/fastest':>12} | {'model':<16} | {'model/fastest':>13} |"
        lines += [head, "|" + "|".join("-" * (len(c) + 0) for c in head.split("|")[1:-1]) + "|"]
        for i, n in enumerate(m.sizes):
            meds = {a: m.medians[s.name][i] for a, s in by_alg.items()}
            got = {a: t for a, t in meds.items() if t is not None}
            cells = [f"{got[a] * 1e6:>10.1f}" if a in got else f"{'-':>10}" for a in algs]
            if not got:
                continue
            fastest = min(got, key=lambda a: got[a])
            ho = _held_out({a: m.rounds[s.name][i] for a, s in by_alg.items() if meds[a] is not None})
            mp = choose(p, dims, n // ITEMSIZE, ITEMSIZE, exact=exact, commutative=True, tuning=model_only)
            mr = f"{got[mp] / got[fastest]:>13.2f}" if mp in got else f"{'(not run)':>13}"
            lines.append(f"| {format_size(n):>9} | " + " | ".join(cells)
                         + f" | {fastest:<16} | {(f'{ho:.2f}' if ho is not None else 'n/a'):>12} | {mp:<16} | {mr} |")
    lines += ["", "# model for calls no table covers: T = per call + K*alpha + n*(moved*beta + reduced*gamma)",
              f"gamma = {f.gamma * 1e9:.4f} ns per reduced byte (reduction kernel, all ranks at once)"]
    for net in NETWORKS:
        a, b, c0 = f.constants[net]
        lines.append(f"{net:>5}: alpha = {a * 1e6:.2f} us, beta = {b * 1e9:.4f} ns/B, per call {c0 * 1e6:.1f} us, "
                     f"rms relative error {f.rms[net] * 100:.1f} %, its picks {math.exp(f.regret.get(net, 0.0)):.2f}x "
                     f"the fastest (geometric mean)" + ("  <- kept" if net == f.network else ""))
    lines.append(f"network: {f.network} " + ("(forced by $SWING_MPI_NETWORK)" if f.forced else
                                              "(its model picks best)"))
    nb = tuning.native_below_bytes
    lines.append("native_below_bytes = " + ("none" if nb is None else f"{nb} (model: MPI_Allreduce below "
                                                                     f"{format_size(nb)})"))
    lines += ["", f"# decision table: what auto runs on p={p}, dims {shape} with this tuning"]
    grid = [8 << i for i in range(24)]  # 8 B … 64 MiB
    for exact in ((False, True) if has_exact else (False,)):
        runs: list[tuple[int, int, str]] = []
        for n in grid:
            pick = choose(p, dims, n // ITEMSIZE, ITEMSIZE, exact=exact, commutative=True, tuning=tuning)
            if runs and runs[-1][2] == pick:
                runs[-1] = (runs[-1][0], n, pick)
            else:
                runs.append((n, n, pick))
        lines.append(f"{'int64 SUM' if exact else 'float64 SUM'}: " + ", ".join(
            f"{format_size(lo)}" + (f"-{format_size(hi)}" if hi != lo else "") + f" {a}" for lo, hi, a in runs))
    lines += [f"note: {x}" for x in m.notes]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add calibrate's options to ``parser``."""
    parser.add_argument("--sizes", "-m", default=DEFAULT_SIZES,
                        help=f"vector bytes: a list, MIN:MAX (powers of two) or MIN:MAX:F (default {DEFAULT_SIZES})")
    parser.add_argument("--iters", "-i", type=int, default=DEFAULT_ITERS,
                        help=f"most timed rounds per size ({DEFAULT_ITERS})")
    parser.add_argument("--point-time", type=float, default=DEFAULT_POINT_TIME,
                        help=f"seconds of timed calls per size before its rounds stop; at least one round "
                             f"(default {DEFAULT_POINT_TIME})")
    parser.add_argument("--drop", type=float, default=DEFAULT_DROP,
                        help="stop measuring a candidate this many times slower than the fastest at two sizes "
                             f"in a row and falling behind (default {DEFAULT_DROP})")
    parser.add_argument("--drop-from", default=format_size(DEFAULT_DROP_FROM),
                        help=f"never stop measuring a candidate below this size (default "
                             f"{format_size(DEFAULT_DROP_FROM)})")
    parser.add_argument("--settle", type=int, default=DEFAULT_SETTLE,
                        help=f"from {format_size(SETTLE_FROM)} on, untimed calls of a candidate just before each "
                             f"of its timed ones, each from a barrier: it is timed in the state its own calls "
                             f"leave, as in a program that calls it repeatedly (default {DEFAULT_SETTLE}; 0: "
                             f"timed right after another candidate)")
    parser.add_argument("--warmup", "-x", type=int, default=DEFAULT_WARMUP,
                        help=f"untimed calls per candidate and size ({DEFAULT_WARMUP})")
    parser.add_argument("--dims", default=None,
                        help="torus dims (default $SWING_MPI_DIMS, the communicator's Cartesian topology, or a ring)")
    parser.add_argument("--algorithms", "-a", default=None,
                        help="comma list of our algorithms to measure (default: every one valid on the torus)")
    parser.add_argument("--output", "-o", default=None,
                        help="tuning file to write (default $SWING_MPI_TUNING if set, else "
                             "~/.config/swing_mpi/tuning.json)")
    parser.add_argument("--dry-run", action="store_true", help="measure and report; write nothing")
    parser.add_argument("--no-native", action="store_true",
                        help="do not measure MPI_Allreduce; auto never hands vectors to it")
    parser.add_argument("--no-exact", action="store_true",
                        help="measure float64 SUM only (no int64 table for exact ops)")
    parser.add_argument("--native-margin", type=float, default=DEFAULT_NATIVE_MARGIN,
                        help="for the model: native must be this fraction faster than ours to get a size (0.1)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _output_path(args: argparse.Namespace) -> Path:
    if args.output:
        return Path(args.output)
    env = os.environ.get(TUNING_ENV, "").strip()
    if env and env.lower() not in ("default", "defaults"):
        return Path(env).expanduser()
    return default_tuning_path()


def run(args: argparse.Namespace) -> int:
    """Run ``swing-mpi calibrate`` on ``MPI.COMM_WORLD`` (collective)."""
    from mpi4py import MPI

    from .bench.measure import library_version
    from .state import dims_for
    from .topology import parse_dims

    comm = MPI.COMM_WORLD
    p, rank = comm.Get_size(), comm.Get_rank()
    t0 = time.perf_counter()
    try:
        sizes = parse_sizes(args.sizes)
        drop_from = parse_size(args.drop_from)
        if args.iters < 1:
            raise ValueError("--iters must be at least 1")
        if not 0 <= args.native_margin < 1:
            raise ValueError("--native-margin must be in [0, 1)")
        if args.settle < 0:
            raise ValueError("--settle must be 0 or more")
        if args.drop <= 1 or args.point_time <= 0:
            raise ValueError("--drop must be above 1 and --point-time above 0")
        dims = tuple(parse_dims(args.dims, p)) if args.dims else tuple(dims_for(comm, None))
        algorithms = None
        if args.algorithms:
            algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
            unknown = [a for a in algorithms if a not in ALGORITHMS and a != NATIVE]
            if unknown:
                raise ValueError(f"unknown algorithm(s) {', '.join(unknown)}; known: {', '.join(ALGORITHMS)}")
            algorithms.append(NATIVE)
        network_override()
    except ValueError as e:
        if rank == 0:
            print(f"swing-mpi calibrate: {e}", file=sys.stderr)
        return 2
    if p == 1:
        print("swing-mpi calibrate: one rank has nothing to measure; run it under mpiexec -n 2 or more",
              file=sys.stderr)
        return 2
    if not args.quiet:
        _say(comm, f"calibrate: p={p}, dims {'x'.join(map(str, dims))}, {len(sizes)} sizes, up to {args.iters} "
                   f"rounds or {args.point_time:g} s per size")
    tuning, f, m = calibrate(comm, sizes=sizes, dims=dims, iters=args.iters, warmup=args.warmup,
                             point_time=args.point_time, drop=args.drop, drop_from=drop_from,
                             native=not args.no_native,
                             exact=not args.no_exact, margin=args.native_margin, algorithms=algorithms,
                             settle=args.settle,
                             progress=not args.quiet)
    rc = 0
    if rank == 0:
        print(report(tuning, f, m, p=p, dims=dims), flush=True)
        print(f"# calibrate took {time.perf_counter() - t0:.1f} s", flush=True)
        if args.dry_run:
            print("# --dry-run: nothing written", flush=True)
        else:
            path = _output_path(args)
            extra = {
                "p": p, "dims": list(dims), "host": socket.gethostname(),
                "mpi_library": library_version(),
                "python": platform.python_version(), "sizes": list(m.sizes), "iters": args.iters,
                "point_time": args.point_time, "drop": args.drop, "warmup": args.warmup, "settle": args.settle,
                "fit": {net: {"alpha": a, "beta": b, "per_call": c0, "rms": f.rms[net]}
                        for net, (a, b, c0) in f.constants.items()},
                "network_forced": f.forced, "notes": m.notes, "seconds": m.seconds,
            }
            try:
                save_tuning(tuning, path, extra=extra)
                print(f"# wrote {path}", flush=True)
            except OSError as e:
                print(f"swing-mpi calibrate: cannot write {path}: {e}", file=sys.stderr)
                rc = 1
    return int(comm.bcast(rc, root=0))


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run."""
    parser = argparse.ArgumentParser(prog="swing-mpi calibrate", description=(__doc__ or "").splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
