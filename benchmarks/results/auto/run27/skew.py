"""Per call, per rank: time inside the call (entry->exit) with and without a barrier before it."""
import sys, time
import numpy as np
from mpi4py import MPI
import swing_mpi
comm = MPI.COMM_WORLD
size = int(sys.argv[1]); algs = sys.argv[2].split(","); n = int(sys.argv[3]); barrier = sys.argv[4] == "1"
x = np.random.default_rng(comm.rank).random(size // 8); y = np.empty_like(x)
rows = []
for rep in range(2):
    for a in algs:
        for i in range(n):
            if barrier: comm.Barrier()
            t0 = time.perf_counter()
            if a == "native": comm.Allreduce(x, y)
            else: swing_mpi.allreduce(comm, x, y, algorithm=a, dims="4x4")
            rows.append(time.perf_counter() - t0)
t = np.array(rows)
mx = t.copy(); mn = t.copy(); comm.Allreduce(MPI.IN_PLACE, mx, MPI.MAX); comm.Allreduce(MPI.IN_PLACE, mn, MPI.MIN)
if comm.rank == 0:
    k = 0
    for rep in range(2):
        for a in algs:
            sl = slice(k, k + n); k += n
            print(f"rep{rep} {a:14s} max med {np.median(mx[sl][1:])*1e6:8.0f}  min med {np.median(mn[sl][1:])*1e6:8.0f}   max: {' '.join(f'{v*1e6:.0f}' for v in mx[sl][:10])}")
