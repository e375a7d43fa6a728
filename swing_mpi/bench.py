"""``swing-mpi bench``: allreduce algorithms against ``MPI_Allreduce``, side by side.

Run under mpiexec, one process per rank::

    mpiexec -n 4 python -m mpi4py -m swing_mpi bench --quick
    mpiexec -n 16 python -m mpi4py -m swing_mpi bench --dims 4x4 --sizes 8:16M \\
        --csv out.csv --json out.json --plot out.png

Measurement (OSU / nccl-tests style). Sizes are the outer loop. For each
size, every algorithm gets one checked call and ``--warmup`` calls, then the
timed calls run round robin (iteration ``i`` of every algorithm, then
``i+1``; ``--blocked`` for one algorithm after the other), so machine noise
hits all algorithms of a size alike. Each algorithm has its own send and
receive arrays up to 1 MiB, as each call site of an application has. Each
timed call is bracketed by ``comm.Barrier()``; an iteration's time is the
maximum over ranks (the local times are reduced with MAX after the loop).
``iters`` shrinks for large or slow points (at most ``--max-bytes`` moved and
about ``--max-time`` seconds per point, estimated from the warmup; never below
3 unless ``--iters`` is lower). Reported: avg/min/max/median time, ``algbw = S/t`` and
``busbw = algbw·2(p−1)/p`` on the median (nccl-tests), the ratio of the
median to ``native``'s at the same size, and ``#wrong``.

Validation: inputs differ per rank (seeded random numbers); the checked call
is compared with ``comm.Allreduce`` on the same input (exact for integers and
exact ops, a relative tolerance of ``8·p·eps`` for floating-point SUM/PROD on
positive data) and with rank 0's result bit for bit; ``#wrong`` is the number
of wrong elements summed over ranks (a modified send buffer counts too).

``native`` is ``comm.Allreduce`` itself (mpi4py → ``MPI_Allreduce``); MPICH's
algorithm is chosen at ``MPI_Init`` from ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM``,
so one launch measures one MPICH algorithm: ``benchmarks/sweep.py`` launches
one run per forced algorithm and merges them (``--label mpich-ring`` names
the native rows of such a run).

This module imports MPI only inside :func:`run`: parsing, formatting and
plotting work without it.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import platform
import re
import shlex
import socket
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .schedule import AUTO, NATIVE
from .units import format_size, parse_size, parse_sizes, short_size

__all__ = [
    "add_arguments", "run", "main", "build_parser",
    "parse_size", "parse_sizes", "format_size", "parse_algorithms", "iterations_for",
    "QUICK_SIZES", "DTYPES", "OPS", "FIELDS",
    "format_header", "format_row", "format_table", "write_csv", "write_json", "read_results",
    "add_vs_native", "model_algorithm", "add_model_times", "plot_results",
]

QUICK_SIZES = "8,1K,32K,1M"
"""``--quick``: a few sizes up to 1 MiB."""

DEFAULT_SIZES = "8:1M"
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 3
DEFAULT_MAX_BYTES = 256 << 20
DEFAULT_MAX_TIME = 5.0
MIN_ITERS = 3

DTYPES = ("float64", "float32", "int64", "int32", "uint8", "complex128")
OPS = ("sum", "prod", "max", "min", "band", "bor", "bxor")
_ITEMSIZE = {"float64": 8, "float32": 4, "int64": 8, "int32": 4, "uint8": 1, "complex128": 16}

#: MPICH algorithm (``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM``) -> our schedule with the same
#: peers and sizes, for the model line of a forced native run.
MPICH_EQUIVALENT = {"ring": "ring", "recursive_doubling": "recdoub"}

#: Every row of the CSV/JSON output, in this order.
FIELDS = (
    "size", "count", "type", "redop", "algorithm", "label", "resolved", "place", "p", "dims",
    "mpich_algorithm", "iters", "warmup", "time_avg_us", "time_min_us", "time_max_us",
    "time_median_us", "algbw_Bps", "busbw_Bps", "vs_native", "wrong", "model_us",
)

# -- algorithms, iterations ----------------------------------------------------------

def registered_algorithms() -> tuple[str, ...]:
    """Our algorithms, read from the registry at run time (no MPI import)."""
    from .schedule import ALGORITHMS
    return tuple(ALGORITHMS)


def parse_algorithms(spec: str | None, known: Sequence[str] | None = None) -> list[str]:
    """``"native,swing-bw,auto"`` → a list; ``None``/``"all"`` → ``native`` + every registered one.

    ``all`` may appear inside a list (``auto,all``). Unknown names raise ``ValueError``.
    """
    known = tuple(registered_algorithms() if known is None else known)
    every = [NATIVE] + [a for a in known if a not in (NATIVE, AUTO)]
    if spec is None or not str(spec).strip():
        return every
    out: list[str] = []
    for name in str(spec).split(","):
        name = name.strip()
        if not name:
            continue
        names = every if name == "all" else [name]
        for n in names:
            if n not in (NATIVE, AUTO) and n not in known:
                raise ValueError(f"unknown algorithm {n!r}; known: {', '.join((AUTO, NATIVE) + known)}, all")
            if n not in out:
                out.append(n)
    if not out:
        raise ValueError(f"no algorithms in {spec!r}")
    return out


def iterations_for(nbytes: int, iters: int, *, max_bytes: int | None = DEFAULT_MAX_BYTES,
                   min_iters: int = MIN_ITERS, seconds_per_call: float | None = None,
                   max_time: float | None = None) -> int:
    """Timed iterations for one point: ``iters``, fewer for large or slow points.

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


# -- the argument parser -----------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``swing-mpi bench`` (and ``benchmarks/allreduce.py``)."""
    g = parser.add_argument_group("what to measure")
    g.add_argument("--sizes", "-m", default=None, metavar="MIN:MAX",
                   help="message sizes in bytes: MIN:MAX (powers of two between), MIN:MAX:FACTOR, "
                   f"or a comma list; K/M/G suffixes are binary (default {DEFAULT_SIZES})")
    g.add_argument("--algorithms", "-a", default=None, metavar="LIST",
                   help="comma list of algorithms: native, auto, registered names, or all "
                   "(default: native and every registered algorithm)")
    g.add_argument("--dims", default=None, help="torus dims passed to allreduce, e.g. 4x4 "
                   "(default: $SWING_MPI_DIMS or a ring of all ranks)")
    g.add_argument("--dtype", "-d", default="float64", choices=DTYPES)
    g.add_argument("--op", "-o", default="sum", choices=OPS)
    g.add_argument("--warmup", "-x", type=int, default=None, help=f"untimed calls per point (default {DEFAULT_WARMUP})")
    g.add_argument("--iters", "-i", type=int, default=None, help=f"timed calls per point (default {DEFAULT_ITERS})")
    g.add_argument("--max-bytes", default=None, metavar="SIZE",
                   help=f"fewer iterations for large sizes: at most SIZE bytes per point "
                   f"(default {format_size(DEFAULT_MAX_BYTES).replace(' ', '')}; 0: no cap); at least {MIN_ITERS} iterations")
    g.add_argument("--max-time", type=float, default=None, metavar="SECONDS",
                   help=f"fewer iterations for slow points: about SECONDS per point, estimated from the "
                   f"warmup (default {DEFAULT_MAX_TIME:g}; 0: no cap); at least {MIN_ITERS} iterations")
    place = g.add_mutually_exclusive_group()
    place.add_argument("--inplace", action="store_true", help="in-place only (MPI.IN_PLACE)")
    place.add_argument("--both", action="store_true", help="out-of-place and in-place")
    g.add_argument("--blocked", action="store_true",
                   help="time all iterations of one algorithm before the next (OSU style) instead of "
                   "round robin over the algorithms of a size")
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
    o.add_argument("--bw-unit", choices=("GB", "MB"), default="GB", help="bandwidth unit of the table (default GB: 1e9 B/s)")
    o.add_argument("--model-link-mbps", type=float, default=None, metavar="R",
                   help="draw the cost model dashed (swing_mpi.model): link rate R Mbit/s per direction")
    o.add_argument("--model-alpha-us", type=float, default=None, metavar="A",
                   help="model latency per step in microseconds (default 0 with --model-link-mbps)")
    o.add_argument("--model-congestion", choices=("routed", "distance"), default="routed", help=argparse.SUPPRESS)
    o.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")


def build_parser(prog: str = "swing-mpi bench") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=(__doc__ or "").splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return p


class Config:
    """The parsed options with defaults (``--quick``) applied; pure data."""

    def __init__(self, args: argparse.Namespace) -> None:
        quick = bool(getattr(args, "quick", False))
        self.sizes = parse_sizes(args.sizes if args.sizes else (QUICK_SIZES if quick else DEFAULT_SIZES))
        self.algorithms = parse_algorithms(args.algorithms)
        self.dims = args.dims
        self.dtype = args.dtype
        self.op = args.op
        self.warmup = args.warmup if args.warmup is not None else (2 if quick else DEFAULT_WARMUP)
        self.iters = args.iters if args.iters is not None else (10 if quick else DEFAULT_ITERS)
        if self.iters < 1 or self.warmup < 0:
            raise ValueError("--iters must be >= 1 and --warmup >= 0")
        self.max_bytes = parse_size(args.max_bytes) if args.max_bytes is not None else DEFAULT_MAX_BYTES
        self.max_time = args.max_time if args.max_time is not None else DEFAULT_MAX_TIME
        self.places = ["out", "in"] if args.both else (["in"] if args.inplace else ["out"])
        self.check = not args.no_check
        self.interleave = not getattr(args, "blocked", False)
        self.seed = args.seed
        self.label = args.label
        self.csv = args.csv
        self.json = args.json
        self.plot = args.plot
        self.bw_unit = args.bw_unit
        self.model_rate = args.model_link_mbps
        self.model_alpha = args.model_alpha_us
        self.model_congestion = getattr(args, "model_congestion", "routed")
        self.quiet = args.quiet
        # what is really sent: whole elements, at least one (8 B of float64 for --sizes 1:8)
        isz = _ITEMSIZE[self.dtype]
        self.sizes = sorted({max(1, n // isz) * isz for n in self.sizes})
        if self.dtype == "complex128" and self.op in ("max", "min"):
            raise ValueError("max/min are not defined for complex numbers")
        if self.op in ("band", "bor", "bxor") and not self.dtype.startswith(("int", "uint")):
            raise ValueError(f"--op {self.op} needs an integer --dtype")

    def model_params(self) -> dict[str, float] | None:
        if self.model_rate is None:
            return None
        return {"link_bytes_per_s": self.model_rate * 1e6 / 8,
                "alpha": (self.model_alpha or 0.0) / 1e6, "congestion": self.model_congestion}


# -- table -------------------------------------------------------------------------------

_BW = {"GB": 1e9, "MB": 1e6}


def format_header(bw_unit: str = "GB") -> str:
    """The two column-title lines of the table (``#``-prefixed, nccl-tests style)."""
    u = f"{bw_unit}/s"
    top = (f"#{'':>11} {'':>10} {'':>10} {'':>5} {'':<30} {'':>5} {'':>5} |"
           f"{'time (us)':^48}| {'bandwidth (' + u + ')':^21} |{'':>10} {'':>6}")
    cols = (f"#{'size':>11} {'count':>10} {'type':>10} {'redop':>5} {'algorithm':<30} {'place':>5} {'iters':>5} |"
            f"{'avg':>11} {'min':>11} {'max':>11} {'median':>11}  | {'algbw':>9} {'busbw':>10}  |"
            f"{'vs_native':>10} {'#wrong':>6}")
    return top + "\n" + cols


def _num(x: Any) -> float | None:
    if x is None or x == "":
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def _t(us: Any) -> str:
    v = _num(us)
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 1e5 else f"{v:.4g}"


def _bw(bps: Any, unit: str) -> str:
    v = _num(bps)
    if v is None:
        return "-"
    v /= _BW[unit]
    return f"{v:.4f}" if v < 10 else (f"{v:.2f}" if v < 1e4 else f"{v:.4g}")


def display_name(row: Mapping[str, Any]) -> str:
    """``label``, with what ``auto`` ran: ``auto:swing-lat``."""
    name = str(row.get("label") or row.get("algorithm"))
    if row.get("algorithm") == AUTO and row.get("resolved") and row.get("resolved") != AUTO:
        name = f"{name}:{row['resolved']}"
    return name


def format_row(row: Mapping[str, Any], bw_unit: str = "GB") -> str:
    """One data line of the table."""
    vs = _num(row.get("vs_native"))
    wrong = row.get("wrong")
    wrong_s = "-" if wrong is None or wrong == "" or int(float(wrong)) < 0 else str(int(float(wrong)))
    return (f" {int(float(row['size'])):>11} {int(float(row['count'])):>10} {row['type']:>10} {row['redop']:>5} "
            f"{display_name(row):<30} {row['place']:>5} {int(float(row['iters'])):>5} |"
            f"{_t(row.get('time_avg_us')):>11} {_t(row.get('time_min_us')):>11} {_t(row.get('time_max_us')):>11} "
            f"{_t(row.get('time_median_us')):>11}  | {_bw(row.get('algbw_Bps'), bw_unit):>9} "
            f"{_bw(row.get('busbw_Bps'), bw_unit):>10}  |{'-' if vs is None else f'{vs:.3f}':>10} {wrong_s:>6}")


def format_table(rows: Iterable[Mapping[str, Any]], bw_unit: str = "GB") -> str:
    """Header and one line per row; a blank comment line between sizes."""
    out = [format_header(bw_unit)]
    last = None
    for r in rows:
        if last is not None and r["size"] != last:
            out.append("#")
        last = r["size"]
        out.append(format_row(r, bw_unit))
    return "\n".join(out)


def env_header_lines(env: Mapping[str, Any]) -> list[str]:
    """The ``#`` header block printed above the table."""
    lines = [
        f"# swing-mpi bench: allreduce, p={env['p']}, dims={env['dims']} ({env['dims_source']}), "
        f"type={env['dtype']}, redop={env['op']}",
        f"# MPI: {env['mpi_library']}",
        f"# native: {env['native_desc']}",
        f"# iterations: {env['iters']} timed (at most {format_size(env['max_bytes']) if env['max_bytes'] else 'no cap'}"
        f" and ~{env['max_time']:g} s per point, at least {min(MIN_ITERS, env['iters'])}), {env['warmup']} warmup, "
        f"{'round robin over the algorithms of a size' if env.get('interleave', True) else 'one algorithm after the other'};"
        f" time = max over ranks per iteration; busbw = algbw*2(p-1)/p; vs_native = median/native median",
        f"# check: {'against comm.Allreduce and rank 0, #wrong = wrong elements over all ranks' if env['check'] else 'off'}",
        f"# algorithms: {', '.join(env['algorithms'])}",
        f"# host: {env['host']} ({env.get('cpus')} cpus, load {env.get('loadavg')} at start)  date: {env['date']}  python {env['python']}  numpy {env['numpy']}  "
        f"mpi4py {env['mpi4py']}  swing_mpi {env['swing_mpi']}",
        f"# command: {env['command']}",
    ]
    return lines


# -- output files ----------------------------------------------------------------------

def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return v


def write_csv(rows: Sequence[Mapping[str, Any]], path: str, fields: Sequence[str] = FIELDS) -> None:
    """Rows as CSV with the columns ``fields`` (extra keys are kept after them)."""
    extra = []
    for r in rows:
        for k in r:
            if k not in fields and k not in extra and k != "times_us":
                extra.append(k)
    _mkdir_for(path)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fields) + extra, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _csv_value(r.get(k)) for k in list(fields) + extra})


def write_json(path: str, env: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], **extra: Any) -> None:
    _mkdir_for(path)
    with open(path, "w") as f:
        json.dump({"env": env, "rows": list(rows), **extra}, f, indent=1)
        f.write("\n")


def _mkdir_for(path: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)


_INT_FIELDS = ("size", "count", "p", "iters", "warmup", "wrong")
_FLOAT_FIELDS = ("time_avg_us", "time_min_us", "time_max_us", "time_median_us", "algbw_Bps", "busbw_Bps",
                 "vs_native", "model_us")


def read_results(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(env, rows)`` from a JSON written by :func:`write_json` or a CSV by :func:`write_csv`."""
    if path.endswith(".json"):
        with open(path) as f:
            data = json.load(f)
        return dict(data.get("env", {})), [dict(r) for r in data["rows"]]
    rows: list[dict[str, Any]] = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row: dict[str, Any] = dict(r)
            for k in _INT_FIELDS:
                if row.get(k) not in (None, ""):
                    row[k] = int(float(row[k]))
            for k in _FLOAT_FIELDS:
                row[k] = _num(row.get(k))
            rows.append(row)
    return {}, rows


# -- derived columns: ratio to native, model ---------------------------------------------

def add_vs_native(rows: list[dict[str, Any]], reference: Sequence[Mapping[str, Any]] | None = None) -> None:
    """Set ``vs_native`` = median / native's median at the same size and place.

    ``reference``: the rows whose ``algorithm == "native"`` (and label
    ``native``, if there are several) give the native medians; default ``rows``.
    """
    set_vs_native(rows, native_medians(rows if reference is None else reference))


def native_medians(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[int, str], float | None]:
    """``(size, place)`` → native's median time: the rows labelled ``native`` (MPICH's
    default selection) where there are any, else every ``native`` row (a forced algorithm).
    """
    natives = [r for r in rows if r.get("algorithm") == NATIVE]
    plain = [r for r in natives if (r.get("label") or NATIVE) == NATIVE]
    return {(int(r["size"]), r["place"]): _num(r.get("time_median_us")) for r in (plain or natives)}


def set_vs_native(rows: list[dict[str, Any]], medians: Mapping[tuple[int, str], float | None]) -> None:
    """``vs_native`` = median / ``medians[(size, place)]`` (``None`` where that is unknown)."""
    for r in rows:
        m = medians.get((int(r["size"]), r["place"]))
        t = _num(r.get("time_median_us"))
        r["vs_native"] = (t / m) if (m and t is not None) else None


def model_algorithm(row: Mapping[str, Any], known: Sequence[str] | None = None) -> str | None:
    """Which registered schedule models this row: the algorithm (what ``auto`` ran), or,
    for native runs with a forced MPICH algorithm, the schedule with the same peers.
    """
    known = tuple(registered_algorithms() if known is None else known)
    alg = row.get("algorithm")
    if alg == NATIVE:
        name = MPICH_EQUIVALENT.get(str(row.get("mpich_algorithm") or ""))
    elif alg == AUTO:
        name = row.get("resolved")
    else:
        name = alg
    return name if name in known else None


def add_model_times(rows: list[dict[str, Any]], *, link_bytes_per_s: float, alpha: float = 0.0,
                    congestion: str = "routed", warn=None) -> bool:
    """Fill ``model_us`` from ``swing_mpi.model.predict_time`` where it can; False if the model is missing."""
    try:
        from . import model as _model
    except Exception as e:  # the model is optional
        if warn:
            warn(f"no model lines: swing_mpi.model not importable ({e})")
        return False
    predict = getattr(_model, "predict_time", None)
    if predict is None:
        if warn:
            warn("no model lines: swing_mpi.model has no predict_time")
        return False
    from .topology import parse_dims

    failed = set()
    for r in rows:
        name = model_algorithm(r)
        if name is None or name in failed:
            continue
        try:
            dims = parse_dims(r["dims"])
            t = predict(name, dims, int(r["size"]), alpha=alpha, link_bytes_per_s=link_bytes_per_s,
                        congestion=congestion)
            r["model_us"] = float(t) * 1e6
        except Exception as e:  # one algorithm the model cannot do must not stop the rest
            failed.add(name)
            if warn:
                warn(f"no model line for {name}: {type(e).__name__}: {e}")
    return True


# -- plot ---------------------------------------------------------------------------------

def plot_results(rows: Sequence[Mapping[str, Any]], path: str, *, title: str | None = None,
                 place: str | None = None) -> str:
    """Goodput (algbw) vs size, log-log, one line per algorithm (model dashed where
    ``model_us`` is known), and the time ratio vs native below. Returns ``path``.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    places = {r["place"] for r in rows}
    if place is None:
        place = "out" if "out" in places else sorted(places)[0]
    rows = [r for r in rows if r["place"] == place]
    names: list[str] = []
    for r in rows:
        n = str(r.get("label") or r["algorithm"])
        if n not in names:
            names.append(n)
    peak = max((_num(r.get("algbw_Bps")) or 0.0) for r in rows) if rows else 0.0
    unit, div = ("GB/s", 1e9) if peak >= 1e9 else ("MB/s", 1e6)
    if len(names) <= 10:
        colors = [plt.get_cmap("tab10")(i) for i in range(10)]
    else:  # the 10 strong colours of tab20 first, then their light partners
        colors = [plt.get_cmap("tab20")(i) for i in list(range(0, 20, 2)) + list(range(1, 20, 2))]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 9), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
    any_model = False
    for i, name in enumerate(names):
        rs = sorted((r for r in rows if str(r.get("label") or r["algorithm"]) == name), key=lambda r: int(r["size"]))
        color = colors[i % len(colors)]
        native = rs and rs[0]["algorithm"] == NATIVE
        style = dict(color=color, marker="s" if native else "o", markersize=4,
                     linewidth=2.2 if name == NATIVE else 1.4)
        xs = [int(r["size"]) for r in rs]
        ys = [(_num(r.get("algbw_Bps")) or float("nan")) / div for r in rs]
        label = name
        if rs and rs[0]["algorithm"] == AUTO:
            ran = sorted({str(r.get("resolved")) for r in rs})
            label = f"{name} ({'/'.join(ran)})"
        ax.plot(xs, ys, label=label, **style)
        mx = [(int(r["size"]), _num(r.get("model_us"))) for r in rs]
        mx = [(x, x / (t * 1e-6) / div) for x, t in mx if t]
        if mx:
            any_model = True
            ax.plot([x for x, _ in mx], [y for _, y in mx], linestyle="--", color=color, linewidth=1.0, alpha=0.8)
        vs = [_num(r.get("vs_native")) for r in rs]
        if any(v is not None for v in vs):
            ax2.plot(xs, [float("nan") if v is None else v for v in vs], **style)
    from matplotlib.ticker import NullLocator, ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({int(r["size"]) for r in rows})
    ticks = sizes if len(sizes) <= 14 else sizes[::2]
    ax2.set_xticks(ticks, [short_size(x) for x in ticks])
    ax2.xaxis.set_minor_locator(NullLocator())
    ax.set_ylabel(f"goodput (algbw = size / median time), {unit}")
    ax.grid(True, which="both", alpha=0.3)
    if any_model:
        ax.plot([], [], linestyle="--", color="gray", label="model (dashed)")
    ax.legend(fontsize=8, ncol=2, loc="best")
    ax.set_title(title or "allreduce goodput")
    ax2.axhline(1.0, color="black", linewidth=0.8)
    ax2.set_yscale("log", base=2)
    ax2.yaxis.set_major_formatter(ScalarFormatter())
    ax2.set_ylabel("median time / native median\n(< 1: faster than native)")
    ax2.set_xlabel(f"message size (bytes, {'in-place' if place == 'in' else 'out-of-place'})")
    ax2.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    _mkdir_for(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# -- measurement (MPI from here on) ----------------------------------------------------------

def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _command_line() -> str:
    argv = getattr(sys, "orig_argv", None) or [sys.executable] + sys.argv
    return shlex.join(argv)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "unknown"
    return re.sub(r"\s+", " ", line)


def _environment(comm, cfg: Config, dims: tuple[int, ...], dims_source: str) -> dict[str, Any]:
    import mpi4py
    import numpy as np
    from mpi4py import MPI

    from . import __version__

    lib = MPI.Get_library_version()
    forced = os.environ.get("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM")
    ompi = os.environ.get("OMPI_MCA_coll_tuned_allreduce_algorithm")
    if "MPICH" in lib:
        native_desc = (f"MPICH algorithm {forced!r} (MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM={forced})" if forced
                       else "MPICH's default selection (MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM unset)")
        mpich_alg = forced or "default"
    else:
        native_desc = (f"Open MPI coll_tuned_allreduce_algorithm={ompi}" if ompi else "the library's default selection")
        mpich_alg = ""
    native_desc = f"comm.Allreduce, {native_desc}"
    if cfg.label:
        native_desc += f"; rows labelled {cfg.label!r}"
    relevant = {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("MPIR_CVAR_", "MPICH_", "FI_", "UCX_", "SWING_MPI_", "OMPI_MCA_", "MPIEXEC_TIMEOUT"))}
    return {
        "p": comm.Get_size(),
        "dims": "x".join(map(str, dims)),
        "dims_source": dims_source,
        "dtype": cfg.dtype,
        "op": cfg.op,
        "mpi_library": _first_line(lib),
        "mpi_library_full": lib.strip(),
        "mpi_vendor": list(MPI.get_vendor()[:1]) + [".".join(map(str, MPI.get_vendor()[1]))],
        "mpich_algorithm": mpich_alg,
        "native_desc": native_desc,
        "label": cfg.label or NATIVE,
        "iters": cfg.iters,
        "warmup": cfg.warmup,
        "max_bytes": cfg.max_bytes,
        "max_time": cfg.max_time,
        "places": cfg.places,
        "check": cfg.check,
        "interleave": cfg.interleave,
        "seed": cfg.seed,
        "sizes": cfg.sizes,
        "algorithms": cfg.algorithms,
        "model": cfg.model_params(),
        "host": socket.gethostname(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "mpi4py": mpi4py.__version__,
        "swing_mpi": __version__,
        "cpus": os.cpu_count(),
        "loadavg": _loadavg(),
        "command": _command_line(),
        "environment": relevant,
    }


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _resolve_dims(comm, spec: str | None) -> tuple[tuple[int, ...], str]:
    from .topology import parse_dims

    p = comm.Get_size()
    if spec:
        return parse_dims(spec, p), "--dims"
    try:  # exactly what allreduce will use
        from .api import _dims_for
        dims = _dims_for(comm, None)
    except ImportError:
        env = os.environ.get("SWING_MPI_DIMS")
        dims = parse_dims(env, p) if env else (p,)
    src = "$SWING_MPI_DIMS" if os.environ.get("SWING_MPI_DIMS") else ("ring of all ranks" if len(dims) == 1 else "default")
    return tuple(dims), src


def _make_input(np, dtype, count: int, rank: int, seed: int, op: str):
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


OWN_BUFFERS_MAX = 1 << 20
"""Sizes up to this many bytes give every algorithm its own arrays (see :class:`_Point`)."""


class _Point:
    """One (size, place) of a run: the input and the reference, shared by all algorithms.

    Up to :data:`OWN_BUFFERS_MAX` bytes each algorithm gets its own send and
    receive arrays (:meth:`buffers`), as each call site of an application has:
    what a library caches per buffer (ours: the checks and choice of a repeated
    call; MPI's: memory registrations) then sees the same calls as in the
    application, not algorithms taking turns on one array. Above that the
    algorithms share one pair (a per-call cost is lost in the data movement
    there, and ten algorithms' arrays on 16 ranks would not fit in memory).
    """

    def __init__(self, np, comm, mpi_op, cfg: Config, nbytes: int, place: str) -> None:
        self.np = np
        self.dtype = np.dtype(cfg.dtype)
        self.count = max(1, nbytes // self.dtype.itemsize)
        self.nbytes = self.count * self.dtype.itemsize
        self.place = place
        self.input = _make_input(np, self.dtype, self.count, comm.Get_rank(), cfg.seed, cfg.op)
        self.ref = np.empty_like(self.input)
        self._shared = None
        if cfg.check:
            comm.Allreduce(self.input, self.ref, mpi_op)

    def buffers(self):
        """A (send, recv) pair: send holds the input, recv is uninitialised; fresh ones up to
        :data:`OWN_BUFFERS_MAX` bytes, else the point's one shared pair.
        """
        if self.nbytes <= OWN_BUFFERS_MAX:
            return self.input.copy(), self.np.empty_like(self.input)
        if self._shared is None:
            self._shared = (self.input.copy(), self.np.empty_like(self.input))
        return self._shared


def _call(comm, mpi_op, alg: str, dims, pt: _Point, send, recv):
    """A zero-argument callable doing one allreduce of ``pt`` with ``alg`` on these arrays."""
    from mpi4py import MPI

    from .api import allreduce

    if pt.place == "in":
        send = MPI.IN_PLACE
    if alg == NATIVE:
        return lambda: comm.Allreduce(send, recv, mpi_op)
    return lambda: allreduce(comm, send, recv, mpi_op, algorithm=alg, dims=dims)


def _count_wrong(np, comm, pt: _Point, send, recv, exact: bool) -> int:
    """Wrong elements on this rank: vs the reference, vs rank 0's bits, a modified send buffer."""
    res = recv
    if exact or pt.dtype.kind not in "fc":
        bad = res != pt.ref
    else:
        rtol = 8 * max(comm.Get_size(), 2) * np.finfo(pt.dtype).eps
        bad = ~np.isclose(res, pt.ref, rtol=rtol, atol=0.0)
    r0 = res.copy()
    comm.Bcast(r0, root=0)
    isz = pt.dtype.itemsize
    differ = np.any(res.view(np.uint8).reshape(-1, isz) != r0.view(np.uint8).reshape(-1, isz), axis=1)
    n = int(np.count_nonzero(bad | differ))
    if pt.place == "out":
        n += int(np.count_nonzero(send.view(np.uint8).reshape(-1, isz)
                                  != pt.input.view(np.uint8).reshape(-1, isz)))
    return n


def _poison(np, a) -> None:
    if a.dtype.kind in "fc":
        a.fill(np.nan)
    else:
        a.view(np.uint8).fill(0xA5)


class _Prepared:
    """An algorithm on a point after its checked call and warmup: what to time, how often."""

    __slots__ = ("alg", "call", "recv", "wrong", "iters", "times")

    def __init__(self, alg: str, call, recv, wrong: int, iters: int) -> None:
        self.alg = alg
        self.call = call
        self.recv = recv
        self.wrong = wrong
        self.iters = iters
        self.times: list[float] = []


def _timed(comm, pt: _Point, call, recv) -> float:
    """One call between a barrier and the clock (in place: the input restored into ``recv`` first)."""
    if pt.place == "in":
        recv[...] = pt.input
    comm.Barrier()
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def prepare_point(comm, mpi_op, cfg: Config, alg: str, dims, pt: _Point, *, exact: bool) -> _Prepared:
    """The checked call, the warmup and the iteration count (equal on all ranks) of ``alg`` on ``pt``."""
    import numpy as np
    from mpi4py import MPI

    send, recv = pt.buffers()
    call = _call(comm, mpi_op, alg, dims, pt, send, recv)
    wrong = -1
    _poison(np, recv)  # a result that is never written is caught
    t_first = _timed(comm, pt, call, recv)
    if cfg.check:
        wrong = comm.allreduce(_count_wrong(np, comm, pt, send, recv, exact), op=MPI.SUM)
    warm = [_timed(comm, pt, call, recv) for _ in range(cfg.warmup)]
    est = comm.allreduce(float(np.median(warm)) if warm else t_first, op=MPI.MAX)
    iters = iterations_for(pt.nbytes, cfg.iters, max_bytes=cfg.max_bytes, seconds_per_call=est,
                           max_time=cfg.max_time)
    return _Prepared(alg, call, recv, int(wrong), iters)


def time_point(comm, pt: _Point, preps: Sequence[_Prepared], *, interleave: bool = True) -> list[dict[str, Any]]:
    """Time every prepared algorithm on ``pt``; one result dict per algorithm, equal on all ranks.

    ``interleave``: iteration ``i`` of every algorithm, then iteration ``i+1``
    (round robin), so a burst of machine noise lands on all algorithms alike;
    otherwise all iterations of one algorithm, then the next (OSU style).
    """
    import numpy as np
    from mpi4py import MPI

    if interleave:
        for i in range(max((q.iters for q in preps), default=0)):
            for q in preps:
                if i < q.iters:
                    q.times.append(_timed(comm, pt, q.call, q.recv))
    else:
        for q in preps:
            q.times = [_timed(comm, pt, q.call, q.recv) for _ in range(q.iters)]
    flat = np.array([t for q in preps for t in q.times], np.float64)
    comm.Allreduce(MPI.IN_PLACE, flat, MPI.MAX)  # an iteration takes as long as its slowest rank
    p = comm.Get_size()
    out, k = [], 0
    for q in preps:
        times = flat[k:k + q.iters]
        k += q.iters
        us = times * 1e6
        med = float(np.median(times))
        algbw = pt.nbytes / med if med > 0 else None
        out.append({
            "iters": q.iters,
            "time_avg_us": float(us.mean()), "time_min_us": float(us.min()), "time_max_us": float(us.max()),
            "time_median_us": med * 1e6,
            "algbw_Bps": algbw,
            "busbw_Bps": None if algbw is None else algbw * 2 * (p - 1) / p,
            "wrong": q.wrong,
            "times_us": [float(x) for x in us],
        })
    return out


def measure_point(comm, mpi_op, cfg: Config, alg: str, dims, pt: _Point, *, exact: bool) -> dict[str, Any]:
    """Check, warm up and time one algorithm on ``pt`` (the same dict on every rank)."""
    return time_point(comm, pt, [prepare_point(comm, mpi_op, cfg, alg, dims, pt, exact=exact)])[0]


_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN", "band": "BAND", "bor": "BOR", "bxor": "BXOR"}


def run_bench(comm, cfg: Config, *, start=None, log=None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the whole sweep on ``comm``; returns ``(env, rows)`` (on every rank).

    On rank 0, ``start(env)`` is called before the first point and
    ``log(env, rows_of_one_size, size_index, seconds)`` after each size.
    """
    import numpy as np
    from mpi4py import MPI

    from .api import _state, is_exact, resolve

    dims, dims_source = _resolve_dims(comm, cfg.dims)
    tuning = _state(comm).tuning  # what auto uses on this communicator (collective on first use)
    env = _environment(comm, cfg, dims, dims_source)
    mpi_op = getattr(MPI, _OPS[cfg.op])
    datatype = MPI.Datatype.fromcode(np.dtype(cfg.dtype).char)
    exact = is_exact(mpi_op, datatype) or np.dtype(cfg.dtype).kind in "iub"
    p = comm.Get_size()
    label = cfg.label or NATIVE
    rows: list[dict[str, Any]] = []
    if start is not None and comm.Get_rank() == 0:
        start(env)
    for si, nbytes in enumerate(cfg.sizes):
        size_rows = []
        t_size = time.perf_counter()
        for place in cfg.places:
            pt = _Point(np, comm, mpi_op, cfg, nbytes, place)
            preps = [prepare_point(comm, mpi_op, cfg, alg, dims, pt, exact=exact) for alg in cfg.algorithms]
            results = time_point(comm, pt, preps, interleave=cfg.interleave)
            for alg, res in zip(cfg.algorithms, results):
                resolved = alg if alg == NATIVE else resolve(alg, p, pt.nbytes, mpi_op, datatype, dims=dims,
                                                             count=pt.count, tuning=tuning)
                row = {
                    "size": pt.nbytes, "count": pt.count, "type": cfg.dtype, "redop": cfg.op,
                    "algorithm": alg, "label": label if alg == NATIVE else alg, "resolved": resolved,
                    "place": place, "p": p, "dims": env["dims"], "mpich_algorithm": env["mpich_algorithm"],
                    "warmup": cfg.warmup, **res, "vs_native": None, "model_us": None,
                }
                size_rows.append(row)
            del pt
        add_vs_native(size_rows)
        rows.extend(size_rows)
        if log is not None and comm.Get_rank() == 0:
            log(env, size_rows, si, time.perf_counter() - t_size)
    return env, rows


def run(args: argparse.Namespace) -> int:
    """``swing-mpi bench``: measure, print the table on rank 0, write the files."""
    try:
        cfg = Config(args)
    except ValueError as e:
        _say(f"swing-mpi bench: {e}")
        return 2
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        _resolve_dims(comm, cfg.dims)
    except ValueError as e:
        if rank == 0:
            _say(f"swing-mpi bench: {e}")
        return 2
    t_start = time.perf_counter()
    all_rows: list[dict[str, Any]] = []
    state: dict[str, Any] = {}
    model = cfg.model_params()

    def warn(msg: str) -> None:
        _say(f"swing-mpi bench: {msg}")

    def start(env) -> None:
        print("\n".join(env_header_lines(env)), flush=True)
        print(format_header(cfg.bw_unit), flush=True)

    def log(env, size_rows, si, seconds) -> None:
        if si:
            print("#")
        if model:
            add_model_times(size_rows, warn=warn if not state.get("warned") else None, **model)
            state["warned"] = True
        all_rows.extend(size_rows)
        for r in size_rows:
            print(format_row(r, cfg.bw_unit))
        sys.stdout.flush()
        if not cfg.quiet:
            _say(f"[bench] {format_size(size_rows[0]['size'])} ({si + 1}/{len(cfg.sizes)}) done in "
                 f"{seconds:.1f} s, {time.perf_counter() - t_start:.1f} s in all")
        # files after every size: a long sweep that dies keeps what it measured
        if cfg.csv:
            write_csv(all_rows, cfg.csv)
        if cfg.json:
            write_json(cfg.json, env, all_rows)

    env, rows = run_bench(comm, cfg, start=start, log=log)
    wrong = sum(max(0, int(r["wrong"])) for r in rows)
    if rank == 0:
        print(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
        print(f"# {len(rows)} points in {time.perf_counter() - t_start:.1f} s")
        sys.stdout.flush()
        if cfg.plot:
            try:
                plot_results(all_rows, cfg.plot, title=_plot_title(env))
            except ImportError as e:
                warn(f"no plot: {e} (pip install matplotlib)")
    return 0 if wrong == 0 else 1


def _plot_title(env: Mapping[str, Any]) -> str:
    return (f"allreduce {env.get('dtype', '')} {env.get('op', '')}, p={env.get('p')}, dims {env.get('dims')}"
            f" — {env.get('mpi_library', '')}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/allreduce.py`` / ``python -m swing_mpi.bench``."""
    args = build_parser().parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
