"""``swing-mpi model``: Λ, Ψ, Ξ, times and crossovers from the generated schedules.

Examples::

    swing-mpi model                                   # 64x64, 400 Gb/s, α = 1.5 µs, all algorithms
    swing-mpi model --dims 16x16x16 -a swing-bw,rabenseifner --json
    swing-mpi model --dims 4x4 --link 40M --size 4MiB   # the emulated torus lab
    swing-mpi model --plot goodput.png --figure1 fig1.png
    swing-mpi model --dims 16x16 --ranks-per-node 48 -a swing-bw,swing-lat   # nodes of 48 ranks: four forms
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from ..cliargs import Parser, add_collective, deprecated, split_names
from ..schedule import ALGORITHMS
from ..topology import parse_dims, require_two_nodes
from ..units import RATE_HELP, SIZE_HELP, TIME_HELP, format_size, format_time, parse_rate, parse_size, parse_time
from .cost import (
    CONGESTION,
    DEFAULT_ALPHA,
    PARTS,
    ModelResult,
    analyze,
    crossovers,
    default_sizes,
    rectangular_penalty,
)
from .node_phases import (
    FORMS,
    add_node_arguments,
    format_byte_rate,
    model_c_node_aware,
    model_forms,
    node_costs_from_args,
)
from .routing import SYMMETRIES

__all__ = ["add_arguments", "run", "main"]

DEFAULT_DIMS = "64x64"
DEFAULT_LINK = "400G"
DEFAULT_ALPHA_TEXT = f"{DEFAULT_ALPHA * 1e6:g}us"


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``model`` options to ``parser`` (for the main CLI's subcommand)."""
    parser.add_argument("--dims", default=None, help=f"torus sides, e.g. 64x64 or 16x16x16 (default {DEFAULT_DIMS})")
    parser.add_argument("-a", "--algorithms", "--algorithm", dest="algorithm", action="append", default=None,
                        metavar="NAME[,NAME...]",
                        help="algorithm(s), a comma list or repeated (default: every registered one: "
                             + ", ".join(ALGORITHMS) + ")")
    parser.add_argument("--link", default=DEFAULT_LINK, metavar="RATE",
                        help=f"link rate per direction, {RATE_HELP} (default {DEFAULT_LINK}; a lab: 40M)")
    deprecated(parser, "--link-gbps", dest="link", new="--link", convert=lambda v: f"{v}G")
    deprecated(parser, "--link-mbps", dest="link", new="--link", convert=lambda v: f"{v}M")
    parser.add_argument("--alpha", default=DEFAULT_ALPHA_TEXT, metavar="TIME",
                        help=f"per-step latency alpha, {TIME_HELP} (default {DEFAULT_ALPHA_TEXT})")
    deprecated(parser, "--alpha-us", dest="alpha", new="--alpha", convert=lambda v: f"{v}us")
    add_collective(parser, choices=PARTS,
                   help="the allreduce (default), or one of its halves as its own collective (algorithms that have "
                        "it)")
    parser.add_argument("--size", default=None, help=f"predict one vector size in {SIZE_HELP}, e.g. 4M, 32, 1G")
    parser.add_argument("--congestion", choices=CONGESTION, default="routed",
                        help="busiest-link load: routed (every message routed, default) or distance "
                             "(the paper's proxy: peer distance)")
    parser.add_argument("--json", action="store_true", help="one JSON object per algorithm, one per line")
    parser.add_argument("--plot", metavar="FILE.png", default=None, help="goodput against size (needs matplotlib)")
    parser.add_argument("--figure1", metavar="FILE.png", default=None,
                        help="busiest-link load per step, 16-node ring, Swing vs recursive doubling (the paper's "
                             "Figure 1: fixed, whatever --dims and -a say)")
    parser.add_argument("--eq3", action="store_true",
                        help="also print rectangular tori 64x16, 128x8, 256x4 beside the paper's Eq. 3")
    parser.add_argument("--symmetry", choices=SYMMETRIES, default="auto",
                        help="how ranks are covered (auto: symmetric shortcut if verified, else every rank)")
    add_node_arguments(parser)
    return parser


def _algorithms(spec: Sequence[str] | None) -> list[str]:
    return split_names(spec) or list(ALGORITHMS)


def _rate_text(bps: float) -> str:
    bits = bps * 8
    return f"{bits / 1e9:.4g} Gb/s" if bits >= 1e9 else f"{bits / 1e6:.4g} Mb/s"


def _crossover_text(x: float | None) -> str:
    """``never``, ``at every size`` or ``at SIZE (bytes)``."""
    if x is None:
        return "never"
    if x == 0:
        return "at every size"
    return f"at {format_size(x)} ({x:.4g} B)"


def _jsonable(c: dict) -> dict:
    out = dict(c)
    out["fastest"] = [{"size": n, "algorithm": a} for n, a in c["fastest"]]
    out["fastest_ranges"] = [{"from": a, "to": b, "algorithm": n} for a, b, n in c["fastest_ranges"]]
    return out


def run(args: argparse.Namespace) -> int:
    """Run the ``model`` subcommand; returns the exit status."""
    try:
        dims = parse_dims(args.dims or DEFAULT_DIMS)
        size = parse_size(args.size) if args.size is not None else None
        require_two_nodes(dims)
        rate = parse_rate(args.link, "--link") / 8
        alpha = parse_time(args.alpha, "--alpha")
        nc = node_costs_from_args(args)
        if nc.ranks_per_node > 1 and args.collective != "allreduce":
            raise ValueError("--ranks-per-node prices the allreduce only")
    except ValueError as e:
        print(f"swing-mpi model: {e}", file=sys.stderr)
        return 2
    if args.figure1 and (args.dims or args.algorithm):
        print("swing-mpi model: note: --figure1 draws the paper's Figure 1 (a 16-node ring, rabenseifner and "
              "swing-bw-1port) whatever --dims and -a say; they apply to the table only", file=sys.stderr)
    kw = dict(alpha=alpha, link_bytes_per_s=rate, congestion=args.congestion)
    results: list[ModelResult] = []
    names = _algorithms(args.algorithm)
    if args.collective != "allreduce" and not args.algorithm:
        names = [n for n in names if args.collective in ALGORITHMS[n].collectives]
    for name in names:
        if name not in ALGORITHMS:
            print(f"swing-mpi model: unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}",
                  file=sys.stderr)
            return 2
        try:
            results.append(analyze(name, dims, symmetry=args.symmetry, part=args.collective))
        except Exception as e:  # one algorithm that cannot run on these dims does not stop the rest
            print(f"swing-mpi model: skipping {name} on {'x'.join(map(str, dims))}: {e}", file=sys.stderr)
    if not results:
        print("swing-mpi model: no algorithm could be modelled", file=sys.stderr)
        return 1
    sizes = default_sizes()
    cross: dict[str, Any] = crossovers(results, sizes=sizes, **kw)
    node_sizes = [size] if size is not None else list(NODE_SIZES)
    p = math.prod(dims)
    D = results[0].D

    if args.json:
        cj = _jsonable(cross)
        for r in results:
            obj = r.to_dict()
            obj.update({"alpha": alpha, "link_bytes_per_s": rate, "congestion": args.congestion,
                        "peak_goodput_bytes_per_s": D * rate * (1 if args.collective == "allreduce" else 2),
                        "ceiling": r.ceiling(args.congestion)})
            if size is not None:
                obj.update({"size": size, "time_s": r.time(size, **kw), "goodput_bytes_per_s": r.goodput(size, **kw)})
            if nc.ranks_per_node > 1:
                obj.update(nc.to_dict())
                obj["nodes"] = [{**model_forms(r.algorithm, dims, n, nc, **kw),
                                 **model_c_node_aware(dims, n, nc, **kw)} for n in node_sizes]
            obj["crossovers"] = cj
            print(json.dumps(obj, allow_nan=False))
    else:
        peak = D * rate * (1 if args.collective == "allreduce" else 2)
        print(f"model: {args.collective} on a {'x'.join(map(str, dims))} torus, p = {p}, D = {D}; links "
              f"{_rate_text(rate)} (peak {args.collective} goodput {_rate_text(peak)}); alpha = {format_time(alpha)}; "
              f"time uses {args.congestion} congestion")
        head = f"{'algorithm':<18}{'steps':>7}{'Λ':>9}{'Ψ':>8}{'Ξ dist':>8}{'Ξ routed':>9}{'ceiling':>9}"
        if size is not None:
            head += f"{'T(' + format_size(size) + ')':>15}{'goodput':>15}"
        head += "  cover"
        print(head)
        for r in results:
            line = (f"{r.algorithm:<18}{r.K:>7}{r.Lambda:>9.3f}{r.Psi:>8.3f}{r.Xi_distance:>8.3f}"
                    f"{r.Xi_routed:>9.3f}{100 * r.ceiling(args.congestion):>8.1f}%")
            if size is not None:
                t = r.time(size, **kw)
                line += f"{_time_text(t):>15}{_rate_text(size / t):>15}"
            line += f"  {r.symmetry} ({r.built} schedules, {r.seconds:.2f} s)"
            print(line)
        print()
        print("fastest: " + "; ".join(
            f"{format_size(a)}" + (f"–{format_size(b)}" if b != a else "") + f" {n}"
            for a, b, n in cross["fastest_ranges"]))
        if cross["swing_bw"]:
            sb = cross["swing_bw"]
            print(f"Swing (B): Ξ = {sb['Xi']:.3f}, Ψ = {sb['Psi']:.3f}, ceiling 1/(ΨΞ) = "
                  f"{100 * sb['ceiling']:.1f}% of peak")
        if "swing-lat" in {r.algorithm for r in results} and cross["swing_bw"]:
            print(f"Swing (L) → (B) {_crossover_text(cross['lat_to_bw'])}")
        for name, x in cross["passes_swing_bw"].items():
            print(f"{name} passes Swing (B) {_crossover_text(x)}")
        if cross["swing_bw"] and not cross["passes_swing_bw"]:
            print("bucket / ring: not among the algorithms modelled (-a), no crossover to report")
        for form, x in cross["swing_passes_trivance"].items():
            print(f"Swing ({form[0].upper()}) passes Trivance ({form[0].upper()}) {_crossover_text(x)}")
    if nc.ranks_per_node > 1 and not args.json:
        _print_nodes(results, dims, node_sizes, nc, kw)
    if args.eq3:
        rows: list[dict[str, Any]] = rectangular_penalty()
        if args.json:
            for row in rows:
                print(json.dumps({"eq3": row}, allow_nan=False))
        else:
            print()
            print("rectangular tori (swing-bw, distance proxy), 1024 nodes; ΨΞ in units of (n/D)β")
            print(f"{'dims':<8}{'ΨΞ':>8}{'vs ' + str(rows[0].get('square', '')):>10}{'extra':>8}"
                  f"{'shared ports':>14}{'÷2':>8}{'Eq. 3':>8}")
            for row in rows:
                print(f"{row['dims']:<8}{row['PsiXi']:>8.3f}{row.get('Xi_square', float('nan')):>10.3f}"
                      f"{row.get('extra_vs_square', float('nan')):>8.3f}{row['shared_ports']:>14.3f}"
                      f"{row['shared_ports'] / 2:>8.3f}{row['eq3']:>8.3f}")
    try:
        if args.plot:
            from .plot import plot_goodput
            plot_goodput(results, args.plot, sizes=sizes, **kw)
            print(f"wrote {args.plot}", file=sys.stderr)
        if args.figure1:
            from .plot import plot_figure1
            missing = [a for a in ("rabenseifner", "swing-bw-1port") if a not in ALGORITHMS]
            if missing:
                print(f"swing-mpi model: --figure1 needs {', '.join(missing)} (not registered)", file=sys.stderr)
                return 1
            plot_figure1(args.figure1)
            print(f"wrote {args.figure1}", file=sys.stderr)
    except RuntimeError as e:
        print(f"swing-mpi model: {e}", file=sys.stderr)
        return 1
    return 0


NODE_SIZES = (32, 32 << 10, 2 << 20, 512 << 20)
"""Sizes the node-aware table shows where ``--size`` names none."""


def _print_nodes(results: list[ModelResult], dims: tuple[int, ...], sizes: list[int], nc: Any,
                 kw: dict[str, Any]) -> None:
    """Print the four forms of every algorithm at ``sizes``, with ``nc.ranks_per_node`` ranks per node."""
    k = nc.ranks_per_node
    print()
    print(f"{k} ranks per node on the torus of nodes {'x'.join(map(str, dims))}: node memory "
          f"{format_byte_rate(nc.memory_bytes_per_s)}, a core's reduction {nc.gamma_s_per_byte:g} s/B (C's "
          f"{nc.c_gamma_s_per_byte:g}), barrier round {format_time(nc.sync_s)}; flat is the torus "
          f"{'x'.join(map(str, dims + (k,)))}, its last dimension shared memory")
    print(f"{'size':>8}  {'algorithm':<28}" + "".join(f"{f:>15}" for f in FORMS[:3]) + f"{'node phases':>13}")
    print("(c-node-aware: a C MPI's single leader, its best algorithm among nodes; node phases: of the first "
          "column's form)")
    for n in sizes:
        c = model_c_node_aware(dims, n, nc, **kw)
        for r in results:
            f = model_forms(r.algorithm, dims, n, nc, **kw)
            cells = [f["multi_leader_s"], f["single_leader_s"], f["flat_s"]]
            print(f"{format_size(n):>8}  {r.algorithm:<28}"
                  + "".join(f"{'-' if v is None else _time_text(float(v)):>15}" for v in cells)  # type: ignore[arg-type]
                  + f"{_time_text(float(f['multi_leader_node_s'])):>13}")  # type: ignore[arg-type]
        if c["c_node_aware_s"] is not None:  # a single leader: its time in that column
            print(f"{format_size(n):>8}  {FORMS[3] + ' (' + str(c['c_algorithm']) + ')':<43}"
                  f"{_time_text(float(c['c_node_aware_s'])):>15}{'-':>15}"  # type: ignore[arg-type]
                  f"{_time_text(float(c['c_node_s'])):>13}")  # type: ignore[arg-type]


def _time_text(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} µs"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``swing-mpi model`` with ``argv`` (``python -m swing_mpi.model.cli``)."""
    parser = Parser(prog="swing-mpi model", description=__doc__.split("\n")[0])
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except BrokenPipeError:  # e.g. piped into head
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
