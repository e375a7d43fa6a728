"""Profile the per-call path of ``swing_mpi.allreduce`` (cProfile on every rank, rank 0 prints).

    mpiexec -n 2 python -m mpi4py scripts/profile_call.py --algorithm swing-lat --bytes 8

Runs ``--calls`` back-to-back allreduces of a float64 SUM (after a warmup), first
without the profiler (µs per call, median of 7 rounds alternating with rounds of
``comm.Allreduce`` on the same buffers), then under cProfile, and prints rank 0's top functions by
own time. Issue #8's before/after numbers come from this script.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np
from mpi4py import MPI

import swing_mpi


def per_call_us(comm, fns, calls: int, rounds: int = 7) -> list[float]:
    """Return µs per call of each of ``fns``, median over ``rounds``.

    The rounds of the functions alternate, so a change in the machine's state hits them alike.
    """
    times = np.zeros((rounds, len(fns)))
    for i in range(rounds):
        for j, fn in enumerate(fns):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[i, j] = (time.perf_counter() - t0) / calls * 1e6
    comm.Allreduce(MPI.IN_PLACE, times, MPI.MAX)  # a round takes as long as its slowest rank
    return [float(x) for x in np.median(times, axis=0)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algorithm", default="swing-lat")
    ap.add_argument("--bytes", type=int, default=8)
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--in-place", action="store_true")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    n = max(1, args.bytes // 8)
    x = np.full(n, comm.Get_rank() + 1.0)
    y = np.empty(n)
    send = MPI.IN_PLACE if args.in_place else x

    def ours() -> None:
        swing_mpi.allreduce(comm, send, y, MPI.SUM, algorithm=args.algorithm)

    def native() -> None:
        comm.Allreduce(send, y, MPI.SUM)

    for _ in range(1000):
        ours()
        native()
    t_native, t_ours = per_call_us(comm, [native, ours], args.calls)
    prof = cProfile.Profile()
    comm.Barrier()
    prof.enable()
    for _ in range(args.calls):
        ours()
    prof.disable()
    if comm.Get_rank() == 0:
        print(f"p={comm.Get_size()} {n * 8} B float64 SUM, {args.calls} calls back to back, "
              "median of 7 alternating rounds:")
        print(f"  comm.Allreduce           {t_native:8.2f} us/call")
        print(f"  allreduce({args.algorithm!r:12}) {t_ours:8.2f} us/call  (+{t_ours - t_native:.2f} us)")
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())


if __name__ == "__main__":
    main()
