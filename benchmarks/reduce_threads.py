"""The compiled core's reduction on 1 and 2 threads, two checkouts' cores side by side in one process.

One process (no mpiexec: the reduction needs no peer) loads the core built from an earlier
checkout (``--before``, a git worktree of it) and this checkout's, and for each size times, in
turn within every round, both cores on 1 and on 2 threads over the same operands (float64 SUM
into one of them, as the engine reduces a received block into its own). A number is the median
over ``--rounds`` rounds of the median of ``--calls`` back-to-back calls::

    python benchmarks/reduce_threads.py --before /work/wt-before --sizes 1M,4M,16M --out threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
from mpi4py import MPI  # noqa: F401  (the core links the MPI library mpi4py loads)

from swing_mpi import native
from swing_mpi.executor import REDUCE_MIN_BYTES
from swing_mpi.program import kernel_for
from swing_mpi.units import format_size, parse_sizes


def _core_of(checkout: str | None) -> str:
    """Return the path of the core built from ``checkout``'s source (this checkout's where None), built if needed."""
    if checkout is None:
        return native.build()
    env = dict(os.environ, PYTHONPATH=checkout)
    r = subprocess.run([sys.executable, "-c", "import swing_mpi.native as n; print(n.build())"], cwd=checkout,
                       env=env, capture_output=True, text=True, check=True)
    return r.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, metavar="DIR", help="an earlier checkout (a git worktree)")
    ap.add_argument("--sizes", default="1M,2M,4M,8M,16M,32M", help="vector sizes (default 1M,2M,4M,8M,16M,32M)")
    ap.add_argument("--rounds", type=int, default=11, help="rounds per size (default 11)")
    ap.add_argument("--calls", type=int, default=15, help="calls per case and round (default 15)")
    ap.add_argument("--out", help="write the numbers as JSON here")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        ap.error("--rounds and --calls must be at least 1")
    cores = {"before": native.load_file(_core_of(os.path.abspath(args.before))),
             "after": native.load_file(_core_of(None))}
    kernel = kernel_for("SUM", np.dtype(np.float64), True)
    rows = []
    load = os.getloadavg()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for size in parse_sizes(args.sizes):
        n = max(1, size // 8)
        rng = np.random.default_rng(1)
        a, b = rng.uniform(0.5, 1.5, n), rng.uniform(0.5, 1.5, n)
        times: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for label, core in cores.items():
                for threads in (1, 2):
                    core.reduce(kernel, b, a, b, threads, REDUCE_MIN_BYTES)
                    ts = []
                    for _ in range(args.calls):
                        t0 = time.perf_counter()
                        core.reduce(kernel, b, a, b, threads, REDUCE_MIN_BYTES)
                        ts.append(time.perf_counter() - t0)
                    times.setdefault(f"{label}_{threads}", []).append(statistics.median(ts))
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {"bytes": n * 8, **{f"{k}_s": v for k, v in med.items()},
               "before_speedup": med["before_1"] / med["before_2"], "after_speedup": med["after_1"] / med["after_2"]}
        rows.append(row)
        print(f"{format_size(n * 8):>9}: 1 thread {med['before_1'] * 1e3:.3f} / {med['after_1'] * 1e3:.3f} ms "
              f"(before / after); 2 threads before {med['before_2'] * 1e3:.3f} ms = {row['before_speedup']:.2f}x, "
              f"after {med['after_2'] * 1e3:.3f} ms = {row['after_speedup']:.2f}x", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "started": started, "load_average": load, "host": platform.node(),
                       "cpus": os.cpu_count(), "rounds": args.rounds, "calls": args.calls,
                       "before": os.path.abspath(args.before), "command": " ".join(sys.argv)}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
