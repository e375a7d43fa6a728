"""End to end, side by side: our allreduce against the MPI library's own, first call and steady state.

Run under mpiexec (2 ranks for the engine's targets)::

    mpiexec -n 2 python -m mpi4py benchmarks/engine_e2e.py --out e2e.json

For each size, each round times every algorithm in turn (a random order per round, the same on
every rank): ``--batch`` back-to-back calls from one barrier, the time per call being the slowest
rank's. A number is the median over ``--rounds`` rounds; ``native`` is ``comm.Allreduce``.
``first`` is each algorithm's first call on a fresh communicator (``comm.Dup()``), which pays for
what a user's first call pays: its plan, the compiled core's loading, MPI's connections to the
peers already made by the warm-up of ``native``. float64 SUM, out of place.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import swing_mpi
from swing_mpi.units import parse_sizes


def _call(comm, algorithm: str, x: np.ndarray, y: np.ndarray):
    if algorithm == "native":
        return lambda: comm.Allreduce(x, y, MPI.SUM)
    name, _, dims = algorithm.partition("@")  # NAME@DIMS: on those dims (a torus of nodes, or of ranks)
    dims_t = tuple(int(d) for d in dims.split("x")) if dims else None
    return lambda: swing_mpi.allreduce(comm, x, y, MPI.SUM, algorithm=name, dims=dims_t)


def _timed(comm, fn, batch: int) -> float:
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(batch):
        fn()
    return comm.allreduce((time.perf_counter() - t0) / batch, op=MPI.MAX)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,1K,64K,1M", help="bytes, comma list with units (default 8,1K,64K,1M)")
    ap.add_argument("--algorithms", "-a", default="recdoub,swing-lat,swing-bw,auto",
                    help="ours, comma list; NAME@DIMS runs on those dims (auto@2x2: a torus of nodes where "
                         "SWING_MPI_RANKS_PER_NODE=K makes nodes and 2x2 names fewer places than ranks)")
    ap.add_argument("--own-arrays", action="store_true",
                    help="each algorithm its own arrays (default: all share one pair, and the repeat path's "
                         "record of one array is the last algorithm's)")
    ap.add_argument("--settle", type=int, default=0,
                    help="calls timed after the first one, before the rounds (their mean: what a user's first "
                         "calls cost, auto's trial included; default 0)")
    ap.add_argument("--rounds", type=int, default=15, help="rounds; each number is their median (default 15)")
    ap.add_argument("--batch", type=int, default=20, help="calls per timing (default 20)")
    ap.add_argument("--label", default="", help="a name for this run (e.g. the checkout)")
    ap.add_argument("--out", default=None, help="JSON file to write (rank 0)")
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    me = world.Get_rank()
    sizes = parse_sizes(args.sizes)
    algorithms = ["native", *[a for a in args.algorithms.split(",") if a]]
    rng = np.random.default_rng([5, me])
    rows = []
    for nbytes in sizes:
        n = max(1, nbytes // 8)
        x = rng.standard_normal(n)
        y = np.empty_like(x)
        first = {}
        for alg in algorithms:  # first calls: a fresh communicator each
            comm = world.Dup()
            fn = _call(comm, alg, x, y)
            first[alg] = _timed(comm, fn, 1)
            comm.Free()
        comms = {alg: world.Dup() for alg in algorithms}
        if args.own_arrays:  # as call sites of an application: the repeat path keeps one record per array
            calls = {alg: _call(comms[alg], alg, x.copy(), np.empty_like(y)) for alg in algorithms}
        else:
            calls = {alg: _call(comms[alg], alg, x, y) for alg in algorithms}
        settle = {}
        for alg in algorithms:  # warm-up: the first call, the settling calls, three more
            calls[alg]()
            if args.settle:
                settle[alg] = _timed(comms[alg], calls[alg], args.settle)
            for _ in range(3):
                calls[alg]()
        times: dict[str, list[float]] = {alg: [] for alg in algorithms}
        order = np.random.default_rng(nbytes)
        for _ in range(args.rounds):
            for alg in order.permutation(algorithms):
                times[str(alg)].append(_timed(comms[str(alg)], calls[str(alg)], args.batch))
        for c in comms.values():
            c.Free()
        nat = statistics.median(times["native"])
        for alg in algorithms:
            med = statistics.median(times[alg])
            rows.append({"bytes": nbytes, "algorithm": alg, "median_s": med, "ratio_to_native": med / nat,
                         "first_call_s": first[alg], **({"settle_mean_s": settle[alg]} if settle else {})})
        if me == 0:
            line = "  ".join(f"{a} {statistics.median(times[a]) * 1e6:8.2f}us "
                             f"({statistics.median(times[a]) / nat:4.2f}x)"
                             for a in algorithms)
            print(f"{nbytes:>9} B  {line}", flush=True)
    if me == 0 and args.out:
        lib = MPI.Get_library_version().splitlines()[0].strip()
        meta = {"label": args.label, "ranks": world.Get_size(), "mpi": lib, "rounds": args.rounds,
                "batch": args.batch, "settle": args.settle, "own_arrays": args.own_arrays,
                "ranks_per_node": os.environ.get("SWING_MPI_RANKS_PER_NODE"),
                "engine": getattr(swing_mpi.config.rc, "engine", "python (before the core)"),
                "swing_mpi": os.path.dirname(swing_mpi.__file__), "host": platform.node(),
                "cpus": os.cpu_count(), "loadavg": list(os.getloadavg()),
                "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "command": " ".join(["python -m mpi4py benchmarks/engine_e2e.py", *sys.argv[1:]])}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
