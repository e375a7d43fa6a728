"""MPICH, 4 ranks on 2 cores, 1 MiB float64 SUM: eight blocks of 15 calls each of three algorithms, one launch.

Each launch prints one line: the median of each block (max over ranks, us). Run from the repository root:
    for i in 1 2 3 4 5 6; do .venv/bin/mpiexec -n 4 .venv/bin/python -m mpi4py \
        benchmarks/results/auto/mpich-2x2-1M/modes.py; done
"""
import time

import numpy as np
from mpi4py import MPI

import swing_mpi

comm = MPI.COMM_WORLD
a = np.ones(1 << 17)
b = np.empty_like(a)
out = []
for _block in range(8):
    for alg in ["native", "recdoub", "rabenseifner"]:
        ts = []
        for _ in range(15):
            comm.Barrier()
            t0 = time.perf_counter()
            swing_mpi.allreduce(comm, a, b, MPI.SUM, algorithm=alg, dims=(2, 2))
            ts.append(time.perf_counter() - t0)
        t = comm.allreduce(float(np.median(ts)), op=MPI.MAX)
        out.append(f"{alg}={t * 1e6:.0f}")
if comm.Get_rank() == 0:
    print(" ".join(out))
