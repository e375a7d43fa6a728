"""Wall time and CPU of a 4 MiB allreduce under each way of waiting, alternated in one launch.

Run inside the lab (rank r in node r), e.g.::

    python -m swing_mpi lab --dims 8x8 --rate-mbit 40 --timeout 500 -- \
        .venv/bin/python benchmarks/results/lab-points/wait_policy.py 8x8 swing-bw yield,backoff,sleep1000 8

Arguments: dims, algorithm, the ways of waiting (``yield``, ``spin``, ``backoff``: the values of
``$SWING_MPI_WAIT``; ``sleepN``: ``yield`` with ``$SWING_MPI_SLEEP_US=N``; ``backoff:F:M[:S:L]``:
``backoff`` with each sleep ``F`` of the time slept so far, at most ``M`` µs, after ``S`` idle polls,
at least ``L`` µs), rounds (default 6), the vector's size in bytes (default 4 MiB), and ``polite`` to
make this script's own barrier and sums (between the timed calls) wait like ``backoff`` instead of in
MPI's spinning progress loop. The executor's module settings are switched between calls (the
variables are read at import). Each round runs every way once, in a rotated order, after a barrier;
printed per way: the median over rounds of the slowest rank's wall time, and of the user and system
CPU time summed over the ranks (``getrusage``).
"""

from __future__ import annotations

import os
import resource
import sys
import time

import numpy as np
from mpi4py import MPI

import swing_mpi
from swing_mpi import executor

DEFAULT_BACKOFF = (executor.BACKOFF_FRACTION, executor.BACKOFF_MAX, executor.BACKOFF_SPINS, executor.BACKOFF_MIN)


def use(way: str) -> None:
    """Switch the executor to ``way`` of waiting."""
    executor.BACKOFF_FRACTION, executor.BACKOFF_MAX, executor.BACKOFF_SPINS, executor.BACKOFF_MIN = DEFAULT_BACKOFF
    if way.startswith("sleep"):
        executor._WAIT, executor._SLEEP = "yield", float(way[5:]) * 1e-6
    elif way.startswith("backoff:"):
        fraction, most, *rest = way.split(":")[1:]
        executor._WAIT, executor._SLEEP = "backoff", 0.0
        executor.BACKOFF_FRACTION, executor.BACKOFF_MAX = float(fraction), float(most) * 1e-6
        if rest:
            executor.BACKOFF_SPINS, executor.BACKOFF_MIN = int(rest[0]), float(rest[1]) * 1e-6
    else:
        executor._WAIT, executor._SLEEP = executor.wait_policy({"SWING_MPI_WAIT": way}), 0.0


def polite_wait(req: MPI.Request) -> None:
    """Wait for ``req`` like the executor's ``backoff`` does, whatever way of waiting is in use."""
    saved = executor._WAIT
    executor._WAIT = "backoff"
    try:
        executor._wait_all([req])
    finally:
        executor._WAIT = saved


def main() -> None:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    dims = tuple(int(x) for x in sys.argv[1].split("x"))
    algorithm = sys.argv[2]
    ways = sys.argv[3].split(",")
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 6
    size = int(sys.argv[5]) if len(sys.argv) > 5 else 4 << 20
    cores = len(os.sched_getaffinity(0))
    n = max(1, size // 8)
    polite = len(sys.argv) > 6 and sys.argv[6] == "polite"

    def barrier() -> None:
        if polite:
            polite_wait(comm.Ibarrier())
        else:
            comm.Barrier()

    def totals(wall: float, user: float, system: float) -> tuple[float, float, float]:
        out = np.array([wall, user, system])
        mx, sm = np.empty(1), np.empty(2)
        if polite:
            polite_wait(comm.Iallreduce(out[:1], mx, MPI.MAX))
            polite_wait(comm.Iallreduce(out[1:], sm, MPI.SUM))
        else:
            comm.Allreduce(out[:1], mx, MPI.MAX)
            comm.Allreduce(out[1:], sm, MPI.SUM)
        return float(mx[0]), float(sm[0]), float(sm[1])

    src = np.random.default_rng(rank).uniform(0.5, 1.5, n)
    dst = np.empty_like(src)
    if rank == 0:
        print(f"# {comm.Get_size()} ranks, dims {sys.argv[1]}, {algorithm}, {n * 8} B float64 SUM, {cores} cores, "
              f"{rounds} rounds{', polite waits between calls' if polite else ''}", flush=True)
    for way in ways:  # warm up every way
        use(way)
        barrier()
        swing_mpi.allreduce(comm, src, dst, MPI.SUM, algorithm=algorithm, dims=dims)
    got: dict[str, list[tuple[float, float, float]]] = {w: [] for w in ways}
    for r in range(rounds):
        for way in ways[r % len(ways):] + ways[:r % len(ways)]:
            use(way)
            barrier()
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            swing_mpi.allreduce(comm, src, dst, MPI.SUM, algorithm=algorithm, dims=dims)
            t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            got[way].append(totals(t1 - t0, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime))
        if rank == 0:
            print(f"round {r + 1}/{rounds}: " + "  ".join(f"{w} {got[w][-1][0] * 1e3:.3g} ms" for w in ways),
                  flush=True)
    if rank == 0:
        for way in ways:
            wall, user, system = (float(np.median([g[i] for g in got[way]])) for i in range(3))
            print(f"{way:12s} wall {wall * 1e3:8.3f} ms  user {user * 1e3:8.3f} ms  sys {system * 1e3:8.3f} ms  "
                  f"(user+sys)/{cores} cores = {(user + system) / cores / wall:.0%} of the wall time", flush=True)


if __name__ == "__main__":
    main()
