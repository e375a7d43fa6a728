"""auto against MPI_Allreduce when a program reduces new arrays every call, and the same arrays.

Run under mpiexec (``run_new_arrays.sh`` has the commands). Per size, four ways of calling, each
``--calls`` calls from one barrier per round, time per call = max over ranks, rounds interleaved
(the order rotated each round), medians over ``--rounds``:

* ``native same``: ``comm.Allreduce(x, y)`` on the same two arrays every call;
* ``auto same``: ``swing_mpi.allreduce`` (``auto``) on the same arrays (the repeat path);
* ``native new``: ``x = np.full(n, r); y = np.empty(n); comm.Allreduce(x, y)``, new arrays every call;
* ``auto new``: the same with ``swing_mpi.allreduce``.

``--dims`` is passed to every call (so that a tuning file of those dims applies).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import swing_mpi
from swing_mpi import api


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,1024,65536", help="bytes, comma list (float64 elements)")
    ap.add_argument("--dims", default=None, help="torus dims passed to every auto call, e.g. 2x2")
    ap.add_argument("--calls", type=int, default=200, help="calls per round")
    ap.add_argument("--rounds", type=int, default=11, help="rounds (medians over them)")
    a = ap.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if rank == 0:
        print(f"# p={comm.Get_size()} dims={a.dims} calls/round={a.calls} rounds={a.rounds}; "
              f"us per call, median over rounds of the max over ranks; ratio = auto / native, same way of calling")
        print(f"| {'size':>6} | {'native same':>11} | {'auto same':>9} | {'ratio':>5} | {'native new':>10} | "
              f"{'auto new':>8} | {'ratio':>5} | auto ran |")
        print("|-------:|------------:|----------:|------:|-----------:|---------:|------:|----------|")
    for size in (int(s) for s in a.sizes.split(",")):
        n = max(1, size // 8)
        x, y = np.full(n, float(rank)), np.empty(n)
        dims = a.dims

        def native_same() -> None:
            comm.Allreduce(x, y, MPI.SUM)

        def auto_same() -> None:
            swing_mpi.allreduce(comm, x, y, MPI.SUM, dims=dims)

        def native_new() -> None:
            comm.Allreduce(np.full(n, float(rank)), np.empty(n), MPI.SUM)

        def auto_new() -> None:
            swing_mpi.allreduce(comm, np.full(n, float(rank)), np.empty(n), MPI.SUM, dims=dims)

        ways = [("native same", native_same), ("auto same", auto_same), ("native new", native_new),
                ("auto new", auto_new)]
        for _, f in ways:  # warm up: plans, tuning, the first (full-path) call
            f()
        swing_mpi.allreduce(comm, x, y, MPI.SUM, dims=dims)
        want = np.full(n, float(sum(range(comm.Get_size()))))
        ok = comm.allreduce(int(np.array_equal(y, want)), op=MPI.MIN)
        times: dict[str, list[float]] = {name: [] for name, _ in ways}
        for r in range(a.rounds):
            k = r % len(ways)
            for name, f in ways[k:] + ways[:k]:
                comm.Barrier()
                t0 = time.perf_counter()
                for _ in range(a.calls):
                    f()
                times[name].append(comm.allreduce((time.perf_counter() - t0) / a.calls, op=MPI.MAX))
        ran = api.resolve(None, comm.Get_size(), n * 8, MPI.SUM, MPI.DOUBLE, count=n,
                          dims=api.dims_for(comm, dims), tuning=api.comm_tuning(comm))
        if rank == 0:
            m = {name: float(np.median(v)) * 1e6 for name, v in times.items()}
            print(f"| {size:>6} | {m['native same']:>11.1f} | {m['auto same']:>9.1f} | "
                  f"{m['auto same'] / m['native same']:>5.2f} | {m['native new']:>10.1f} | {m['auto new']:>8.1f} | "
                  f"{m['auto new'] / m['native new']:>5.2f} | {ran}{'' if ok else ' (WRONG RESULT)'} |")


if __name__ == "__main__":
    main()
