"""The benchmark's timed calls: how an iteration starts, in what order the algorithms run, what is kept.

Runs under mpiexec; mpi4py is imported inside the functions. See :mod:`swing_mpi.bench`
for the method, and :mod:`swing_mpi.bench.measure` for the points and their buffers.
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .points import Point, Prepared

__all__ = ["SyncStart", "auto_start", "barrier", "timed", "balanced_rows", "shuffled", "order_seed", "time_point"]


class SyncStart:
    """Start every rank's timed call at one agreed instant of a clock all ranks share (``--start sync``).

    A barrier's exit is not one instant: each rank leaves when the last
    message of the barrier reaches it and the rank gets a core. Timed from
    each rank's own exit, the call is charged that spread (in the 8x8 lab, 64
    ranks on 2 cores, 95-240 ms of a 0.6 s call). Here, after a barrier, rank 0
    names an instant ``lead`` seconds ahead of its clock, every rank sleeps
    until it and calls, and a rank's time runs from that instant (not from
    when it woke: a rank that wakes late is charged for it). ``lead`` is
    twice the longest time rank 0's broadcast took to reach a rank (measured
    at setup, at least 1 ms), so every rank knows the instant before it
    comes; one that learns it late starts late and pays for it.

    The clock is ``time.perf_counter`` (``CLOCK_MONOTONIC`` on Linux), one
    clock for every process of a host: the ranks must all run on one host,
    which :meth:`__init__` checks (the ReproMPI way of timing collectives, with
    the one clock a single machine has instead of synchronized ones).
    """

    def __init__(self, comm: Any, *, probes: int = 5) -> None:
        """Check that all ranks share a host and measure the broadcast's reach (collective)."""
        from mpi4py import MPI

        hosts = sorted(set(comm.allgather(socket.gethostname())))
        if len(hosts) > 1:
            raise ValueError(f"--start sync needs one clock for all ranks, i.e. all ranks on one host; these run on "
                             f"{len(hosts)} ({', '.join(hosts[:4])}{', ...' if len(hosts) > 4 else ''}): use "
                             f"--start barrier")
        self.comm = comm
        reach = 0.0
        for _ in range(max(1, probes)):
            comm.Barrier()
            stamp = comm.bcast(time.perf_counter() if comm.Get_rank() == 0 else None, root=0)
            reach = max(reach, time.perf_counter() - stamp)
        self.lead = max(1e-3, 2.0 * float(comm.allreduce(reach, op=MPI.MAX)))

    def __call__(self) -> float:
        """Agree on an instant, wait for it, return it (collective)."""
        comm = self.comm
        barrier(comm)
        t = comm.bcast(time.perf_counter() + self.lead if comm.Get_rank() == 0 else None, root=0)
        while True:  # sleep (oversubscribed ranks need the cores), the last 100 us yielding
            left = t - time.perf_counter()
            if left <= 0:
                return float(t)
            if left > 2e-4:
                time.sleep(left - 1e-4)
            else:
                os.sched_yield()


def auto_start(comm: Any) -> tuple[str, str]:
    """Return ``--start auto``'s pick, ``sync`` or ``barrier``, and why (collective).

    ``sync`` where every rank runs on one host (one clock) and waits sleeping (``backoff``: a host
    with more ranks than cores that do not share memory, as in the lab): such ranks leave a barrier a
    sleep and a time slice apart (in the 8x8 lab, 64 ranks on 2 cores, 36-240 ms of a 0.5 s call), a
    spread the timed call would be charged. ``barrier`` otherwise: ranks that poll leave a barrier
    close together (ranks that yield, several to a core, were timed 2-3x slower from one instant at
    8 B-32 KiB, waking at it), and ranks on several hosts share no clock.
    """
    every = comm.allgather((socket.gethostname(), _wait_mode(comm)))
    hosts = {name for name, _ in every}
    if len(hosts) > 1:
        return "barrier", f"{len(hosts)} hosts"
    modes = sorted({mode for _, mode in every})
    if modes == ["backoff"]:
        return "sync", f"one host, {comm.Get_size()} ranks that wait sleeping (backoff)"
    return "barrier", f"one host, ranks that wait with {'/'.join(modes)}"


def _wait_mode(comm: Any) -> str:
    """How ``comm``'s calls wait: ``$SWING_MPI_WAIT``, else its state's policy, else the default."""
    from ..config import rc
    from ..state import find_state
    from ..waiting import default_policy

    st = find_state(comm)
    return rc.wait or (st.wait_policy if st is not None else default_policy())


def barrier(comm: Any) -> None:
    """``comm.Barrier()``, after a nonblocking one waited on sleeping where ``comm``'s calls wait with ``backoff``.

    ``backoff`` is the wait policy of ``$SWING_MPI_WAIT=backoff`` or of a node with more ranks than
    cores (:mod:`swing_mpi.waiting`). A rank done with its timed call then sleeps in the first barrier
    instead of spinning in MPI's progress loop beside the ranks still in theirs, on cores they need.
    The second, MPI's own, starts the next timed call on all ranks at once: leaving the sleeping one,
    ranks wake up to a sleep apart, and 16 ranks on 2 cores timed 8 B calls at 28 ms instead of 0.8 ms.
    """
    from ..waiting import wait_all

    if _wait_mode(comm) == "backoff":
        wait_all([comm.Ibarrier()], None, "backoff")
    comm.Barrier()


def timed(comm: Any, pt: Point, call: Callable[[], Any], recv: np.ndarray, batch: int = 1,
           start: Callable[[], float] | None = None, settle: int = 0) -> float:
    """Time ``batch`` back-to-back calls from a barrier (or ``start``'s instant); return the time per call.

    In place, the input is loaded into ``recv`` first (once: the later calls
    of a batch reduce the earlier results, as a program's loop would).
    ``settle``: untimed calls of the same algorithm first (each on the input,
    each from a barrier as the timed one), so the timed one finds what its own
    calls leave, as in a program's loop. Without those barriers the settling
    calls presumably run skewed across ranks, and the timed call after them ran slower in
    a way that depends on the algorithm (Open MPI, 16 ranks, 16 MiB: ours
    78 -> 88 ms, ``MPI_Allreduce`` 85 -> 87 ms).
    """
    for _ in range(settle):
        pt.load(recv)
        barrier(comm)
        call()
    pt.load(recv)
    if start is None:
        barrier(comm)
        t0 = time.perf_counter()
    else:
        t0 = start()
    for _ in range(batch):
        call()
    return (time.perf_counter() - t0) / batch


def balanced_rows(n: int) -> list[list[int]]:
    """Return orders of ``range(n)`` in which every candidate comes right after every other equally often.

    A Williams design: the row ``0, 1, n-1, 2, n-2, ...`` and its ``n`` shifts (mod ``n``) put each
    ordered pair side by side exactly once for even ``n``; for odd ``n`` the shifts and their reverses
    (``2n`` rows) put it there exactly twice.
    """
    if n <= 1:
        return [list(range(n))]
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % n for x in first] for i in range(n)]
    return rows if n % 2 == 0 else rows + [r[::-1] for r in rows]


def shuffled(n: int, seed: int = 2024) -> Iterator[list[int]]:
    """Yield orders of ``range(n)``, a new one each time: the same sequence on every rank (same ``seed``).

    Interleaved timing goes through its candidates in these orders. A call timed right after a long or
    heavy one runs slower: a light call after a long Python algorithm (which leaves the caches and the
    scheduler's state to the next call) measured 1.3-1.9x its time after a light one (8 B, p = 4); in the
    3x4 lab at 256 KiB a call right after MPICH's default (100 ms of busy polling) took 1.5x its time
    after any other. So who runs right before whom must not favour anyone: the orders go through the
    rows of :func:`balanced_rows` (each candidate after each other equally often within a cycle of rows),
    under a new random relabelling every cycle, each next row the one whose seam with the row before
    (last candidate, first candidate) is the pair seen least so far. One random shuffle per iteration is not
    enough over a few iterations: with the fixed seed every launch drew the same 15 orders of 5, and
    in them the first candidate followed the fifth 7 times of 14 (the others 1-5 times), in every launch.
    Give each launch its own ``seed`` (:func:`order_seed`), so launches do not repeat one another's luck.
    """
    rng = random.Random(seed)
    while n == 0:
        yield []
    rows = balanced_rows(n)
    seen: dict[tuple[int, int], int] = {}  # how often b ran right after a so far, rows' seams included
    last = -1
    while True:
        relabel = list(range(n))
        rng.shuffle(relabel)
        left = [[relabel[x] for x in r] for r in rows]
        rng.shuffle(left)
        while left:  # the next row: the one whose seam with the last row is the least seen pair
            row = min(left, key=lambda r: seen.get((last, r[0]), 0))
            left.remove(row)
            for a, b in zip([last, *row], row):
                seen[a, b] = seen.get((a, b), 0) + 1
            last = row[-1]
            yield list(row)


def order_seed(comm: Any) -> int:
    """Return a seed for :func:`shuffled` drawn afresh by rank 0 and the same on every rank (collective)."""
    return int(comm.bcast(random.SystemRandom().randrange(1 << 31) if comm.Get_rank() == 0 else None, root=0))


def time_point(comm: Any, pt: Point, preps: Sequence[Prepared], *, interleave: bool = True,
               batch: int = 1, start: Callable[[], float] | None = None,
               seed: int | None = None, settle: int = 0, streak: int = 1) -> list[dict[str, Any]]:
    """Time every prepared algorithm on ``pt``; return one result dict per algorithm, equal on all ranks.

    ``batch``: calls per iteration, back to back from one barrier (:func:`timed`).
    ``start``: how an iteration starts (:class:`SyncStart`); default a barrier.
    ``settle``: untimed calls of the same algorithm right before each timed
    one (:func:`timed`), so that what the links hold (a rate limiter's burst
    allowance, a queue) is what this algorithm's own calls leave. It does not
    undo everything a switch of algorithm does: on shared memory at 8 B-1 KiB,
    interleaving two algorithms that run the same ``MPI_Allreduce`` (``auto``
    and ``native``), the first timed call after the switch took 5-40 % longer
    than the second in every launch, with 0, 1 or 3 settling calls, by an
    amount that differs per algorithm and launch (ratios of the same call
    0.86-1.29 across launches); timed ``interleave=False`` (a block of each,
    as a program's loop) the same pairs gave 0.95-1.09.
    ``streak``: interleaved, each algorithm's turn is that many timed calls
    in a row (iterations ``i .. i+streak-1``), so only the first of them
    follows a switch, while slow drifts of the machine still land on every
    algorithm alike.

    ``interleave``: iteration ``i`` of every algorithm, then iteration ``i+1``
    (round robin), so a burst of machine noise lands on all algorithms alike,
    in a new order each iteration (:func:`shuffled`, from ``seed``, default a
    fresh one per call: :func:`order_seed`), so that what a call finds left by
    the one before it (a drained link queue, caches and a scheduler that a long
    Python algorithm or MPI's busy polling left) is every algorithm's alike;
    otherwise all iterations of one algorithm, then the next (OSU style), the
    algorithms in the first of those orders.
    """
    from mpi4py import MPI

    if seed is None:
        seed = order_seed(comm)
    orders = shuffled(len(preps), seed)
    if interleave:
        for i in range(0, max((q.iters for q in preps), default=0), streak):
            for j in next(orders):
                q = preps[j]
                for _ in range(min(streak, q.iters - i)):
                    q.times.append(timed(comm, pt, q.call, q.recv, batch, start, settle))
    else:  # one algorithm after the other, in an order of the seed's: none is always first or after the same one
        for j in next(orders):
            q = preps[j]
            q.times = [timed(comm, pt, q.call, q.recv, batch, start, settle) for _ in range(q.iters)]
    flat = np.array([t for q in preps for t in q.times], np.float64)
    comm.Allreduce(MPI.IN_PLACE, flat, MPI.MAX)  # an iteration takes as long as its slowest rank
    bus = pt.collective.bus_factor(comm.Get_size())
    out, k = [], 0
    for q in preps:
        times = flat[k:k + q.iters]
        k += q.iters
        us = times * 1e6
        med = float(np.median(times))
        algbw = pt.nbytes / med if med > 0 else None
        out.append({
            "iters": q.iters,
            "time_avg_us": float(us.mean()), "time_min_us": float(us.min()), "time_max_us": float(us.max()),
            "time_median_us": med * 1e6,
            "algbw_Bps": algbw,
            "busbw_Bps": None if algbw is None else algbw * bus,
            "wrong": q.wrong,
            "times_us": [float(x) for x in us],
            "order_seed": seed,  # the orders: shuffled(len(preps), seed), preps in row order (blocked: the first)
        })
    return out
