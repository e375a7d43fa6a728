"""``swing-mpi calibrate``: measure α, β, γ here and write the tuning file ``auto`` reads.

Run under mpiexec on the machines and the number of ranks you care about::

    mpiexec -n 4 python -m mpi4py -m swing_mpi calibrate            # writes ~/.config/swing_mpi/tuning.json
    mpiexec -n 16 python -m mpi4py -m swing_mpi calibrate --dims 4x4 --dry-run

Measurement:
    For every size (default 8 B … 4 MiB, powers of two) four series run on
    the communicator: ``swing-lat`` on int64 SUM (exact: partial results),
    ``swing-lat`` on float64 SUM (inexact: the contributions form),
    ``swing-bw`` on float64 SUM and ``native`` (``MPI_Allreduce`` through our
    ``allreduce``, as ``auto`` would call it). Each round times one call of
    every series at every size (round robin, so a burst of machine noise
    spreads over all points); each timed call is bracketed by a barrier; a
    call's time is the maximum over ranks; the median over ``--iters`` rounds
    is kept. γ is measured apart: the executor's reduction kernel on up to
    4 MiB, all ranks at once.

Fit:
    The model of :mod:`swing_mpi.choose`, ``T = K·α + β·Σ_k m_k + γ·r``, is
    linear in its constants given each schedule's step count ``K``, bytes per
    step ``m_k`` and reduced bytes ``r`` (:func:`swing_mpi.choose.features`).
    With γ measured, α and β are fitted to ``T − γ·r`` over our three series
    by non-negative least squares on relative errors (every size weighs the
    same, from 8 B to 4 MiB), once per lane mode: concurrent (α per step,
    ``m_k`` = the busiest lane's bytes: lanes on separate ports) and serial
    (α and bytes per step of every lane: lanes sharing one process and one
    memory system). The mode kept (``concurrent_lanes``) is the one whose
    swing-lat/swing-bw choices lose the least time on the measured points
    (the purpose of the fit), then the one with the smaller error. The report
    prints measured and modelled times per point, the fit's median and worst
    relative error and both modes' error and time lost.

Native:
    At each size ``native`` wins if it is at least ``--native-margin``
    (default 10 %) faster than the best of our series. ``native_below_bytes``
    is the size step that agrees with the most sizes (native below it, ours
    from it on); ``auto`` hands smaller vectors to the MPI library. It stays
    unset when the best step is "never", or with ``--no-native``.

The tuning JSON (rank 0; ``--output``, default ``~/.config/swing_mpi/tuning.json``;
``--dry-run`` writes nothing) holds the constants, where and how they were
measured and the medians. Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import math
import os
import platform
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .units import format_size, parse_sizes

__all__ = [
    "add_arguments", "run", "main", "SERIES", "Series", "measure", "measure_gamma", "fit", "Fit",
    "native_threshold",
    "calibrate", "DEFAULT_SIZES", "nnls",
]

DEFAULT_SIZES = "8:4M"
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 2
_PLANS_KEPT = 48
"""Plans alive at once while measuring (``api`` keeps the last 64 per communicator)."""
DEFAULT_NATIVE_MARGIN = 0.10


@dataclass(frozen=True)
class Series:
    """One measured curve: an algorithm on a dtype with SUM."""

    name: str
    algorithm: str
    dtype: str
    exact: bool


SERIES = (
    Series("swing-lat/int64", "swing-lat", "int64", True),
    Series("swing-lat/float64", "swing-lat", "float64", False),
    Series("swing-bw/float64", "swing-bw", "float64", False),
    Series("native/float64", "native", "float64", False),
)
ITEMSIZE = 8


def _say(comm, msg: str) -> None:
    if comm.Get_rank() == 0:
        print(msg, file=sys.stderr, flush=True)


# -- measurement ------------------------------------------------------------------------

def measure(comm, sizes: Sequence[int], *, dims: tuple[int, ...], iters: int = DEFAULT_ITERS,
            warmup: int = DEFAULT_WARMUP, series: Sequence[Series] = SERIES,
            progress: bool = True) -> list[dict[str, Any]]:
    """Median times (seconds, max over ranks per call) of every series at every size.

    Collective. Sizes are taken in groups (few enough that every plan stays
    cached); within a group, each round times one call of every series at
    every size, so a burst of machine noise spreads over all points instead of
    spoiling a few. Returns the same list on every rank: one dict per (size,
    series) with ``nbytes``, ``count``, ``series``, ``algorithm``, ``exact``,
    ``median_s`` and ``min_s``, in size order.
    """
    import numpy as np
    from mpi4py import MPI

    from .api import allreduce

    rank = comm.Get_rank()
    iters = max(1, int(iters))
    counts = sorted({max(1, int(n) // ITEMSIZE) for n in sizes})
    ours = max(1, sum(1 for s in series if s.algorithm != "native"))
    group = max(1, _PLANS_KEPT // ours)
    out: list[dict[str, Any]] = []
    for g in range(0, len(counts), group):
        chunk = counts[g:g + group]
        calls: list[list[Callable[[], None]]] = []
        for count in chunk:
            rng = np.random.default_rng([12345, rank, count])
            row = []
            for s in series:
                if s.dtype == "float64":
                    src = rng.uniform(0.5, 1.5, count)
                else:
                    src = rng.integers(0, 1 << 20, count).astype(np.int64)
                dst = np.empty_like(src)
                row.append(lambda src=src, dst=dst, alg=s.algorithm:
                           allreduce(comm, src, dst, MPI.SUM, algorithm=alg, dims=dims))
            calls.append(row)
        times = np.zeros((len(chunk), len(series), iters))
        for rnd in range(max(0, warmup) + iters):
            i = rnd - max(0, warmup)
            for a, row in enumerate(calls):
                for j, c in enumerate(row):
                    comm.Barrier()
                    t0 = time.perf_counter()
                    c()
                    t = time.perf_counter() - t0
                    if i >= 0:
                        times[a, j, i] = t
            if progress and i >= 0:
                _say(comm, f"calibrate: {format_size(chunk[0] * ITEMSIZE)} … {format_size(chunk[-1] * ITEMSIZE)}: "
                           f"round {i + 1}/{iters}")
        comm.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)
        for a, count in enumerate(chunk):
            for j, s in enumerate(series):
                out.append({"nbytes": count * ITEMSIZE, "count": count, "series": s.name,
                            "algorithm": s.algorithm, "exact": s.exact,
                            "median_s": float(np.median(times[a, j])), "min_s": float(times[a, j].min())})
        del calls
    return out


# -- fitting ------------------------------------------------------------------------------

def nnls(rows: Sequence[Sequence[float]], y: Sequence[float]) -> tuple[list[float], float]:
    """Non-negative least squares for a handful of unknowns (every support set is tried).

    Returns the coefficients and the residual sum of squares.
    """
    import numpy as np

    A = np.asarray(rows, dtype=float)
    b = np.asarray(y, dtype=float)
    n = A.shape[1]
    best, best_rss = [0.0] * n, float(b @ b)
    for k in range(1, n + 1):
        for support in itertools.combinations(range(n), k):
            sub = A[:, support]
            coef, *_ = np.linalg.lstsq(sub, b, rcond=None)
            if np.any(coef < 0):
                continue
            rss = float(np.sum((sub @ coef - b) ** 2))
            if rss < best_rss - 1e-15 * max(1.0, best_rss):
                best_rss = rss
                best = [0.0] * n
                for i, c in zip(support, coef):
                    best[i] = float(c)
    return best, best_rss


@dataclass
class Fit:
    """Fitted constants, the lane mode kept, and the fit at every point."""

    alpha: float
    beta: float
    gamma: float
    concurrent_lanes: bool
    points: list[dict[str, Any]] = field(default_factory=list)
    """Per fitted point: the record plus ``features`` and ``model_s``."""
    gamma_measured: bool = False
    """γ came from :func:`measure_gamma` (only α and β were fitted)."""
    rms: dict[bool, float] = field(default_factory=dict)
    """Root-mean-square relative error of the fit with each lane mode."""
    regret: dict[bool, float] = field(default_factory=dict)
    """Mean relative time lost by each lane mode's swing-lat/swing-bw choices on the measured points."""
    overhead: float = 0.0
    """Seconds per call, the same for every algorithm (argument checks, leaving the barrier):
    fitted so that it does not bias α, but no part of the choice."""

    @property
    def rel_errors(self) -> list[float]:
        return [(p["model_s"] - p["median_s"]) / p["median_s"] for p in self.points if p["median_s"] > 0]

    @property
    def median_abs_rel_error(self) -> float:
        e = sorted(abs(x) for x in self.rel_errors)
        return e[len(e) // 2] if e else float("nan")

    @property
    def max_abs_rel_error(self) -> float:
        return max((abs(x) for x in self.rel_errors), default=float("nan"))


def fit(records: Sequence[dict[str, Any]], dims: tuple[int, ...], *, gamma: float | None = None) -> Fit:
    """Fit the model of :mod:`swing_mpi.choose` to our series' medians (relative errors).

    With ``gamma`` (measured apart, :func:`measure_gamma`) only α and β are
    fitted to ``T − γ·r``; without it all three. A per-call constant is
    fitted too (the same for all our algorithms, so it is reported but plays
    no part in the choice). Both lane modes are fitted
    (concurrent: α per step and the busiest lane's bytes; serial: α per lane
    step and every lane's bytes); the one whose swing-lat/swing-bw choices
    lose the least time on the measured points is kept (then the smaller
    error). A record may carry its own ``dims`` (pooled measurements).
    """
    from .choose import Tuning, features

    ours = [r for r in records if r["algorithm"] != "native" and r["median_s"] > 0]
    if not ours:
        raise ValueError("nothing to fit: no measurements of our algorithms")
    feats = [features(r["algorithm"], tuple(r.get("dims", dims)), r["count"], ITEMSIZE, r["exact"]) for r in ours]
    results = {}
    for conc in (True, False):
        rows, y = [], []
        for r, f in zip(ours, feats):
            w = 1.0 / r["median_s"]
            k, m = f.counts(conc)
            if gamma is None:
                rows.append([k * w, m * w, w, f.reduced_bytes * w])
                y.append(1.0)
            else:
                rows.append([k * w, m * w, w])
                y.append((r["median_s"] - gamma * f.reduced_bytes) * w)
        coef, rss = nnls(rows, y)
        g = coef[3] if gamma is None else gamma
        t = Tuning(coef[0], coef[1], g, concurrent_lanes=conc)
        results[conc] = (t, math.sqrt(rss / len(rows)), _regret(ours, t, dims), coef[2])
    # keep the lane mode whose choices lose the least time on these measurements; then the better fit
    conc = min((True, False), key=lambda c: (round(results[c][2], 3), results[c][1], not c))
    t, _, _, c0 = results[conc]
    pts = []
    for r, f in zip(ours, feats):
        k, m = f.counts(conc)
        pts.append(dict(r, features=(k, m, f.reduced_bytes), model_s=c0 + f.time(t)))
    fit_ = Fit(t.alpha, t.beta, t.gamma, conc, pts, gamma is not None, {c: v[1] for c, v in results.items()},
               {c: v[2] for c, v in results.items()}, c0)
    return fit_


def _regret(records: Sequence[dict[str, Any]], tuning, dims: tuple[int, ...]) -> float:
    """Mean time lost (relative) by the model's swing-lat/swing-bw choices on measured points."""
    from .choose import choose

    by: dict[tuple, float] = {}
    for r in records:
        by[(tuple(r.get("dims", dims)), r["count"], r["algorithm"], r["exact"])] = r["median_s"]
    lost = []
    for (d, count, alg, exact), t_lat in by.items():
        if alg != "swing-lat":
            continue
        t_bw = by.get((d, count, "swing-bw", exact), by.get((d, count, "swing-bw", not exact)))
        if t_bw is None:
            continue
        pick = choose(math.prod(d), d, count, ITEMSIZE, exact=exact, commutative=True, tuning=tuning)
        got = t_lat if pick == "swing-lat" else t_bw
        lost.append(got / min(t_lat, t_bw) - 1.0)
    return sum(lost) / len(lost) if lost else 0.0


def measure_gamma(comm, nbytes: int = 4 << 20, *, iters: int = 9) -> float:
    """Seconds per byte of our float64 SUM kernel, all ranks reducing at once (max over ranks).

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


def native_threshold(records: Sequence[dict[str, Any]], *, margin: float = DEFAULT_NATIVE_MARGIN) -> int | None:
    """Below which size ``native`` should run, or ``None``.

    At each measured size ``native`` wins if its median is at least
    ``margin`` below the best of our series. The threshold is the step that
    agrees with the most sizes (native below it, ours from it on; one noisy
    size does not move it far); ties go to the smaller threshold. ``None``
    when the best step is below the smallest size (native never).
    """
    by_size: dict[int, dict[str, float]] = {}
    for r in records:
        by_size.setdefault(r["nbytes"], {})[r["series"]] = r["median_s"]
    sizes, wins = [], []
    for n in sorted(by_size):
        meds = by_size[n]
        nat = [v for k, v in meds.items() if k.startswith("native")]
        ours = [v for k, v in meds.items() if not k.startswith("native")]
        if nat and ours:
            sizes.append(n)
            wins.append(nat[0] <= (1.0 - margin) * min(ours))
    if not sizes:
        return None
    best_i, best_err = 0, None
    for i in range(len(sizes) + 1):  # native below sizes[i] (i = len: below everything measured)
        err = sum(1 for w in wins[:i] if not w) + sum(1 for w in wins[i:] if w)
        if best_err is None or err < best_err:
            best_i, best_err = i, err
    if best_i == 0:
        return None
    return sizes[best_i] if best_i < len(sizes) else sizes[-1] + 1


# -- the command ------------------------------------------------------------------------



def _table_sizes(p: int) -> list[int]:
    return [8 << i for i in range(22)]  # 8 B … 16 MiB


def calibrate(comm, *, sizes: Sequence[int], dims: tuple[int, ...], iters: int = DEFAULT_ITERS,
              warmup: int = DEFAULT_WARMUP, native: bool = True, margin: float = DEFAULT_NATIVE_MARGIN,
              progress: bool = True) -> tuple[Any, Fit, list[dict[str, Any]]]:
    """Measure, fit and return ``(Tuning, Fit, records)``, the same on every rank (collective)."""
    from .choose import Tuning

    series = SERIES if native else tuple(s for s in SERIES if s.algorithm != "native")
    records = measure(comm, sizes, dims=dims, iters=iters, warmup=warmup, series=series, progress=progress)
    gamma = measure_gamma(comm, min(max(max(sizes), 64 << 10), 4 << 20))
    f = fit(records, dims, gamma=gamma)
    below = native_threshold(records, margin=margin) if native else None
    p = comm.Get_size()
    source = (f"swing-mpi calibrate on {socket.gethostname()}, p={p}, dims {'x'.join(map(str, dims))}, "
              f"{_dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    return Tuning(f.alpha, f.beta, f.gamma, below, source, f.concurrent_lanes), f, records


def report(tuning, f: Fit, records: Sequence[dict[str, Any]], *, p: int, dims: tuple[int, ...]) -> str:
    names = []
    for r in records:
        if r["series"] not in names:
            names.append(r["series"])
    model = {(p_["nbytes"], p_["series"]): p_["model_s"] for p_ in f.points}
    by = {(r["nbytes"], r["series"]): r["median_s"] for r in records}
    sizes = sorted({r["nbytes"] for r in records})
    lines = [f"# swing-mpi calibrate: p={p}, dims {'x'.join(map(str, dims))}; median us (model us)"]
    head = f"{'size':>9} " + " ".join(f"{n:>22}" for n in names)
    lines += [head, "-" * len(head)]
    for n in sizes:
        cells = []
        for s in names:
            v = by.get((n, s))
            m = model.get((n, s))
            cells.append(f"{v * 1e6:>10.1f}" + (f" ({m * 1e6:>8.1f})" if m is not None else " " * 11)
                         if v is not None else " " * 22)
        lines.append(f"{format_size(n):>9} " + " ".join(cells))
    lines += [
        "",
        "# fit: T = per call + K·alpha + beta·sum_k m_k + gamma·reduced  (non-negative least squares on relative errors)",
        f"alpha = {tuning.alpha * 1e6:.2f} us per step" + ("" if tuning.concurrent_lanes else " of a lane"),
        f"beta  = {tuning.beta * 1e9:.4f} ns per byte moved in a step ({_rate(tuning.beta)})",
        f"gamma = {tuning.gamma * 1e9:.4f} ns per reduced byte ({_rate(tuning.gamma)})"
        + (", measured apart (reduction kernel, all ranks at once)" if f.gamma_measured else ""),
        f"per call: {f.overhead * 1e6:.2f} us (every algorithm alike: not part of the choice)",
        "lanes: " + ("concurrent (alpha per step, m_k = the busiest lane's bytes)" if tuning.concurrent_lanes
                     else "serial (alpha and bytes per step of every lane, as on shared memory)"),
        "  " + "; ".join(f"{'concurrent' if c else 'serial'}: rms error {f.rms[c] * 100:.1f} %, "
                         f"time lost by its choices {f.regret.get(c, 0.0) * 100:.1f} %"
                         for c in sorted(f.rms, reverse=True)),
        f"fit quality: median |error| {f.median_abs_rel_error * 100:.1f} %, worst {f.max_abs_rel_error * 100:.1f} % "
        f"over {len(f.points)} points",
        "native_below_bytes = " + ("none (auto never hands vectors to MPI_Allreduce)"
                                   if tuning.native_below_bytes is None else
                                   f"{tuning.native_below_bytes} (auto runs MPI_Allreduce below "
                                   f"{format_size(tuning.native_below_bytes)})"),
        "",
        f"# auto with this tuning on dims {'x'.join(map(str, dims))}: float64 SUM (inexact) | int64 SUM (exact)",
    ]
    lines += _auto_columns(tuning, p, dims)
    return "\n".join(lines)


def _auto_columns(tuning, p: int, dims: tuple[int, ...]) -> list[str]:
    from .choose import choose

    rows = [f"| {'size':>9} | {'float64 SUM':<11} | {'int64 SUM':<11} |", f"|{'-' * 10}:|{'-' * 13}|{'-' * 13}|"]
    for n in _table_sizes(p):
        a = choose(p, dims, n // ITEMSIZE, ITEMSIZE, exact=False, commutative=True, tuning=tuning)
        b = choose(p, dims, n // ITEMSIZE, ITEMSIZE, exact=True, commutative=True, tuning=tuning)
        rows.append(f"| {format_size(n):>9} | {a:<11} | {b:<11} |")
    return rows


def _rate(sec_per_byte: float) -> str:
    return "0" if sec_per_byte <= 0 else f"{1.0 / sec_per_byte / 1e9:.2f} GB/s"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", "-m", default=DEFAULT_SIZES,
                        help=f"vector bytes: MIN:MAX (powers of two), MIN:MAX:F or a list (default {DEFAULT_SIZES})")
    parser.add_argument("--iters", "-i", type=int, default=DEFAULT_ITERS, help=f"timed calls per point ({DEFAULT_ITERS})")
    parser.add_argument("--warmup", "-x", type=int, default=DEFAULT_WARMUP, help=f"untimed calls per point ({DEFAULT_WARMUP})")
    parser.add_argument("--dims", default=None,
                        help="torus dims (default $SWING_MPI_DIMS, the communicator's Cartesian topology, or a ring)")
    parser.add_argument("--output", "-o", default=None,
                        help="tuning file to write (default $SWING_MPI_TUNING if set, else ~/.config/swing_mpi/tuning.json)")
    parser.add_argument("--dry-run", action="store_true", help="measure and report; write nothing")
    parser.add_argument("--no-native", action="store_true",
                        help="do not measure MPI_Allreduce; auto never hands vectors to it")
    parser.add_argument("--native-margin", type=float, default=DEFAULT_NATIVE_MARGIN,
                        help="native must be this fraction faster than ours to get a size (default 0.1)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _output_path(args: argparse.Namespace):
    from pathlib import Path

    from .choose import TUNING_ENV, default_tuning_path

    if args.output:
        return Path(args.output)
    env = os.environ.get(TUNING_ENV, "").strip()
    if env and env.lower() not in ("default", "defaults"):
        return Path(env).expanduser()
    return default_tuning_path()


def run(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from .choose import save_tuning
    from .topology import parse_dims

    comm = MPI.COMM_WORLD
    p, rank = comm.Get_size(), comm.Get_rank()
    try:
        sizes = parse_sizes(args.sizes)
        if args.iters < 1:
            raise ValueError("--iters must be at least 1")
        if not 0 <= args.native_margin < 1:
            raise ValueError("--native-margin must be in [0, 1)")
        if args.dims:
            dims = tuple(parse_dims(args.dims, p))
        else:
            from .api import _dims_for
            dims = tuple(_dims_for(comm, None))
    except ValueError as e:
        if rank == 0:
            print(f"swing-mpi calibrate: {e}", file=sys.stderr)
        return 2
    if p == 1:
        print("swing-mpi calibrate: one rank has nothing to measure; run it under mpiexec -n 2 or more",
              file=sys.stderr)
        return 2
    if not args.quiet:
        _say(comm, f"calibrate: p={p}, dims {'x'.join(map(str, dims))}, {len(sizes)} sizes, "
                   f"{args.iters} iters + {args.warmup} warmup")
    tuning, f, records = calibrate(comm, sizes=sizes, dims=dims, iters=args.iters, warmup=args.warmup,
                                   native=not args.no_native, margin=args.native_margin,
                                   progress=not args.quiet)
    rc = 0
    if rank == 0:
        print(report(tuning, f, records, p=p, dims=dims), flush=True)
        if args.dry_run:
            print("# --dry-run: nothing written", flush=True)
        else:
            path = _output_path(args)
            extra = {
                "p": p, "dims": list(dims), "host": socket.gethostname(),
                "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
                "python": platform.python_version(), "sizes": list(sizes),
                "iters": args.iters, "warmup": args.warmup,
                "fit": {"median_abs_rel_error": f.median_abs_rel_error, "max_abs_rel_error": f.max_abs_rel_error,
                        "points": len(f.points)},
                "measured": [dict(r) for r in records],
                "gamma_measured": f.gamma_measured, "call_overhead": f.overhead,
                "lane_modes": {("concurrent" if k else "serial"): {"rms": f.rms[k], "regret": f.regret.get(k)}
                               for k in f.rms},
            }
            try:
                save_tuning(tuning, path, extra=extra)
                print(f"# wrote {path}", flush=True)
            except OSError as e:
                print(f"swing-mpi calibrate: cannot write {path}: {e}", file=sys.stderr)
                rc = 1
    return int(comm.bcast(rc, root=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="swing-mpi calibrate", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
