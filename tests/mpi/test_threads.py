"""Concurrent calls on different communicators from different threads (MPI_THREAD_MULTIPLE), under mpiexec.

Each of 4 threads owns one communicator (a ``Dup`` of the world) and makes 200 calls on it, of
mixed algorithms, counts, datatypes and call kinds (fresh arrays, the same arrays again and again
for the repeat path, nonblocking, through ``swing_mpi.Intracomm``). Integer data: every result is
checked exactly. What stays erroneous, as in MPI: one communicator used from two threads at once.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(MPI.Query_thread() < MPI.THREAD_MULTIPLE,
                       reason=f"the MPI library gave thread level {MPI.Query_thread()}, not MPI_THREAD_MULTIPLE"),
]

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()

THREADS = 4
CALLS = 200
ALGORITHMS = ["swing-bw", "swing-lat", "recdoub", "ring", "bucket", "auto", "native"]
COUNTS = [0, 1, P, 2 * P + 3, 257, 1000]
DTYPES = [np.int64, np.int32, np.uint32]  # no overflow: native is MPI's own (docs/mpi.md)
KINDS = ["fresh", "repeat", "nonblocking", "intracomm"]


def want(n: int, dtype, salt: int) -> np.ndarray:
    """Return the sum over ranks r of (r + 1)·(arange(n) + salt), wrapped to ``dtype``."""
    base = np.arange(n, dtype=np.int64) + salt
    return (base * (P * (P + 1) // 2)).astype(dtype)


def worker(t: int, comm: MPI.Intracomm, errors: list[str]) -> None:
    repeat_x: dict[tuple, np.ndarray] = {}
    repeat_y: dict[tuple, np.ndarray] = {}
    wrapped = {a: swing_mpi.Intracomm(comm, algorithm=a) for a in ALGORITHMS}
    try:
        for i in range(CALLS):
            algorithm = ALGORITHMS[(t + i) % len(ALGORITHMS)]
            n = COUNTS[(7 * i + t) % len(COUNTS)]
            dtype = DTYPES[(i // 3 + t) % len(DTYPES)]
            kind = KINDS[(i + 2 * t) % len(KINDS)]
            salt = 1000 * t + i
            if kind == "repeat":
                key = (algorithm, n, np.dtype(dtype).name)
                x = repeat_x.setdefault(key, np.empty(n, dtype))
                y = repeat_y.setdefault(key, np.empty(n, dtype))
            else:
                x, y = np.empty(n, dtype), np.empty(n, dtype)
            x[...] = ((np.arange(n, dtype=np.int64) + salt) * (R + 1)).astype(dtype)
            y[...] = 0
            if kind == "nonblocking":
                swing_mpi.iallreduce(comm, x, y, MPI.SUM, algorithm=algorithm).Wait()
            elif kind == "intracomm":
                wrapped[algorithm].Allreduce(x, y, MPI.SUM)
            else:
                swing_mpi.allreduce(comm, x, y, MPI.SUM, algorithm=algorithm)
            if not np.array_equal(y, want(n, dtype, salt)):
                errors.append(f"thread {t} call {i}: {algorithm} {kind} n={n} {np.dtype(dtype).name}: wrong result")
    except Exception as e:  # noqa: BLE001 - reported by the main thread
        errors.append(f"thread {t}: raised {type(e).__name__}: {e}")


def test_four_threads_four_communicators_mixed_algorithms():
    comms = [WORLD.Dup() for _ in range(THREADS)]
    errors: list[str] = []
    threads = [threading.Thread(target=worker, args=(t, comms[t], errors), daemon=True) for t in range(THREADS)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=300)
        hung = [t for t, th in enumerate(threads) if th.is_alive()]
        assert not hung, f"threads {hung} did not finish (a deadlock between threads)"
        everyone = WORLD.allgather(errors)
        bad = [f"rank {r}: {e}" for r, errs in enumerate(everyone) for e in errs]
        assert not bad, f"{len(bad)} problem(s):\n" + "\n".join(bad[:20])
    finally:
        if not any(th.is_alive() for th in threads):
            for c in comms:
                c.Free()
