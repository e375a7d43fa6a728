"""The benchmark's memory guard: leave out what a point's buffers cannot hold.

Every algorithm of a point is set up before the first is timed (they run
interleaved), so their buffers add up; a point that does not fit would have
the kernel kill ranks (``--algorithms all`` at 64 ranks and 4 MiB did:
``swing-lat``'s contributions form keeps a vector per rank). Before each
size the bench estimates every algorithm's per-rank need and leaves out the
hungriest, never ``native``, until the point fits :data:`MEMORY_SHARE` of the
machine's available memory shared by the ranks on it.
"""

from __future__ import annotations

import math
import socket
import sys
from typing import Any

import numpy as np

from ..schedule import AUTO, NATIVE
from ..units import format_size

__all__ = ["MEMORY_SHARE", "memory_budget", "work_bytes", "fit"]

MEMORY_SHARE = 0.6
"""The share of a machine's available memory (``MemAvailable``) the benchmark lets its ranks' buffers use."""


def _mem_available() -> int | None:
    """``MemAvailable`` of this machine in bytes (Linux), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _machine_id() -> str:
    """Return what names the machine whose memory this rank shares.

    The running kernel's boot id (network and UTS namespaces, such as the
    lab's, do not change it), else the host name.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return socket.gethostname()


def memory_budget(comm: Any) -> tuple[int, int, int] | None:
    """``(bytes per rank, ranks on the fullest machine, its available bytes)``, equal on all ranks; None if unknown.

    A rank's share is :data:`MEMORY_SHARE` of its machine's available memory
    split evenly among the ranks on that machine (ranks are grouped by the
    kernel they run on, not by MPI's idea of a node: the lab's ranks sit in
    separate namespaces of one machine); the smallest share counts.
    """
    me = _machine_id()
    here = comm.allgather(me).count(me)
    avail = _mem_available()
    mine = None if avail is None else (int(MEMORY_SHARE * avail / here), here, avail)
    known = [v for v in comm.allgather(mine) if v is not None]
    return min(known) if known else None


def work_bytes(name: str, dims: tuple[int, ...], rank: int, nbytes: int, itemsize: int, exact: bool,
               p: int | None = None) -> int:
    """About the most bytes one rank allocates to run ``name`` on ``nbytes``, beyond the caller's buffers.

    A plan's scratch holds what a step receives before it is reduced: the
    largest step's receives over all lanes (half a vector for the
    bandwidth-optimal schedules, a whole one for ``recdoub``); a schedule with
    ``slots`` (``swing-lat``'s contributions form keeps one vector per rank)
    adds those. MPI's own collective is taken as one vector of temporary space. ``p``: the ranks, where
    ``dims`` may be a torus of nodes (:mod:`swing_mpi.nodes`).
    """
    from ..choose import node_lanes
    from ..config import rc
    from ..schedule import ALGORITHMS, build_schedule

    if name not in ALGORITHMS:
        return nbytes
    if p is not None and math.prod(dims) < p:  # dims of nodes: a lane's chunk among nodes, and the node's slots
        k = p // math.prod(dims)
        count = max(0, nbytes // itemsize)
        lanes = node_lanes(nbytes, count, k, rc.node_chunk) if count else 1
        return 2 * nbytes + work_bytes(name, dims, rank // k, -(-nbytes // lanes), itemsize, exact)
    s = build_schedule(name, dims, rank, max(0, nbytes // itemsize), exact=exact)
    steps = max((len(lane) for lane in s.lanes), default=0)
    step_recv = max((sum(t.recv_count for lane in s.lanes if k < len(lane) for t in lane[k].transfers)
                     for k in range(steps)), default=0)
    return step_recv * itemsize + (s.slots * nbytes if s.slots > 1 else 0)


def fit(comm: Any, algs: list[str], runs: dict[str, str], left_out: dict[str, str],
        budget: tuple[int, int, int], nbytes: int, itemsize: int, dims: tuple[int, ...], exact: bool,
        record: list[dict[str, Any]]) -> list[str]:
    """Return ``algs`` less the hungriest until a point of ``nbytes`` fits ``budget``; equal on all ranks.

    ``runs`` names what each algorithm runs (``auto``'s pick; ``auto`` shares
    that plan when its pick is in ``algs``). Each one left out goes into
    ``left_out`` (algorithm → why, so later sizes skip it) and ``record``, and
    is announced on rank 0's stderr.
    """
    from mpi4py import MPI

    per_rank, ranks, avail = budget
    me, p = comm.Get_rank(), comm.Get_size()
    mine = np.array([0 if a == AUTO and runs[a] in algs else
                     work_bytes(runs[a], dims, me, nbytes, itemsize, exact, p) for a in algs], np.int64)
    comm.Allreduce(MPI.IN_PLACE, mine, op=MPI.MAX)  # one collective for the point, not one per algorithm
    need = dict(zip(algs, (int(n) for n in mine)))
    total = 3 * nbytes + sum(need.values())  # the point's own input, output and reference arrays
    keep = list(algs)
    # the hungriest first; among equals, the one named last
    for a in sorted((a for a in algs if a != NATIVE), key=lambda a: (-need[a], -algs.index(a))):
        if total <= per_rank:
            break
        why = (f"{format_size(nbytes)}: needs about {format_size(need[a])} per rank, and {ranks} ranks share "
               f"{format_size(avail)} available on a machine (the point's buffers may use {MEMORY_SHARE:.0%})")
        left_out[a] = why
        keep.remove(a)
        total -= need[a]
        record.append({"algorithm": a, "size": nbytes, "why": why})
        if comm.Get_rank() == 0:
            print(f"[bench] leaving out {a} from {why}", file=sys.stderr, flush=True)
    return keep
