"""How two TCP flows share one lab link: ranks A and B each send N bytes to rank 1 at once.

    swing-mpi lab --dims 8 --rate-mbit 40 -n 8 -- python benchmarks/results/scale/lab-share/share.py A B N

On the 8-node ring's lab both flows cross link 0 -> 1 (from rank 0 it is the first hop, from 7 the
second, from 6 the third). A fluid shares that link evenly: both flows end together at 2N/rate. Rank 1
prints when each flow ended, three times.
"""

import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
srcs = (int(sys.argv[1]), int(sys.argv[2]))
n = int(float(sys.argv[3]))
data = np.ones(n, dtype=np.uint8)
for rep in range(3):
    comm.Barrier()
    t0 = MPI.Wtime()
    if rank == 1:
        bufs = [np.empty(n, np.uint8) for _ in srcs]
        reqs = [comm.Irecv(b, source=s, tag=7) for b, s in zip(bufs, srcs)]
        ended: dict[int, float] = {}
        while len(ended) < len(reqs):
            for i, q in enumerate(reqs):
                if i not in ended and q.Test():
                    ended[i] = MPI.Wtime() - t0
            time.sleep(0.001)
        print(f"round {rep}: " + ", ".join(f"flow from rank {s} ended at {ended[i]:.3f} s" for i, s in enumerate(srcs)),
              flush=True)
    elif rank in srcs:
        comm.Send(data, dest=1, tag=7)
    comm.Barrier()
