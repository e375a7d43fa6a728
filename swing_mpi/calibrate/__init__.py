"""``swing-mpi calibrate``: measure every candidate here and write the tuning file ``auto`` reads.

Run under mpiexec on the machines, ranks and torus shape you care about::

    mpiexec -n 16 python -m mpi4py -m swing_mpi calibrate --dims 4x4     # writes ~/.config/swing_mpi/tuning.json
    mpiexec -n 4 python -m mpi4py -m swing_mpi calibrate --dry-run

Three jobs: measuring (:mod:`~swing_mpi.calibrate.measuring`), racing the close candidates
(:mod:`~swing_mpi.calibrate.race`) and turning the medians into tables, model constants and a report
(:mod:`~swing_mpi.calibrate.table`). Progress goes to stderr, the report to stdout (rank 0).
docs/auto.md ("Calibrating") describes every rule and the measurements behind it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import platform
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mpi4py import MPI

from ..bench.measure import library_version
from ..choose import NATIVE_BELOW_MARGIN
from ..cliargs import Parser, deprecated, time_option
from ..model.fit import Fit, nnls
from ..schedule import ALGORITHMS, NATIVE
from ..state import dims_for
from ..topology import parse_dims
from ..tuning import Tuning, default_tuning_path, network_override, save_tuning, tuning_path
from ..units import SIZE_HELP, format_size, parse_size, parse_sizes, plural, require_finite
from .measuring import (
    DEFAULT_DROP,
    DEFAULT_DROP_FROM,
    DEFAULT_ITERS,
    DEFAULT_POINT_TIME,
    DEFAULT_SETTLE,
    DEFAULT_WARMUP,
    SETTLE_FROM,
    Measured,
    Series,
    beaten,
    measure,
    measure_gamma,
    say,
    series_for,
    timed_round,
)
from .race import CONFIRM_WITHIN, narrowed, race_basis, race_groups, table_groups, to_confirm
from .table import fit, native_threshold, report, tables_from

__all__ = [
    "add_arguments", "run", "main", "calibrate", "Series", "beaten", "series_for", "Measured", "measure",
    "measure_gamma", "fit", "Fit", "narrowed", "table_groups", "race_groups", "race_basis", "to_confirm",
    "timed_round", "native_threshold", "tables_from", "report", "nnls", "DEFAULT_SIZES", "CONFIRM_WITHIN",
]

DEFAULT_SIZES = "8,64,256,1K,4K,16K,64K,256K,1M,4M,16M"


def calibrate(comm: Any, *, sizes: Sequence[int], dims: tuple[int, ...], iters: int = DEFAULT_ITERS,
              warmup: int = DEFAULT_WARMUP, point_time: float = DEFAULT_POINT_TIME, drop: float = DEFAULT_DROP,
              drop_from: int = DEFAULT_DROP_FROM, native: bool = True, exact: bool = True,
              margin: float = NATIVE_BELOW_MARGIN, algorithms: Sequence[str] | None = None,
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add calibrate's options to ``parser``."""
    parser.add_argument("--sizes", "-m", default=DEFAULT_SIZES,
                        help=f"vector sizes in {SIZE_HELP}: a list, MIN:MAX (powers of two) or MIN:MAX:F "
                             f"(default {DEFAULT_SIZES})")
    parser.add_argument("--iters", "-i", type=int, default=DEFAULT_ITERS,
                        help=f"most timed rounds per size ({DEFAULT_ITERS})")
    parser.add_argument("--point-time", type=time_option("--point-time"), default=DEFAULT_POINT_TIME,
                        metavar="TIME", help=f"time of timed calls per size before its rounds stop (500ms, 2s; a "
                        f"bare number is seconds); at least one round (default {DEFAULT_POINT_TIME:g}s)")
    parser.add_argument("--drop", type=float, default=DEFAULT_DROP,
                        help="stop measuring a candidate this many times slower than the fastest at two sizes "
                             f"in a row and falling behind (default {DEFAULT_DROP})")
    parser.add_argument("--drop-from", default=format_size(DEFAULT_DROP_FROM),
                        help=f"never stop measuring a candidate below this size, in {SIZE_HELP} (default "
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
    parser.add_argument("--algorithms", "--algorithm", "-a", dest="algorithms", default=None,
                        help="one or a comma list of our algorithms to measure (default: every one valid on the "
                             "torus)")
    parser.add_argument("--out", "-o", default=None,
                        help="tuning file to write (default $SWING_MPI_TUNING if set, else "
                             "~/.config/swing_mpi/tuning.json)")
    deprecated(parser, "--output", dest="out", new="--out")
    parser.add_argument("--dry-run", action="store_true", help="measure and report; write nothing")
    parser.add_argument("--no-native", action="store_true",
                        help="do not measure MPI_Allreduce; auto never hands vectors to it")
    parser.add_argument("--no-exact", action="store_true",
                        help="measure float64 SUM only (no int64 table for exact ops)")
    parser.add_argument("--native-margin", type=float, default=NATIVE_BELOW_MARGIN,
                        help="for the model: native must be this fraction faster than ours to get a size (0.1)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")


def _output_path(args: argparse.Namespace) -> Path:
    """``--out``, else the file ``auto`` reads (:func:`swing_mpi.tuning.tuning_path`), else the config file."""
    if args.out:
        return Path(args.out)
    return tuning_path() or default_tuning_path()


def run(args: argparse.Namespace) -> int:
    """Run ``swing-mpi calibrate`` on ``MPI.COMM_WORLD`` (collective)."""
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
        if args.warmup < 0:
            raise ValueError("--warmup must be 0 or more")
        require_finite("--drop", args.drop, above=1)
        require_finite("--point-time", args.point_time, above=0)
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
        say(comm, f"calibrate: p={p}, dims {'x'.join(map(str, dims))}, {plural(len(sizes), 'size')}, up to "
                   f"{plural(args.iters, 'round')} or {args.point_time:g} s per size")
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
    parser = Parser(prog="swing-mpi calibrate", description=(__doc__ or "").splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
