"""How far apart a barrier lets the ranks go, and what a call measures from a barrier or from one instant.

Run inside the lab (rank r in node r), e.g. 8x8 at 4 MiB with swing-bw::

    python -m swing_mpi lab --dims 8x8 --rate-mbit 40 --mtu 65000 --timeout 500 -- \
        .venv/bin/python benchmarks/results/lab-points/start_skew.py 8x8 swing-bw 0

Arguments: the torus dims, the algorithm, and how many milliseconds before the agreed instant a rank
stops sleeping and polls (``sched_yield``) instead. Iterations alternate: a barrier, then the call timed
from each rank's own exit (``barrier``), and a barrier, then an instant 200 ms ahead named by rank 0,
every rank sleeping until it (``sync``). Each line gives, over the 64 ranks: the longest time from a
rank's own start (what the bench reports with ``--start barrier``), the last end minus the last start,
the last end minus the first start, how far apart the ranks started, and for ``sync`` the last end
minus the instant (what ``--start sync`` reports). The last line is 5 calls back to back from one
barrier, per call (``--batch 5``). All ranks share the host's clock, so the times compare across ranks.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

import swing_mpi


def main() -> None:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    dims = tuple(int(x) for x in sys.argv[1].split("x"))
    alg = sys.argv[2] if len(sys.argv) > 2 else "swing-bw"
    spin = float(sys.argv[3]) * 1e-3 if len(sys.argv) > 3 else 0.002
    n = (4 << 20) // 8
    src = np.random.default_rng(rank).uniform(0.5, 1.5, n)
    dst = np.empty_like(src)

    def call() -> None:
        swing_mpi.allreduce(comm, src, dst, MPI.SUM, algorithm=alg, dims=dims)

    for _ in range(2):
        comm.Barrier()
        call()
    for it in range(12):
        comm.Barrier()
        instant = None
        if it % 2:
            instant = comm.bcast(time.perf_counter() + 0.2 if rank == 0 else None)
            while (left := instant - time.perf_counter()) > 0:
                if left > spin:
                    time.sleep(left - spin)
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        times = comm.gather((t0, t1), root=0)
        if rank == 0:
            a = np.array(times) * 1e3
            line = (f"{'sync' if instant is not None else 'barrier'}: max(t1-t0) {(a[:, 1] - a[:, 0]).max():7.1f}  "
                    f"max t1 - max t0 {a[:, 1].max() - a[:, 0].max():7.1f}  "
                    f"max t1-min t0 {a[:, 1].max() - a[:, 0].min():7.1f}  "
                    f"start skew {a[:, 0].max() - a[:, 0].min():6.1f} ms")
            if instant is not None:
                line += f"  max t1 - T {a[:, 1].max() - instant * 1e3:7.1f}"
            print(line, flush=True)
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(5):
        call()
    t1 = time.perf_counter()
    times = comm.gather((t0, t1), root=0)
    if rank == 0:
        a = np.array(times) * 1e3
        print(f"batch5 per call: max(t1-t0)/5 {(a[:, 1] - a[:, 0]).max() / 5:7.1f}")


if __name__ == "__main__":
    main()
