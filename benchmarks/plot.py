#!/usr/bin/env python3
"""Replot benchmark results (no MPI): goodput vs size and time ratio vs native.

    python benchmarks/plot.py benchmarks/results/shm/p16/results.json -o p16.png
    python benchmarks/plot.py run-main.json run-mpich-ring.json -o both.png --model-link-mbps 40

Several files are merged; ``vs_native`` is recomputed against the ``native``
rows of the first file that has them at that size (MPICH's default where the
file has it, else its forced algorithm). ``--model-link-mbps`` (re)computes the
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
    ap.add_argument("-o", "--output", required=True, help="PNG to write")
    ap.add_argument("--place", choices=("out", "in"), default=None, help="out-of-place (default) or in-place rows")
    ap.add_argument("--title", default=None)
    ap.add_argument("--model-link-mbps", type=float, default=None, metavar="R")
    ap.add_argument("--model-alpha-us", type=float, default=0.0, metavar="A")
    args = ap.parse_args(argv)
    rows, title = load(args.files, args.title)
    if args.model_link_mbps:
        add_model_times(rows, link_bytes_per_s=args.model_link_mbps * 1e6 / 8, alpha=args.model_alpha_us * 1e-6,
                        warn=lambda m: print(f"plot: {m}", file=sys.stderr))
    plot_results(rows, args.output, title=title, place=args.place)
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
