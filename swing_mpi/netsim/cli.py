"""``swing-mpi simulate``: our schedules on a simulated network (SimGrid), a table per vector size.

Examples::

    swing-mpi simulate --dims 64x64 --link 400G --sizes 32,1K,1M,64M -a swing-bw,bucket
    swing-mpi simulate --dims 8x8 --network hyperx --alpha 0 --sizes 256M --json
    swing-mpi simulate --dims 4x4 --link 40M --alpha engine --sizes 1M,4M,16M --csv lab.csv --plot lab.png
    swing-mpi simulate --dims 8x8 --alpha engine --cores 16 --sizes 32,32K,2M,512M --algorithms swing-bw,swing-lat
    swing-mpi simulate --dims 8x8 --alpha c --gamma c --sizes 512M --algorithms recdoub,rabenseifner,ring
    swing-mpi simulate --dims 16x16 --ranks-per-node 48 --cores 48 --alpha engine --sizes 32,2M -a swing-bw
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..cliargs import Parser, add_collective
from ..model.node_phases import add_node_arguments, format_byte_rate, node_costs_from_args
from ..schedule import ALGORITHMS
from ..topology import parse_dims, require_two_nodes
from ..units import (
    RATE_HELP,
    SIZE_HELP,
    TIME_HELP,
    format_rate,
    format_size,
    format_time,
    parse_rate,
    parse_size,
    parse_sizes,
    parse_time,
)
from .params import MESSAGE_SIZES

__all__ = ["add_arguments", "run", "main", "parse_rate"]

def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``simulate`` options to ``parser``."""
    parser.add_argument("--dims", default="64x64", help="network sides, e.g. 64x64, 16x16x16, 16 (default 64x64)")
    parser.add_argument("--link", default="400G", metavar="RATE",
                        help=f"link rate per direction, {RATE_HELP} (default 400G); a bare number is refused")
    parser.add_argument("--sizes", default="32,1K,1M,64M",
                        help=f"vector sizes in {SIZE_HELP}; a comma list or MIN:MAX[:FACTOR] "
                             "(default 32,1K,1M,64M)")
    parser.add_argument("-a", "--algorithms", "--algorithm", dest="algorithms", default="all", metavar="LIST",
                        help="one algorithm or a comma list of registered ones, or all (default): "
                             + ", ".join(ALGORITHMS))
    parser.add_argument("--network", choices=("torus", "hyperx", "fattree"), default="torus",
                        help="torus (default), hyperx (each node linked to its whole row and column) or "
                             "fattree (non-blocking)")
    parser.add_argument("--alpha", default="c", metavar="c|engine|TIME",
                        help="software cost per step: c (1.5us, default), engine (this library's, measured "
                             "by swing-mpi probe, modelled as its engine runs: lanes in lockstep, reductions on "
                             f"--cores threads overlapping the wire segment by segment) or {TIME_HELP}; a bare "
                             "number other than 0 is refused")
    parser.add_argument("--gamma", default=None, metavar="S_PER_BYTE|c",
                        help="reduction cost in seconds per byte reduced, a bare number, e.g. 2.5e-10, or c: a C "
                             "MPI's (numpy's add on one thread, from the engine's costs file) (default: the "
                             "--alpha preset's; 0 for c and for a time)")
    parser.add_argument("--cores", type=int, default=1, metavar="N",
                        help="with --alpha engine: the cores of a node running one rank, all of them reduction "
                             "threads (default 1: no threads, no overlap); with --ranks-per-node K, the node's "
                             "cores: a multi-leader lane reduces on N/K of them, a single leader on all")
    parser.add_argument("--segment", default=None, metavar="SIZE",
                        help=f"with --alpha engine: a segment's size in {SIZE_HELP} (0: whole steps, no overlap), "
                             "instead of the costs file's")
    parser.add_argument("--latency", default="100ns", metavar="TIME",
                        help=f"latency of every link, {TIME_HELP} (default 100ns; a bare number is seconds)")
    parser.add_argument("--hop", default="300ns", metavar="TIME",
                        help=f"latency of every router hop, {TIME_HELP} (default 300ns; a bare number is seconds)")
    add_collective(parser, help="the allreduce (default) or one of its halves (algorithms that have them)")
    parser.add_argument("--message-sizes", choices=MESSAGE_SIZES, default="auto",
                        help="exact: every rank's schedule built for the vector's own count; scaled: the build "
                             "count's, scaled (fast, within 0.4 %% of exact where measured); auto (default): exact "
                             "below 64x the build count on up to 1,024 nodes, else scaled")
    parser.add_argument("--json", action="store_true", help="one JSON object per (algorithm, size), one per line")
    parser.add_argument("--csv", metavar="FILE", default=None, help="also write every point to FILE")
    parser.add_argument("--plot", metavar="FILE.png", default=None, help="goodput against size (needs matplotlib)")
    add_node_arguments(parser)
    return parser


def _params(args: argparse.Namespace, cores: int | None = None) -> Any:
    """Return the simulation's parameters; ``cores``: the threads a rank reduces on, instead of ``--cores``."""
    from .params import SimParams

    link = parse_rate(args.link, "--link")
    kw: dict[str, Any] = dict(link_bps=link, latency_s=parse_time(args.latency, "--latency", bare="s"),
                              hop_s=parse_time(args.hop, "--hop", bare="s"), network=args.network)
    if cores is None:
        cores = getattr(args, "cores", 1)
    if cores < 1:
        raise ValueError(f"--cores must be at least 1, got {cores}")
    if cores != 1 and args.alpha != "engine":
        raise ValueError("--cores applies to --alpha engine (a C MPI reduces on one thread)")
    if args.alpha in ("c", "engine"):
        p = SimParams.preset(args.alpha, cores=cores, **kw)
    else:
        try:
            alpha = parse_time(args.alpha, "--alpha")
        except ValueError as e:
            raise ValueError(f"{e} (or c, engine)") from None
        p = SimParams(alpha_s=alpha, gamma_s_per_byte=0.0, **kw)
    from dataclasses import replace

    if args.gamma is not None:
        p = replace(p, gamma_s_per_byte=_gamma(str(args.gamma)), gamma_threads=())
    segment = getattr(args, "segment", None)
    if segment is not None:
        if args.alpha != "engine":
            raise ValueError("--segment applies to --alpha engine")
        p = replace(p, segment_bytes=parse_size(segment))
    return p


def _c_params(args: argparse.Namespace) -> Any:
    """Return a C MPI's costs on the same network.

    ``--alpha engine``: the costs file's ``mpi_step_s`` and ``c_gamma_s_per_byte`` (each port's step posted as
    it is ready); otherwise this run's ``α`` and ``γ``.
    """
    from dataclasses import replace

    from .params import ALPHA_C

    base = _params(args, 1)
    if args.alpha == "engine":
        from ..engine_costs import load_engine_costs

        c = load_engine_costs()
        alpha = c.mpi_step_s if c.mpi_step_s is not None else ALPHA_C
        gamma = c.c_gamma_s_per_byte if c.c_gamma_s_per_byte is not None else 0.0
        if args.gamma is not None:
            gamma = _gamma(str(args.gamma))
        return replace(base, alpha_s=alpha, gamma_s_per_byte=gamma, cpu="lane", threads=1, gamma_threads=(),
                       segment_bytes=0)
    return replace(base, cpu="lane", threads=1, gamma_threads=(), segment_bytes=0)


def _run_nodes(args: argparse.Namespace, dims: tuple[int, ...], sizes: list[int], algs: list[str], nc: Any) -> int:
    """``--ranks-per-node K`` from 2: every algorithm's forms and a C MPI's node-aware allreduce, per size."""
    from .nodes import simulate_c_node_aware, simulate_forms

    if args.collective != "allreduce" or args.network != "torus" or args.plot:
        print("swing-mpi simulate: --ranks-per-node prices the allreduce on a torus, without --plot", file=sys.stderr)
        return 2
    try:
        c_params = _c_params(args)
    except ValueError as e:
        print(f"swing-mpi simulate: {e}", file=sys.stderr)
        return 2
    k = nc.ranks_per_node
    prog = _Progress((len(algs) + 1) * len(sizes))
    rows_all: list[dict[str, object]] = []
    skipped: set[str] = set()
    for n in sizes:
        rows = []

        def forms_of(a: str, n: int = n) -> Any:
            return simulate_forms(a, dims, n, nc, params_for=lambda cores: _params(args, cores), cores=args.cores,
                                  message_sizes=args.message_sizes)

        for a, forms, seconds in _each(algs, dims, skipped, forms_of):
            rows.extend(forms)
            prog.show(f"{a} {format_size(n)}", seconds)
        t0 = time.perf_counter()
        c = simulate_c_node_aware(dims, n, nc, params=c_params, message_sizes=args.message_sizes)
        prog.show(f"c-node-aware {format_size(n)}", time.perf_counter() - t0)
        if c is not None:
            rows.append(c)
        for r in rows:
            d = r.to_dict()
            rows_all.append(d)
            if args.json:
                print(json.dumps(d, allow_nan=False), flush=True)
        if rows and not args.json:
            print(f"\n== {format_size(n)} allreduce, {k} ranks per node on the torus of nodes "
                  f"{'x'.join(map(str, dims))}, {format_rate(c_params.link_bps)}; node memory "
                  f"{format_byte_rate(nc.memory_bytes_per_s)}, a core's reduction {nc.gamma_s_per_byte:g} s/B; flat: "
                  f"the torus {'x'.join(map(str, dims + (k,)))} (model)")
            print(f"{'form':<14} {'algorithm':<14} {'time':>12} {'node phases':>12} {'among nodes':>12} "
                  f"{'goodput Gb/s':>13}  how")
            for r in sorted(rows, key=lambda r: r.time_s):
                print(f"{r.form:<14} {r.algorithm:<14} {_fmt_time(r.time_s):>12} {_fmt_time(r.node_s):>12} "
                      f"{_fmt_time(r.network_s):>12} {r.goodput_bytes_per_s * 8e-9:>13.2f}  {r.how}", flush=True)
    if not rows_all:
        print("swing-mpi simulate: nothing was simulated", file=sys.stderr)
        return 2
    if args.csv:
        _write_csv(args.csv, rows_all)
    return 0


def _each(algs: list[str], dims: tuple[int, ...], skipped: set[str],
          run: Callable[[str], Any]) -> Iterator[tuple[str, Any, float]]:
    """Yield ``(algorithm, run(algorithm), seconds)`` for every algorithm not in ``skipped``.

    One that raises ``ValueError`` (a schedule with no symmetry, too large to read rank by rank) is
    said on stderr and added to ``skipped``: the next sizes leave it out.
    """
    for a in algs:
        if a in skipped:
            continue
        t0 = time.perf_counter()
        try:
            out = run(a)
        except ValueError as e:
            print(f"swing-mpi simulate: skipping {a} on {'x'.join(map(str, dims))}: {e}", file=sys.stderr)
            skipped.add(a)
            continue
        yield a, out, time.perf_counter() - t0


def _write_csv(path: str, rows: list[dict[str, object]]) -> None:
    """Write ``rows`` to ``path`` as CSV, the columns every key in the order first met."""
    names: list[str] = []
    for d in rows:
        names.extend(key for key in d if key not in names)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}", file=sys.stderr)


def _gamma(text: str) -> float:
    """``--gamma``: seconds per byte, or ``c``: the costs file's ``c_gamma_s_per_byte``."""
    if text.strip() == "c":
        from ..engine_costs import load_engine_costs
        from .params import PresetError

        try:
            c = load_engine_costs().c_gamma_s_per_byte
        except ValueError as e:
            raise PresetError(str(e)) from None
        if c is None:
            raise ValueError("--gamma c: the engine's costs file has no c_gamma_s_per_byte (run swing-mpi probe)")
        return c
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"--gamma must be seconds per byte or c, got {text!r}") from None


def _algorithms(spec: str, collective: str) -> list[str]:
    names = list(ALGORITHMS) if spec.strip() == "all" else [a.strip() for a in spec.split(",") if a.strip()]
    bad = [a for a in names if a not in ALGORITHMS]
    if bad:
        raise ValueError(f"unknown algorithm {', '.join(bad)}; known: {', '.join(ALGORITHMS)}, or all")
    if collective != "allreduce":
        skip = [a for a in names if collective not in ALGORITHMS[a].collectives]
        if skip and spec.strip() != "all":
            raise ValueError(f"{', '.join(skip)} has no {collective}; algorithms that have one: "
                             + ", ".join(a for a, i in ALGORITHMS.items() if collective in i.collectives))
        names = [a for a in names if a not in skip]
    if not names:
        raise ValueError("no algorithm to simulate")
    return names


def _table(rows: list[Any]) -> str:
    best = {r.algorithm: r.time_s for r in rows}
    lines = [f"{'algorithm':<16} {'time':>12} {'goodput Gb/s':>13} {'% peak':>7} {'vs best other':>13}"]
    for r in sorted(rows, key=lambda r: r.time_s):
        others = [t for a, t in best.items() if a != r.algorithm]
        sp = f"{min(others) / r.time_s:.2f}x" if others and r.time_s > 0 else "-"
        lines.append(f"{r.algorithm:<16} {_fmt_time(r.time_s):>12} {r.goodput_bytes_per_s * 8e-9:>13.2f} "
                     f"{100 * r.peak_fraction:>6.1f}% {sp:>13}")
    return "\n".join(lines)


def _fmt_time(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.3f} µs"


class _Progress:
    """One line on stderr, rewritten in place on a terminal; elsewhere a line per slow point."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.t0 = total, 0, time.perf_counter()
        self.tty = sys.stderr.isatty()

    def show(self, what: str, wall: float) -> None:
        self.done += 1
        msg = f"simulate: [{self.done}/{self.total}] {what} ({wall:.1f} s, {time.perf_counter() - self.t0:.0f} s total)"
        if self.tty:
            end = "\n" if self.done == self.total else ""
            print(f"\r\033[K{msg}", end=end, file=sys.stderr, flush=True)
        elif wall > 5:
            print(msg, file=sys.stderr, flush=True)


SLOW_SIMGRID_NODES = 4096
"""From this many nodes, SimGrid before 3.34 is told to be slow (32x32: seconds; 64x64: minutes)."""


def slow_simgrid(version: str, nodes: int) -> str | None:
    """Say why a run of ``nodes`` nodes will be slow on this SimGrid (``"SimGrid 3.32.0"``), or None."""
    from .sgload import version_tuple

    v = version_tuple(version)
    if v == (0, 0) or v >= (3, 34) or nodes < SLOW_SIMGRID_NODES:
        return None
    return (f"{version} ends each transfer in time proportional to all transfers in flight, so {nodes} nodes "
            f"take minutes a point or more; SimGrid 3.35 is 14 times faster at 64x64: scripts/setup.sh builds it where "
            f"it can (cmake, a C++ compiler, Boost and pybind11 headers), or run scripts/build_simgrid.sh to see "
            f"why it cannot (docs/netsim.md)")


def run(args: argparse.Namespace) -> int:
    """Run ``swing-mpi simulate``; return the exit status."""
    from .params import PresetError
    from .sgload import simgrid_available

    try:
        dims = parse_dims(args.dims)
        sizes = parse_sizes(args.sizes)
        params = _params(args)
        algs = _algorithms(args.algorithms, args.collective)
        require_two_nodes(dims)
        nc = node_costs_from_args(args, params.itemsize)
    except (ValueError, PresetError) as e:
        print(f"swing-mpi simulate: {e}", file=sys.stderr)
        return 2
    if not sizes:
        print("swing-mpi simulate: no sizes given", file=sys.stderr)
        return 2
    bad = [s for s in sizes if s % params.itemsize]
    if bad:
        print(f"swing-mpi simulate: sizes must be whole {params.itemsize}-byte elements: "
              + ", ".join(map(str, bad)), file=sys.stderr)
        return 2
    ok, why = simgrid_available()
    if not ok:
        print(f"swing-mpi simulate: {why}", file=sys.stderr)
        return 2
    slow = slow_simgrid(why, math.prod(dims))
    if slow:
        print(f"swing-mpi simulate: note: {slow}", file=sys.stderr)
    if nc.ranks_per_node > 1:
        return _run_nodes(args, dims, sizes, algs, nc)
    from .run import simulate

    prog = _Progress(len(algs) * len(sizes))
    results = []
    csv_rows: list[dict[str, object]] = []
    skipped: set[str] = set()
    for n in sizes:
        rows = []

        def simulated(a: str, n: int = n) -> Any:
            return simulate(a, dims, n, params=params, collective=args.collective, message_sizes=args.message_sizes)

        for a, r, _ in _each(algs, dims, skipped, simulated):
            prog.show(f"{a} {format_size(n)}", r.wall_s)
            rows.append(r)
            d = r.to_dict()
            csv_rows.append(d)
            if args.json:
                print(json.dumps(d, allow_nan=False), flush=True)
        results.extend(rows)
        if rows and not args.json:
            print(f"\n== {format_size(n)} {args.collective} on {params.network} {'x'.join(map(str, dims))}, "
                  f"{format_rate(params.link_bps)}, alpha {format_time(params.alpha_s)}, "
                  f"gamma {params.gamma_s_per_byte:g} s/B"
                  + (f", {params.threads} threads, segments {format_size(params.segment_bytes)}"
                     if params.threads > 1 else "") + f", lanes: {params.cpu}")
            print(_table(rows), flush=True)
    if not results:
        print("swing-mpi simulate: nothing was simulated", file=sys.stderr)
        return 2
    if args.csv:
        _write_csv(args.csv, csv_rows)
    if args.plot:
        from .plot import plot_goodput

        try:
            plot_goodput(results, args.plot)
        except RuntimeError as e:
            print(f"swing-mpi simulate: {e}", file=sys.stderr)
            return 2
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run as a script."""
    parser = Parser(prog="swing-mpi simulate", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
