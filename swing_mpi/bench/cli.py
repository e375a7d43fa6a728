"""``swing-mpi bench``: our collectives against the MPI library's own, side by side.

The options (:func:`add_arguments`; their defaults and :class:`Config` live in
:mod:`~swing_mpi.bench.options` and are re-exported here) and the run that prints
the table and writes the files (:func:`run`). MPI is imported only inside :func:`run`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from ..cliargs import Parser, add_collective, deprecated, say, time_option
from ..schedule import NATIVE
from ..units import RATE_HELP, SIZE_HELP, TIME_HELP, format_size, short_size
from .measure import collective_function, placed_comm, resolve_dims, run_bench
from .options import (
    DEFAULT_ITERS,
    DEFAULT_MAX_TIME,
    DEFAULT_SIZES,
    DEFAULT_WARMUP,
    DESCRIPTION,
    DTYPES,
    ITEMSIZE,
    OPS,
    QUICK_SIZES,
    STARTS,
    Config,
    parse_algorithms,
    registered_algorithms,
)
from .plot import plot_results, plot_title
from .points import DEFAULT_MAX_BYTES
from .results import (
    MIN_ITERS,
    add_model_times,
    env_header_lines,
    format_header,
    format_row,
    write_csv,
    write_json,
)

__all__ = [
    "QUICK_SIZES", "DEFAULT_SIZES", "DEFAULT_ITERS", "DEFAULT_WARMUP", "DEFAULT_MAX_TIME", "STARTS", "DTYPES", "OPS",
    "registered_algorithms", "parse_algorithms", "add_arguments", "build_parser", "Config", "run", "main",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``swing-mpi bench`` (and ``benchmarks/allreduce.py``)."""
    g = parser.add_argument_group("what to measure")
    add_collective(g, help="the collective: allreduce (default), reduce_scatter (MPI_Reduce_scatter_block) or "
                   "allgather; the size is always the full vector: the reduce-scatter's input, the all-gather's "
                   "output")
    g.add_argument("--sizes", "-m", default=None, metavar="MIN:MAX",
                   help=f"message sizes in {SIZE_HELP}: MIN:MAX (powers of two between), MIN:MAX:FACTOR, "
                   f"or a comma list (default {DEFAULT_SIZES})")
    g.add_argument("--algorithms", "-a", default=None, metavar="LIST",
                   help="comma list of algorithms: native, auto, registered names, or all "
                   "(default: native and every registered algorithm for the collective)")
    g.add_argument("--dims", default=None, help="torus dims passed to our collectives, e.g. 4x4 "
                   "(default: $SWING_MPI_DIMS or a ring of all ranks)")
    g.add_argument("--node-env", default=None, metavar="VAR",
                   help="this rank's torus node (row-major index) is in $VAR: our collectives then run on "
                        "swing_mpi.Intracomm(comm, coords=...) at that place, for ranks not numbered like the wiring "
                        "(in the lab: --node-env SWING_LAB_NODE with lab --placement shuffled)")
    g.add_argument("--dtype", "-d", default="float64", choices=DTYPES,
                   help="element type of the vectors (default float64)")
    g.add_argument("--op", "-o", default=None, choices=OPS,
                   help="reduction op (default sum; allgather takes none)")
    g.add_argument("--warmup", "-x", type=int, default=None, help=f"untimed calls per point (default {DEFAULT_WARMUP})")
    g.add_argument("--iters", "-i", type=int, default=None, help=f"timed calls per point (default {DEFAULT_ITERS})")
    g.add_argument("--max-bytes", default=None, metavar="SIZE",
                   help=f"fewer iterations for large sizes: at most SIZE ({SIZE_HELP}) per point "
                   f"(default {short_size(DEFAULT_MAX_BYTES)}; 0: no cap); at least {MIN_ITERS} iterations")
    g.add_argument("--max-time", type=time_option("--max-time"), default=None, metavar="TIME",
                   help=f"fewer iterations for slow points: about TIME per point (500ms, 5s; a bare number is "
                   f"seconds), estimated from the warmup (default {DEFAULT_MAX_TIME:g}s; 0: no cap); at least "
                   f"{MIN_ITERS} iterations")
    place = g.add_mutually_exclusive_group()
    place.add_argument("--inplace", action="store_true", help="in-place only (MPI.IN_PLACE)")
    place.add_argument("--both", action="store_true", help="out-of-place and in-place")
    g.add_argument("--blocked", action="store_true",
                   help="time all iterations of one algorithm before the next (OSU style; the algorithms in a "
                   "random order) instead of round robin over the algorithms of a size")
    g.add_argument("--batch", type=int, default=1, metavar="K",
                   help="time K back-to-back calls from one barrier and report the time per call (the steady "
                   "state of a loop of calls, as nccl-tests time it); default 1: a barrier before every call, "
                   "as the OSU benchmarks. In place, the calls of a batch reduce the earlier results")
    g.add_argument("--settle", type=int, default=0, metavar="K",
                   help="K untimed calls of the same algorithm right before each timed one (each from a barrier, as "
                   "the timed one), so that it finds the "
                   "links as its own calls leave them (a rate limiter's burst, a queue), not as another "
                   "algorithm's left them; default 0")
    g.add_argument("--streak", type=int, default=1, metavar="K",
                   help="interleaved, time K calls of an algorithm in a row before the next one's turn, so that "
                   "only the first of them follows a switch of algorithm (on shared memory that call ran 5-40%% "
                   "slower at 8 B-1 KiB); default 1")
    g.add_argument("--start", choices=STARTS, default="auto",
                   help="how a timed call starts: barrier (each rank times from its own exit of a barrier, as the "
                   "OSU benchmarks), sync (every rank starts at one instant agreed after the barrier and times from "
                   "it, as ReproMPI; the ranks must share one host's clock) or auto (default: sync where all ranks "
                   "run on one host and wait sleeping, i.e. more ranks than cores that share no memory, as in the "
                   "lab, whose barrier exits spread over sleeps and time slices; barrier otherwise)")
    g.add_argument("--no-check", action="store_true", help="skip validation (#wrong is then -1)")
    g.add_argument("--seed", type=int, default=12345, help="seed of the rank-dependent inputs")
    g.add_argument("--quick", action="store_true",
                   help=f"a short sweep: sizes {QUICK_SIZES}, 10 iterations, 2 warmup, every algorithm")
    o = parser.add_argument_group("output")
    o.add_argument("--label", default=None,
                   help="name of the native rows, e.g. mpich-ring for a run with "
                   "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring (default: native)")
    o.add_argument("--csv", metavar="FILE", help="write every row as CSV")
    o.add_argument("--json", metavar="FILE", help="write the environment and every row (with all times) as JSON")
    o.add_argument("--plot", metavar="FILE.png", help="goodput vs size and time ratio vs native (needs matplotlib)")
    o.add_argument("--bw-unit", choices=("GB", "MB"), default="GB",
                   help="bandwidth unit of the table (default GB: 1e9 B/s)")
    o.add_argument("--model-link", default=None, metavar="RATE",
                   help=f"draw the cost model dashed (swing_mpi.model) at this link rate per direction, {RATE_HELP}")
    deprecated(o, "--model-link-mbps", dest="model_link", new="--model-link", convert=lambda v: f"{v}M")
    o.add_argument("--model-alpha", default=None, metavar="TIME",
                   help=f"model latency per step, {TIME_HELP} (default 0 with --model-link)")
    deprecated(o, "--model-alpha-us", dest="model_alpha", new="--model-alpha", convert=lambda v: f"{v}us")
    o.add_argument("--model-congestion", choices=("routed", "distance"), default="routed", help=argparse.SUPPRESS)
    o.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")


def build_parser(prog: str = "swing-mpi bench") -> argparse.ArgumentParser:
    """Return the parser of ``swing-mpi bench`` named ``prog``."""
    p = Parser(prog=prog, description=DESCRIPTION)
    add_arguments(p)
    return p


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Measure, print the table on rank 0 and write the files (``swing-mpi bench``)."""
    try:
        cfg = Config(args)
    except ValueError as e:  # every rank finds it: rank 0 says it
        say(f"swing-mpi bench: {e}")
        return 2
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        dims, _ = resolve_dims(comm, cfg.dims)
        if any(a != NATIVE for a in cfg.algorithms):
            collective_function(cfg.collective)
        ours = placed_comm(comm, dims, cfg.node_env)
    except ValueError as e:
        if rank == 0:
            _say(f"swing-mpi bench: {e}")
        return 2
    if rank == 0 and cfg.rounded:
        _say(f"swing-mpi bench: note: {', '.join(format_size(n) for n in cfg.rounded)} "
             f"{'is' if len(cfg.rounded) == 1 else 'are'} not whole {cfg.dtype} elements "
             f"({ITEMSIZE[cfg.dtype]} B each); measured rounded down to whole elements (at least one)")
    t_start = time.perf_counter()
    all_rows: list[dict[str, Any]] = []
    warned: list[bool] = []
    model = cfg.model_params()

    def warn(msg: str) -> None:
        _say(f"swing-mpi bench: {msg}")

    def start(env: dict[str, Any]) -> None:
        print("\n".join(env_header_lines(env)), flush=True)
        print(format_header(cfg.bw_unit), flush=True)

    def log(env: dict[str, Any], size_rows: list[dict[str, Any]], si: int, seconds: float) -> None:
        if si:
            print("#")
        if model:
            add_model_times(size_rows, warn=None if warned else warn, **model)
            warned.append(True)
        all_rows.extend(size_rows)
        for r in size_rows:
            print(format_row(r, cfg.bw_unit))
        sys.stdout.flush()
        if not cfg.quiet:
            _say(f"[bench] {format_size(size_rows[0]['size'])} ({si + 1}/{len(env['sizes'])}) done in "
                 f"{seconds:.1f} s, {time.perf_counter() - t_start:.1f} s in all")
        # files after every size: a long sweep that dies keeps what it measured
        if cfg.csv:
            write_csv(all_rows, cfg.csv)
        if cfg.json:
            write_json(cfg.json, env, all_rows)

    env, rows = run_bench(comm, cfg, start=start, log=log, ours=ours)
    wrong = sum(max(0, int(r["wrong"])) for r in rows)
    if rank == 0:
        for item in env.get("left_out", []):
            print(f"# left out {item['algorithm']} from {item['why']}")
        print(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
        print(f"# {len(rows)} points in {time.perf_counter() - t_start:.1f} s")
        sys.stdout.flush()
        if cfg.plot:
            try:
                plot_results(all_rows, cfg.plot, title=plot_title(env))
            except ImportError as e:
                warn(f"no plot: {e} (pip install matplotlib)")
    return 0 if wrong == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``swing-mpi bench`` with ``argv`` (``python -m swing_mpi.bench``)."""
    return run(build_parser().parse_args(argv))
