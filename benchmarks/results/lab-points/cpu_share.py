"""How much CPU a 4 MiB allreduce takes in the lab, against the cores there are.

Run inside the lab (rank r in node r), e.g.::

    python -m swing_mpi lab --dims 8x8 --rate-mbit 40 --mtu 65000 --timeout 500 -- \
        .venv/bin/python benchmarks/results/lab-points/cpu_share.py 8x8 swing-bw,bucket,native

For each algorithm (``native``: ``comm.Allreduce``), after two untimed calls, four calls each after a
barrier; per rank the median wall time and the median user and system CPU time of a call
(``getrusage``). Printed: the slowest rank's wall time, the user and system times summed over all
ranks, and that sum spread over the machine's cores. When the last is close to the wall time, the
ranks' own CPU work (the MPI library's progress and copies, the kernel's socket copies, the
reductions, polling) fills the cores and the call cannot go faster than the CPU allows, whatever the
links could carry; the kernel's forwarding between namespaces (softirq) is not even counted in it.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable

import numpy as np
from mpi4py import MPI

import swing_mpi


def main() -> None:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    dims = tuple(int(x) for x in sys.argv[1].split("x"))
    algorithms = sys.argv[2].split(",") if len(sys.argv) > 2 else ["swing-bw"]
    cores = len(os.sched_getaffinity(0))
    n = (4 << 20) // 8
    src = np.random.default_rng(rank).uniform(0.5, 1.5, n)
    dst = np.empty_like(src)
    if rank == 0:
        print(f"# {comm.Get_size()} ranks, dims {sys.argv[1]}, 4 MiB float64 SUM, {cores} cores", flush=True)
    for alg in algorithms:
        if alg == "native":
            call: Callable[[], None] = lambda: comm.Allreduce(src, dst, MPI.SUM)  # noqa: E731
        else:
            call = lambda a=alg: swing_mpi.allreduce(comm, src, dst, MPI.SUM, algorithm=a, dims=dims)  # noqa: E731
        for _ in range(2):
            comm.Barrier()
            call()
        walls, users, syss = [], [], []
        for _ in range(4):
            comm.Barrier()
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            call()
            t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            walls.append(t1 - t0)
            users.append(r1.ru_utime - r0.ru_utime)
            syss.append(r1.ru_stime - r0.ru_stime)
        wall = comm.allreduce(float(np.median(walls)), op=MPI.MAX)
        user = comm.allreduce(float(np.median(users)), op=MPI.SUM)
        system = comm.allreduce(float(np.median(syss)), op=MPI.SUM)
        if rank == 0:
            print(f"{alg:18s} wall {wall * 1e3:7.1f} ms  user (sum over ranks) {user * 1e3:7.1f} ms  "
                  f"sys {system * 1e3:7.1f} ms  (user+sys)/{cores} cores {(user + system) / cores * 1e3:7.1f} ms "
                  f"= {(user + system) / cores / wall:.0%} of the wall time", flush=True)


if __name__ == "__main__":
    main()
