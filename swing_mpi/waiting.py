"""How a rank waits: the wait policies, the machine's default, and waits bounded by the timeout.

Policies (``$SWING_MPI_WAIT``, :class:`Idle`): ``spin`` is MPI's own ``Waitsome``/``Waitall``;
``yield`` polls with ``Testsome`` and ``sched_yield()`` between polls, so a waiting rank lets the
rank it waits for run on a busy core; ``backoff`` yields a few times, then sleeps, longer the
longer it has waited, for ranks whose bytes the kernel moves (TCP) while they sleep.

Where the variable is not set, :func:`node_policy` picks one per communicator when it is first
used: ``spin`` where a host has a core for each of the communicator's ranks on it; with more ranks
than cores, ``yield`` where those ranks share memory (MPI moves their bytes with their own CPUs, so a
waiting rank hands its core to the one it waits for; sleeping there cost 2-8x a call), else
``backoff`` (the kernel moves the bytes, TCP, while a rank sleeps, and every poll takes a core from a
rank still working). Every rank of a host computes the same answer from the same numbers (its ranks,
the union of their CPU affinities, the size of its shared-memory group).

:func:`wait_collective` waits for a nonblocking collective within ``$SWING_MPI_TIMEOUT``; when it
runs out, :func:`census` finds which ranks are missing, so the ``TimeoutError`` names them.
Collectives here are MPI's own (``MPI.Comm.Ibcast(comm, ...)``): ``comm`` may be a
:class:`swing_mpi.Intracomm`, whose methods of the same names are ours.
"""

from __future__ import annotations

import os
import pickle
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from .config import WAITS, rc

__all__ = ["WAITS", "END_THE_JOB", "BACKOFF_SPINS", "BACKOFF_FRACTION", "BACKOFF_MIN", "BACKOFF_MAX", "CENSUS_GRACE",
           "Idle", "wait_some", "wait_all", "machine_policy", "machine_threads", "keep_alive", "node_policy",
           "node_info", "census", "wait_collective", "bounded_bcast", "bounded_allgather", "rank_name",
           "default_policy"]

BACKOFF_SPINS = 4
"""``backoff``: idle polls with ``sched_yield`` before the first sleep."""
BACKOFF_FRACTION = 0.25
"""``backoff``: each sleep is this fraction of the time already waited since the first sleep ..."""
BACKOFF_MIN = 20e-6
"""... but at least this many seconds ..."""
BACKOFF_MAX = 4e-3
"""... and at most this many: a completion is seen at most 4 ms (or a quarter of the wait) late."""
END_THE_JOB = "end the job (MPI.COMM_WORLD.Abort())"
"""What every timeout message advises. Not ``comm.Abort()``: MPICH aborts any other communicator by
sending its ranks a message and waiting for the sends, which a rank stuck outside MPI may hold up."""
CENSUS_GRACE = 0.5
"""Seconds a timed-out wait gives the ranks that did arrive to answer the :func:`census`."""


class Idle:
    """What a waiting rank does between two polls that completed nothing (one wait's state).

    ``yield``: ``sched_yield()`` (or ``$SWING_MPI_SLEEP_US`` after the second idle poll);
    ``backoff``: :data:`BACKOFF_SPINS` yields, then sleeps that grow with the time already waited
    (:data:`BACKOFF_FRACTION` of it, within :data:`BACKOFF_MIN`..:data:`BACKOFF_MAX`), so a long
    wait costs a few dozen polls, not thousands. Not for latency-bound work on idle cores (a
    sleep takes tens of µs more than asked), nor for shared memory on idle cores, where the MPI
    library copies a large message only while polled.
    """

    __slots__ = ("mode", "polls", "since")

    def __init__(self, mode: str) -> None:
        """Start a wait under policy ``mode``."""
        self.mode = mode
        self.polls = 0
        self.since = 0.0

    def __call__(self) -> None:
        """Pass the time between two idle polls."""
        self.polls += 1
        if self.mode == "backoff" and self.polls > BACKOFF_SPINS:
            now = time.monotonic()
            if not self.since:
                self.since = now
            time.sleep(min(BACKOFF_MAX, max(BACKOFF_MIN, (now - self.since) * BACKOFF_FRACTION)))
        elif rc.sleep_us and self.polls > 2:
            time.sleep(rc.sleep_us * 1e-6)
        else:
            os.sched_yield()


def wait_some(reqs: list[MPI.Request], timeout: float | None, mode: str) -> list[int] | None:
    """``Waitsome`` under policy ``mode``; ``[]`` after ``timeout`` seconds without a completion.

    ``spin`` without a timeout is plain ``Waitsome``; otherwise ``Testsome`` and :class:`Idle`.
    """
    if timeout is None and mode == "spin":
        return MPI.Request.Waitsome(reqs)
    deadline = None if timeout is None else time.monotonic() + timeout
    idle = None
    while True:
        done = MPI.Request.Testsome(reqs)
        if done is None or done:
            return done
        if deadline is not None and time.monotonic() > deadline:
            return []
        if idle is None:
            idle = Idle(mode)
        idle()


def wait_all(reqs: list[MPI.Request], timeout: float | None, mode: str) -> bool:
    """``Waitall`` under policy ``mode``; False if ``timeout`` seconds passed first."""
    if timeout is None and mode == "spin":
        MPI.Request.Waitall(reqs)
        return True
    deadline = None if timeout is None else time.monotonic() + timeout
    idle = None
    while not MPI.Request.Testall(reqs):
        if deadline is not None and time.monotonic() > deadline:
            return False
        if idle is None:
            idle = Idle(mode)
        idle()
    return True


def machine_policy(ranks_on_node: int, cores: int, shared_memory: bool = False) -> str:
    """Return the default policy of a node running ``ranks_on_node`` ranks on ``cores`` cores.

    ``shared_memory``: those ranks all share memory (``MPI.COMM_TYPE_SHARED``), so MPI moves their bytes itself.
    """
    if ranks_on_node <= max(1, cores):
        return "spin"
    return "yield" if shared_memory else "backoff"


def _my_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def node_policy(comm: MPI.Comm, timeout: float | None = None) -> str:
    """Return ``$SWING_MPI_WAIT`` if set, else :func:`machine_policy` of this rank's node (collective).

    A node is the ranks with this rank's ``MPI.Get_processor_name()`` (not ``Split_type``: MPICH
    told to use no shared memory, as in the emulated lab, puts every rank on a node of its own);
    its cores are the union of their CPU affinities (ranks bound one to a core still count every
    core). Every rank computes from the same gathered list, so all ranks of a node agree.
    """
    if rc.wait is not None:
        return rc.wait
    return machine_policy(*_host(comm, timeout))


def _host(comm: MPI.Comm, timeout: float | None) -> tuple[int, int, bool]:
    """Return this rank's host: its ranks in ``comm``, its cores, whether they all share memory (collective).

    Shared memory is asked of MPI (``Split_type``) only where some host has more ranks than cores, on
    every rank alike (they all see the same gathered list).
    """
    mine = (MPI.Get_processor_name(), _my_cores())
    every = [mine] if comm.Get_size() == 1 else bounded_allgather(comm, mine, "the wait policy's agreement", timeout)
    hosts: dict[str, tuple[int, set[int]]] = {}
    for name, cores in every:
        n, union = hosts.get(name, (0, set()))
        hosts[name] = (n + 1, union | set(cores))
    ranks, cores = hosts[mine[0]][0], len(hosts[mine[0]][1])
    shared = False
    if any(n > max(1, len(c)) for n, c in hosts.values()):
        group = comm.Split_type(MPI.COMM_TYPE_SHARED)
        shared = group.Get_size() >= ranks
        group.Free()
    return ranks, cores, shared


def machine_threads(ranks_on_node: int, cores: int) -> int:
    """Return the threads each of a node's ranks reduces with: its share of the node's cores (at least 1)."""
    return max(1, cores // max(1, ranks_on_node))


def node_info(comm: MPI.Comm, timeout: float | None = None) -> tuple[str, int]:
    """Return this rank's wait policy (:func:`node_policy`) and reduction threads (collective).

    Threads: ``$SWING_MPI_THREADS`` if set, else :func:`machine_threads` of the node, found as
    :func:`node_policy` finds it (one gather serves both).
    """
    if rc.wait is not None and rc.threads is not None:
        return rc.wait, rc.threads
    ranks, cores, shared = _host(comm, timeout)
    return (rc.wait or machine_policy(ranks, cores, shared),
            rc.threads if rc.threads is not None else machine_threads(ranks, cores))


def default_policy() -> str:
    """Return the policy of a wait outside any communicator's state: ``$SWING_MPI_WAIT``, else ``yield``."""
    return rc.wait or "yield"


def rank_name(comm: MPI.Comm, rank: int) -> str:
    """Return ``rank N``, with the rank in ``MPI.COMM_WORLD`` too where the numbering differs."""
    try:
        world = MPI.Group.Translate_ranks(comm.Get_group(), [rank], MPI.COMM_WORLD.Get_group())[0]
    except MPI.Exception:
        return f"rank {rank}"
    return f"rank {rank}" if world == rank else f"rank {rank} (world rank {world})"


_ABANDONED: list[Any] = []
"""Requests and buffers of timed-out waits: they stay posted, so their memory must stay."""


def keep_alive(obj: Any) -> None:
    """Keep ``obj`` (requests and the buffers they use, after a timed-out wait) alive until the process ends."""
    _ABANDONED.append(obj)


def census(comm: MPI.Comm, grace: float = CENSUS_GRACE) -> list[int]:
    """Return the ranks of ``comm`` not heard from within ``grace`` seconds (collective among those present).

    Each rank broadcasts a byte (one ``Ibcast`` per root). A missing rank's broadcast completes
    nowhere, so it is always named; a broadcast that passes through a missing rank on its way
    may leave its root named too. For a wait that already timed out: the comm stays broken.
    """
    p, me = comm.Get_size(), comm.Get_rank()
    flags = np.zeros(p, np.uint8)
    flags[me] = 1
    reqs = [MPI.Comm.Ibcast(comm, [flags[r:r + 1], 1, MPI.BYTE], root=r) for r in range(p)]
    keep_alive((reqs, flags))
    deadline = time.monotonic() + grace
    done = {me}
    while len(done) < p and time.monotonic() < deadline:
        for i in MPI.Request.Testsome(reqs) or ():
            done.add(i)
        time.sleep(1e-3)
    return [r for r in range(p) if r not in done]


def wait_collective(req: MPI.Request, comm: MPI.Comm, what: str, timeout: float | None,
                    keep: Any = None, policy: str | None = None) -> None:
    """Wait for the nonblocking collective ``req`` on ``comm``; ``TimeoutError`` naming the missing ranks.

    ``timeout`` None: wait forever. ``keep``: buffers the request uses (kept alive if it times out).
    ``policy``: how to wait (default :func:`default_policy`).
    """
    if wait_all([req], timeout, policy or default_policy()):
        return
    keep_alive((req, keep))
    missing = census(comm)
    me = comm.Get_rank()
    who = ", ".join(rank_name(comm, r) for r in missing) or "a rank that has since arrived"
    assert timeout is not None
    raise TimeoutError(f"{what} on {rank_name(comm, me)}: waiting for {who} for more than {timeout:g} s "
                       f"(SWING_MPI_TIMEOUT; not heard from: the missing rank, or one behind it); "
                       f"the communicator is broken, {END_THE_JOB}")


def bounded_bcast(comm: MPI.Comm, obj: Any, what: str, timeout: float | None, root: int = 0) -> Any:
    """``comm.bcast(obj, root)`` within ``timeout`` (:func:`wait_collective`): size, then the pickled bytes."""
    if timeout is None:
        return comm.bcast(obj, root=root)  # lower case: no swing_mpi.Intracomm method of that name
    data = pickle.dumps(obj) if comm.Get_rank() == root else b""
    size = np.array([len(data)], np.int64)
    wait_collective(MPI.Comm.Ibcast(comm, size, root=root), comm, what, timeout, keep=size)
    buf = np.frombuffer(data, np.uint8).copy() if comm.Get_rank() == root else np.empty(int(size[0]), np.uint8)
    wait_collective(MPI.Comm.Ibcast(comm, buf, root=root), comm, what, timeout, keep=buf)
    return obj if comm.Get_rank() == root else pickle.loads(buf.tobytes())


def bounded_allgather(comm: MPI.Comm, obj: Any, what: str, timeout: float | None) -> list[Any]:
    """``comm.allgather(obj)`` within ``timeout`` (:func:`wait_collective`): sizes, then the pickled bytes."""
    if timeout is None:
        return comm.allgather(obj)
    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    sizes = np.empty(comm.Get_size(), np.int64)
    mine = np.array([len(data)], np.int64)
    wait_collective(MPI.Comm.Iallgather(comm, mine, sizes), comm, what, timeout, keep=(mine, sizes))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    buf = np.empty(int(sizes.sum()), np.uint8)
    req = MPI.Comm.Iallgatherv(comm, data, [buf, (sizes.tolist(), starts.tolist()), MPI.BYTE])
    wait_collective(req, comm, what, timeout, keep=(data, buf))
    return [pickle.loads(buf[a:a + n].tobytes()) for a, n in zip(starts.tolist(), sizes.tolist())]
