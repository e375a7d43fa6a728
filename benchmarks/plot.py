#!/usr/bin/env python3
"""Replot benchmark results (no MPI): goodput vs size and time ratio vs native.

    python benchmarks/plot.py benchmarks/results/shm/p16/results.json -o p16.png
    python benchmarks/plot.py run-main.json run-mpich-ring.json -o both.png --model-link 40M

Several files are merged; ``vs_native`` is recomputed against the ``native``
rows of the first file that has them at that size (MPICH's default where the
file has it, else its forced algorithm). ``--model-link`` (re)computes the
dashed model lines with ``swing_mpi.model.predict_time`` where it is importable.
"""

import argparse
import os
import sys

try:
    import swing_mpi  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from swing_mpi.bench import add_model_times, native_medians, plot_results, plot_title, read_results, set_vs_native
from swing_mpi.cliargs import deprecated
from swing_mpi.units import RATE_HELP, TIME_HELP, parse_rate, parse_time


def load(paths, title=None):
    """Return the rows of all files and a title (``title``, else the first file's).

    ``vs_native`` is set against the first file that measured ``native`` at
    each (size, place).
    """
    rows = []
    medians = {}
    for path in paths:
        env, rs = read_results(path)
        for key, m in native_medians(rs).items():
            medians.setdefault(key, m)  # sizes no earlier file measured
        if "runs" in env:  # a merged sweep: the first launch's environment
            env = next(iter(env["runs"].values()), {})
        if title is None and env:
            title = plot_title(env)
        rows.extend(rs)
    set_vs_native(rows, medians)
    return rows, title


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmarks/plot.py", description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="JSON or CSV files written by swing-mpi bench or sweep.py")
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    deprecated(ap, "--output", dest="out", new="--out")
    ap.add_argument("--place", choices=("out", "in"), default=None, help="out-of-place (default) or in-place rows")
    ap.add_argument("--title", default=None)
    ap.add_argument("--model-link", default=None, metavar="RATE", help=f"draw the model at this link rate, {RATE_HELP}")
    deprecated(ap, "--model-link-mbps", dest="model_link", new="--model-link", convert=lambda v: f"{v}M")
    ap.add_argument("--model-alpha", default="0", metavar="TIME", help=f"model latency per step, {TIME_HELP}")
    deprecated(ap, "--model-alpha-us", dest="model_alpha", new="--model-alpha", convert=lambda v: f"{v}us")
    args = ap.parse_args(argv)
    try:
        rate = parse_rate(args.model_link, "--model-link") if args.model_link else None
        alpha = parse_time(args.model_alpha, "--model-alpha")
    except ValueError as e:
        ap.error(str(e))
    rows, title = load(args.files, args.title)
    if rate:
        add_model_times(rows, link_bytes_per_s=rate / 8, alpha=alpha,
                        warn=lambda m: print(f"plot: {m}", file=sys.stderr))
    plot_results(rows, args.out, title=title, place=args.place)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
