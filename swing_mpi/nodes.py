"""Many ranks per node: the torus schedule among nodes, shared memory inside each node, every core reducing.

On a torus machine the torus links nodes, and a node runs ``K`` ranks. A call whose ``dims`` name
fewer places than the communicator has ranks (``p = K × prod(dims)``) takes ``dims`` as the torus of
*nodes* and runs here.

Nodes: the ranks MPI places in one shared-memory domain (``Split_type(COMM_TYPE_SHARED)``), or, with
``$SWING_MPI_RANKS_PER_NODE=K``, each ``K`` consecutive ranks (which must then share memory). Every
node must hold the same number of ranks, consecutive in the communicator (node ``i`` holds ranks
``iK … iK+K−1``), and the nodes must fill ``dims``: anything else is a ``ValueError`` on every rank
before any data moves. Node ``i`` sits at torus position ``i`` (row-major, as for ranks).

Algorithm (multi-leader allreduce, blocking calls):
    1. every rank copies its vector into its slot of a shared-memory window of the node; barrier;
    2. the vector is cut into ``L ≤ K`` chunks; rank ``j`` of the node reduces chunk ``j`` over the
       node's ``K`` slots, in rank order (every core reducing at once);
    3. rank ``j`` of every node runs the torus allreduce (the algorithm asked for, or ``auto``'s pick)
       on its chunk among the nodes: ``L`` lanes at once, each on ``1/L`` of the vector, sharing the
       node's links; it writes the result to its slot; barrier;
    4. every rank copies the other chunks out of their owners' slots.
    ``L = min(K, bytes // $SWING_MPI_NODE_CHUNK)`` (at least 1): a small vector runs on one leader,
    a large one on all ``K``. Slots are double-buffered, so a call needs two node barriers.

Reduce-scatter and all-gather (blocking): :func:`reduce_scatter` and :func:`allgather`, one node
barrier a call.

Restrictions: a non-commutative op keeps rank order when the algorithm among nodes does (the node
reduction is in rank order and nodes hold consecutive ranks); nonblocking and persistent calls run
the torus algorithm over all ranks on the torus ``dims + (K,)`` (the node's ranks as one more
dimension, whose links are the node's memory): the same results, without the node phases.

Cost (``n`` bytes, ``K`` ranks a node): the node phases move ``2n`` bytes in and ``n`` out per rank
and reduce ``(K−1)n/K`` bytes per rank (memory bandwidth, all cores); the torus phase is the
algorithm's on ``n/L`` bytes per lane, the node's links carrying ``n`` as with one rank per node.
"""

from __future__ import annotations

import atexit
import math
import threading
import weakref
from typing import Any

import numpy as np
from mpi4py import MPI

from .buffers import Args, numpy_dtype
from .choose import node_lanes
from .config import rc
from .reducer import Reducer
from .state import NODE_HINTS, arrive
from .topology import node_dims
from .waiting import bounded_allgather, node_info, wait_collective

__all__ = ["NodeLayout", "node_layout", "node_torus", "chunks", "lanes_for", "allreduce", "reduce_scatter",
           "allgather", "flat_dims"]


def node_torus(comm: MPI.Comm, dims: Any) -> tuple[int, ...] | None:
    """Return the torus of nodes when ``dims`` (else ``$SWING_MPI_DIMS``) names fewer places than ranks (local).

    ``None``: ``dims`` is a torus of ranks (today's meaning: its product is the rank count), or is
    left to the flat path to accept or refuse (a product that does not divide the rank count).
    """
    spec = dims if dims is not None else rc.dims
    return None if spec is None else node_dims(spec, comm.Get_size())


def chunks(count: int, lanes: int) -> list[tuple[int, int]]:
    """Cut ``count`` elements into ``lanes`` chunks (start, length), the first ones one longer."""
    base, extra = divmod(count, lanes)
    out, start = [], 0
    for j in range(lanes):
        n = base + (j < extra)
        out.append((start, n))
        start += n
    return out


def lanes_for(nbytes: int, count: int, k: int, chunk: int | None = None) -> int:
    """Return how many of a node's ``k`` ranks run the torus phase for ``nbytes`` (``count`` elements).

    :func:`swing_mpi.choose.node_lanes` with ``chunk`` defaulting to ``$SWING_MPI_NODE_CHUNK``.
    """
    return node_lanes(nbytes, count, k, rc.node_chunk if chunk is None else chunk)


def flat_dims(nodes: tuple[int, ...], k: int) -> tuple[int, ...]:
    """Return the torus of ranks of a node torus: ``nodes + (k,)`` (a node's ranks are the fastest side)."""
    return (*nodes, k)


class NodeLayout:
    """The nodes of one communicator: this rank's node and lane communicators and its shared window."""

    def __init__(self, comm: MPI.Comm) -> None:
        """Find the nodes (collective over ``comm``); ``problem`` says why they cannot serve a node torus."""
        timeout = rc.timeout
        arrive(comm, timeout)
        p, me = comm.Get_size(), comm.Get_rank()
        shm = comm.Split_type(MPI.COMM_TYPE_SHARED, key=me)
        try:
            first = shm.allreduce(me, op=MPI.MIN)
        finally:
            shm.Free()
        every: list[int] = bounded_allgather(comm, first, "finding the nodes", timeout) if p > 1 else [first]
        self.p = p
        self.problem: str | None = None
        want = self.asked = rc.ranks_per_node
        """``$SWING_MPI_RANKS_PER_NODE`` when the nodes were found (another value finds them again)."""
        if want is not None:
            k = want
            if p % k:
                self.problem = (f"$SWING_MPI_RANKS_PER_NODE={k} does not divide the communicator's {p} ranks")
            else:
                apart = [g for g in range(p // k) if len(set(every[g * k:(g + 1) * k])) != 1]
                if apart:
                    g = apart[0]
                    self.problem = (f"$SWING_MPI_RANKS_PER_NODE={k} makes ranks {g * k}-{g * k + k - 1} a node, "
                                    "but MPI does not place them in one shared-memory domain")
        else:
            sizes: dict[int, int] = {}
            for f in every:
                sizes[f] = sizes.get(f, 0) + 1
            k = max(sizes.values())
            if len(set(sizes.values())) != 1:
                self.problem = ("the nodes hold different numbers of ranks: "
                                + ", ".join(f"{n} on the node of rank {f}" for f, n in sorted(sizes.items())))
            else:
                scattered = [r for r in range(p) if every[r] != every[(r // k) * k]]
                if scattered:
                    self.problem = (f"the ranks of a node are not consecutive (rank {scattered[0]} is on the node "
                                    f"of rank {every[scattered[0]]}): a node must hold ranks iK..iK+K-1; "
                                    "renumber (comm.Split(0, key)) or place ranks by node")
        self.k = k
        """Ranks a node."""
        self.nodes = p // k
        self.node = me // k
        """This rank's node (its torus position)."""
        self.local = me % k
        """This rank's place in its node (the lane it serves)."""
        self.node_comm: Any = None
        self.lane_comm: Any = None
        self.wait, self.threads = node_info(comm, timeout)
        """How this rank waits and reduces: its node's answer (every rank of the node counts)."""
        if self.problem is None:
            self.node_comm = comm.Split(self.node, self.local)
            self.lane_comm = comm.Split(self.local, self.node)
            NODE_HINTS[self.lane_comm.py2f()] = (self.wait, self.threads)
        self._typed: tuple[Any, np.ndarray] | None = None
        self._win: Any = None
        self._slots: list[np.ndarray] = []
        self._cap = 0
        self.calls = 0
        """Blocking node calls so far (selects the half of the slots a call uses)."""

    def typed(self, chunk: np.ndarray, dt: MPI.Datatype, n: int) -> Any:
        """Return the buffer a lane's allreduce runs on: ``chunk`` as a typed array, or an mpi4py buffer spec.

        The array is last call's object where it is the same memory, so the lane's call takes the repeat path.
        """
        npt = numpy_dtype(dt)
        if npt is None:
            return [chunk, n, dt]
        key = (chunk.__array_interface__["data"][0], len(chunk), npt)
        if self._typed is not None and self._typed[0] == key:
            return self._typed[1]
        view = chunk.view(npt)
        self._typed = (key, view)  # one only: it keeps the user's array alive
        return view

    def check(self, nodes: tuple[int, ...]) -> None:
        """Raise ``ValueError`` (on every rank alike) unless the nodes fill the torus ``nodes``."""
        shape = "x".join(map(str, nodes))
        if self.problem is not None:
            raise ValueError(f"dims {shape} make a torus of nodes ({self.p} ranks on {math.prod(nodes)} nodes), "
                             f"but {self.problem}")
        if self.nodes != math.prod(nodes):
            found = f"{self.nodes} node{'s' if self.nodes > 1 else ''}"
            raise ValueError(f"dims {shape} make a torus of {math.prod(nodes)} nodes, but the communicator's "
                             f"{self.p} ranks are on {found} of {self.k} (give dims of {found}, or of {self.p} ranks)")

    def slots(self, nbytes: int) -> list[np.ndarray]:
        """Return every node rank's slot (two halves of at least ``nbytes``), growing the window if needed.

        Collective over the node (every rank asks for the same size).
        """
        need = 2 * nbytes
        if need > self._cap:
            self.free_window()
            cap = 1 << max(12, (need - 1).bit_length())
            self._win = MPI.Win.Allocate_shared(cap, 1, comm=self.node_comm)
            self._win.Lock_all(MPI.MODE_NOCHECK)
            self._slots = [np.frombuffer(self._win.Shared_query(i)[0], np.uint8)[:cap] for i in range(self.k)]
            self._cap = cap
        return self._slots

    def sync(self) -> None:
        """Wait for the node's ranks (a barrier), with the window's memory made consistent before and after it.

        The barrier is nonblocking and waited for under the node's policy and ``$SWING_MPI_TIMEOUT``.
        """
        self._win.Sync()
        wait_collective(self.node_comm.Ibarrier(), self.node_comm, "the node's barrier", rc.timeout,
                        policy=self.wait)
        self._win.Sync()

    def free_window(self) -> None:
        """Free the shared window (collective over the node)."""
        if self._win is not None:
            self._win.Unlock_all()
            self._win.Free()
            self._win = None
            self._slots = []
            self._cap = 0

    def free(self) -> None:
        """Free the window and the communicators (again: nothing)."""
        if MPI.Is_finalized():
            return
        _LIVE.discard(self)
        self.free_window()
        if self.lane_comm is not None:
            NODE_HINTS.pop(self.lane_comm.py2f(), None)
        for c in (self.node_comm, self.lane_comm):
            if c is not None and c != MPI.COMM_NULL:
                c.Free()
        self.node_comm = self.lane_comm = None


_KEYVAL: int | None = None
_LOCK = threading.Lock()
_LIVE: weakref.WeakSet[NodeLayout] = weakref.WeakSet()
"""Layouts not freed yet: ``MPI_Finalize`` frees them first (a shared window left open until the
network layer closes makes MPICH's finalize fail: 'fabricclose failed ... Device or resource busy')."""


def _delete(comm: MPI.Comm, keyval: int, layout: NodeLayout) -> None:
    try:
        layout.free()
    except Exception:  # never raise out of an MPI callback
        pass


def _at_exit() -> None:
    """Free every live layout before mpi4py finalizes MPI (its exit handler was registered first, so runs after)."""
    for layout in list(_LIVE):
        try:
            layout.free()
        except Exception:  # never raise out of an MPI callback
            pass


def node_layout(comm: MPI.Comm) -> NodeLayout:
    """Return the nodes of ``comm``, found (collectively) on the first call and kept on the communicator."""
    global _KEYVAL
    if _KEYVAL is None:
        with _LOCK:
            if _KEYVAL is None:
                atexit.register(_at_exit)
                _KEYVAL = MPI.Comm.Create_keyval(delete_fn=_delete)
    layout: Any = comm.Get_attr(_KEYVAL)
    if layout is None or layout.asked != rc.ranks_per_node:
        if layout is not None:
            layout.free()
        layout = NodeLayout(comm)
        comm.Set_attr(_KEYVAL, layout)
        _LIVE.add(layout)
    return layout


def allreduce(layout: NodeLayout, nodes: tuple[int, ...], a: Args, op: MPI.Op, sendbuf: Any,
              lane_call: Any) -> None:
    """Run one blocking node-aware allreduce (see the module's docstring) on checked arguments ``a``.

    ``lane_call(comm, spec)`` runs the torus allreduce in place on ``spec`` among ``comm``'s ranks.
    """
    count, ext, dt = a.count, a.recv.extent, a.datatype
    if not count:
        return
    nbytes = count * ext
    k, j = layout.k, layout.local
    lanes = lanes_for(nbytes, count, k)
    parts = chunks(count, lanes)
    slots, half = _half(layout, nbytes)
    mine = slots[j][half:half + nbytes]
    recv = a.recv.data[:nbytes]
    source = recv if a.send is None else a.send.data[:nbytes]
    mine[...] = source
    layout.sync()
    if j < lanes:
        start, n = parts[j]
        lo, hi = start * ext, (start + n) * ext
        if n:
            acc = recv[lo:hi]
            _reduce_slots(Reducer(op, dt), slots, half + lo, half + hi, acc)
            lane_call(layout.lane_comm, layout.typed(acc, dt, n))
            mine[lo:hi] = acc
    layout.sync()
    for i, (start, n) in enumerate(parts):
        if i != j and n:
            lo, hi = start * ext, (start + n) * ext
            recv[lo:hi] = slots[i][half + lo:half + hi]


def _reduce_slots(red: Reducer, slots: list[np.ndarray], lo: int, hi: int, out: np.ndarray) -> None:
    """``out = slots[0][lo:hi] op slots[1][lo:hi] op ...``: every node rank's bytes, in rank order."""
    red.first(slots[1][lo:hi], slots[0][lo:hi], out, False)
    for i in range(2, len(slots)):
        red(slots[i][lo:hi], out, False)


def _half(layout: NodeLayout, nbytes: int) -> tuple[list[np.ndarray], int]:
    """Return the slots (at least ``nbytes`` a half) and the offset of the half this call writes.

    The halves are the same whatever the size, so a rank still reading the last call's half never
    sees this call's writes; a rank writes a half again only after the next call's barrier.
    """
    slots = layout.slots(nbytes)
    half = (layout.calls & 1) * (len(slots[0]) // 2)
    layout.calls += 1
    return slots, half


def reduce_scatter(layout: NodeLayout, a: Args, op: MPI.Op, lane_call: Any) -> None:
    """Run one blocking node-aware reduce-scatter: block ``r`` of the reduced vector to rank ``r``.

    Every rank copies its vector into its slot; after a node barrier, rank ``j`` reduces, over the
    node's slots in rank order, the blocks of the ``j``-th rank of every node (its lane's vector);
    then ``lane_call(comm, send, recv, counts)`` reduce-scatters that vector among the nodes, block
    ``n`` to node ``n``: each rank gets its block with no copy back (one barrier a call).
    """
    counts = a.counts
    assert counts is not None
    ext, dt, k, j = a.recv.extent, a.datatype, layout.k, layout.local
    total = sum(counts)
    if not total:
        return
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()
    mine_n = counts[layout.node * k + j]
    source = (a.recv.data if a.send is None else a.send.data)[:total * ext]
    out = a.recv.data[:mine_n * ext]
    slots, half = _half(layout, total * ext)
    slots[j][half:half + total * ext] = source
    layout.sync()
    lane_counts = [counts[n * k + j] for n in range(layout.nodes)]
    work = np.empty(sum(lane_counts) * ext, np.uint8)
    red = Reducer(op, dt)
    at = 0
    for n, c in enumerate(lane_counts):
        if c:
            lo = half + starts[n * k + j] * ext
            hi = lo + c * ext
            _reduce_slots(red, slots, lo, hi, work[at:at + c * ext])
            at += c * ext
    lane_call(layout.lane_comm, [work, sum(lane_counts), dt], [out, mine_n, dt], lane_counts)


def allgather(layout: NodeLayout, a: Args, lane_call: Any) -> None:
    """Run one blocking node-aware all-gather: every rank's block to every rank, in rank order.

    Rank ``j`` of every node all-gathers the blocks of the nodes' ``j``-th ranks among the nodes
    (``lane_call(comm, send, recv)``) straight into its slot; after a node barrier, every rank copies
    the ``K`` lanes' blocks into place (one barrier a call).
    """
    counts = a.counts
    assert counts is not None
    n, ext, dt, k, j = counts[0], a.recv.extent, a.datatype, layout.k, layout.local
    if not n:
        return
    m = layout.nodes
    block = n * ext
    recv = a.recv.data[:n * k * m * ext]
    me = layout.node * k + j
    send = recv[me * block:(me + 1) * block] if a.send is None else a.send.data[:block]
    slots, half = _half(layout, m * block)
    lane_call(layout.lane_comm, [send, dt], [slots[j][half:half + m * block], dt])
    layout.sync()
    grid = recv.reshape(m, k, block)
    for i in range(k):
        grid[:, i, :] = slots[i][half:half + m * block].reshape(m, block)
