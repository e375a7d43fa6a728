"""The one transport: runs a :class:`Schedule` over MPI with Isend/Irecv.

A :class:`Plan` is built once per (communicator, schedule, datatype, op): it
resolves every transfer to byte offsets, allocates the scratch buffers and
picks the reduction kernel. :meth:`Plan.run` then only posts requests, waits
and reduces (the gloo model: setup once, ``run()`` only moves data).

Progress: the lanes (sub-collectives) advance in lockstep. A round posts
all receives and sends of the current step of every lane at once; a lane's
received data is applied (reduced or copied) as soon as that lane's step has
completed, overlapping the other lanes' transfers, but the next round starts
only when every lane has finished the step. The schedules are built for this:
in each step the lanes of a rank use distinct ports (Swing's 2D lanes on a
torus), so the ports are never shared. Lanes that each ran ahead on their own
drifted apart: a lane done early (say, its link's token bucket was full after
an idle moment) moved on to a port that another lane was still using, and
both ran at half speed. On the 4x4 lab (40 Mbit/s links, 4 MiB float64)
independent lanes took 0.536–0.567 s and lockstep lanes 0.397–0.407 s
against the model's 0.393 s (medians of 7, two runs each, side by side).
Received data is applied only after the whole step of its lane has completed,
so buffers being sent are never modified while in flight.
"""

from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI

from .buffers import numpy_dtype
from .schedule.base import COPY, REDUCE, Schedule

__all__ = ["Plan", "Reducer", "TAG_BASE", "MAX_LANES", "TAG_SEQS"]

TAG_BASE = 16
MAX_LANES = 64
"""At most 64 lanes (2D ≤ 64: tori of up to 32 dimensions)."""
TAG_SEQS = 256
"""Lane ``i`` of operation number ``seq`` uses tag
``TAG_BASE + (seq mod TAG_SEQS)·MAX_LANES + i`` on our private communicator
(at most 16400, below the 32767 every MPI guarantees)."""


def _ufunc_for(op: MPI.Op):
    for mpi_op, uf in ((MPI.SUM, np.add), (MPI.PROD, np.multiply), (MPI.MAX, np.maximum),
                       (MPI.MIN, np.minimum), (MPI.BAND, np.bitwise_and),
                       (MPI.BOR, np.bitwise_or), (MPI.BXOR, np.bitwise_xor)):
        if op == mpi_op:
            return uf
    return None


class Reducer:
    """``local = peer op local`` or ``local = local op peer`` on byte views.

    Uses a numpy ufunc where it is exactly MPI's operation (SUM and PROD on
    integer, float and complex types; MAX, MIN and bitwise ops on integers);
    everything else goes through ``op.Reduce_local`` (all predefined ops and
    datatypes, pair types for MAXLOC/MINLOC, user ops).
    """

    def __init__(self, op: MPI.Op, datatype: MPI.Datatype) -> None:
        self.op = op
        self.datatype = datatype
        self.extent = datatype.extent
        self.ufunc = None
        self.dtype = numpy_dtype(datatype)
        if self.dtype is not None:
            uf = _ufunc_for(op)
            kind = self.dtype.kind
            if uf is not None:
                if (op == MPI.SUM or op == MPI.PROD) and kind in "iufc":
                    self.ufunc = uf
                elif kind in "iu":
                    self.ufunc = uf
        self._tmp = np.empty(0, np.uint8)

    def __call__(self, peer: np.ndarray, local: np.ndarray, peer_first: bool) -> None:
        n = len(local) // self.extent
        if not n:
            return
        if self.ufunc is not None:
            a = peer.view(self.dtype)
            b = local.view(self.dtype)
            if peer_first:
                self.ufunc(a, b, out=b)
            else:
                self.ufunc(b, a, out=b)
            return
        if peer_first:
            self.op.Reduce_local([peer, n, self.datatype], [local, n, self.datatype])
        else:
            # local op peer: reduce into the peer's (scratch) copy, then copy back
            self.op.Reduce_local([local, n, self.datatype], [peer, n, self.datatype])
            local[...] = peer


_WAIT = os.environ.get("SWING_MPI_WAIT", "yield")
_YIELD = _WAIT != "spin"
_SLEEP = float(os.environ.get("SWING_MPI_SLEEP_US", "0")) * 1e-6


def _wait_some(reqs: list[MPI.Request]) -> list[int] | None:
    """``Waitsome``, but yielding the CPU between polls.

    MPICH busy-polls inside ``Waitsome``; with more ranks than cores (tests,
    the emulated lab) a spinning rank starves the peer it waits for. Polling
    with ``Testsome`` and ``sched_yield`` costs a microsecond on an idle core
    and lets the other ranks run on a busy one. ``SWING_MPI_WAIT=spin``
    restores plain ``Waitsome``.
    """
    if not _YIELD:
        return MPI.Request.Waitsome(reqs)
    polls = 0
    while True:
        done = MPI.Request.Testsome(reqs)
        if done is None or done:
            return done
        polls += 1
        if _SLEEP and polls > 2:
            time.sleep(_SLEEP)
        else:
            os.sched_yield()


def _wait_all(reqs: list[MPI.Request]) -> None:
    """``Waitall`` with the yielding poll of :func:`_wait_some`."""
    if not _YIELD:
        MPI.Request.Waitall(reqs)
        return
    while not MPI.Request.Testall(reqs):
        os.sched_yield()


class _Xfer:
    """A transfer resolved to byte offsets and scratch views."""

    __slots__ = ("peer", "send", "recv", "action", "peer_first", "send_buf", "recv_buf",
                 "send_elems", "recv_elems", "direct_send", "direct_recv")

    def __init__(self, t, ext: int) -> None:
        self.peer = t.peer
        self.send = [(a * ext, b * ext) for a, b in t.send]
        self.recv = [(a * ext, b * ext) for a, b in t.recv]
        self.action = t.action
        self.peer_first = t.peer_first
        self.send_elems = t.send_count
        self.recv_elems = t.recv_count
        # one contiguous range: send straight from / receive straight into the work buffer
        self.direct_send = len(self.send) == 1
        self.direct_recv = len(self.recv) == 1 and t.action == COPY
        self.send_buf = None
        self.recv_buf = None


class Plan:
    """A schedule bound to a communicator, a datatype and an op."""

    def __init__(self, comm: MPI.Intracomm, schedule: Schedule, datatype: MPI.Datatype,
                 op: MPI.Op) -> None:
        self.comm = comm
        self.schedule = schedule
        self.datatype = datatype
        self.ext = datatype.extent
        self.reduce = Reducer(op, datatype)
        ext = self.ext
        self.vec_bytes = schedule.count * ext
        self.work_bytes = self.vec_bytes * schedule.slots
        self.lanes: list[list[tuple[list[_Xfer], bool]]] = []
        scratch_need = 0
        lane_layouts = []
        for lane in schedule.lanes:
            steps = []
            need = 0
            for st in lane:
                xs = [_Xfer(t, ext) for t in st.transfers]
                sent = [r for x in xs for r in x.send]
                for x in xs:  # never receive straight into bytes that this step also sends
                    if x.direct_recv and any(a < d and c < b for a, b in x.recv for c, d in sent):
                        x.direct_recv = False
                size = sum((x.send_elems * ext if not x.direct_send else 0)
                           + (x.recv_elems * ext if not x.direct_recv else 0) for x in xs)
                need = max(need, size)
                steps.append((xs, st.combine))
            lane_layouts.append((scratch_need, need))
            scratch_need += need
            self.lanes.append(steps)
        self.scratch = np.empty(scratch_need, np.uint8)
        # carve each step's scratch out of its lane's region (steps of a lane run one at a time)
        for (base, _), steps in zip(lane_layouts, self.lanes):
            for xs, _ in steps:
                off = base
                for x in xs:
                    if x.send_elems and not x.direct_send:
                        x.send_buf = self.scratch[off:off + x.send_elems * ext]
                        off += x.send_elems * ext
                    if x.recv_elems and not x.direct_recv:
                        x.recv_buf = self.scratch[off:off + x.recv_elems * ext]
                        off += x.recv_elems * ext
        self.slot_work = np.empty(self.work_bytes if schedule.slots > 1 else 0, np.uint8)
        if len(self.lanes) > MAX_LANES:
            raise ValueError(f"{len(self.lanes)} lanes: at most {MAX_LANES} are supported")
        self.active = False
        self._tag = TAG_BASE

    # -- data movement ------------------------------------------------------
    def _post(self, lane: int, step: int, work: np.ndarray) -> list[MPI.Request]:
        xs, _ = self.lanes[lane][step]
        reqs: list[MPI.Request] = []
        tag = self._tag + lane
        dt = self.datatype
        comm = self.comm
        for x in xs:
            if x.recv_elems:
                if x.direct_recv:
                    a, b = x.recv[0]
                    buf = work[a:b]
                else:
                    buf = x.recv_buf
                reqs.append(comm.Irecv([buf, x.recv_elems, dt], x.peer, tag))
        for x in xs:
            if x.send_elems:
                if x.direct_send:
                    a, b = x.send[0]
                    buf = work[a:b]
                else:
                    buf = x.send_buf
                    off = 0
                    for a, b in x.send:
                        buf[off:off + b - a] = work[a:b]
                        off += b - a
                reqs.append(comm.Isend([buf, x.send_elems, dt], x.peer, tag))
        return reqs

    def _apply(self, lane: int, step: int, work: np.ndarray) -> None:
        xs, combine = self.lanes[lane][step]
        for x in xs:
            if not x.recv_elems or x.direct_recv:
                continue
            off = 0
            for a, b in x.recv:
                chunk = x.recv_buf[off:off + b - a]
                off += b - a
                if x.action == REDUCE:
                    self.reduce(chunk, work[a:b], x.peer_first)
                else:
                    work[a:b] = chunk
        if combine:
            n = self.vec_bytes
            for i in range(1, self.schedule.slots):
                self.reduce(work[(i - 1) * n:i * n], work[i * n:(i + 1) * n], True)

    # -- the state machine ------------------------------------------------------
    def start(self, result: np.ndarray, source: np.ndarray | None = None, *, seq: int = 0) -> None:
        """Begin an allreduce into ``result`` (bytes); ``source`` is the input if not in place.

        ``seq`` numbers the operation on its communicator (equal on all ranks,
        since MPI requires collectives to start in the same order everywhere):
        it selects the tags, so operations in flight at the same time on one
        communicator never match each other's messages.
        """
        self._begin(result, source, seq)
        nl = len(self.lanes)
        self._pos = [0] * nl
        self._left = [0] * nl
        self._reqs: list[MPI.Request] = []
        self._owner: list[int] = []
        self.active = True
        self._round()
        if not self._reqs:
            self._finish()

    def test(self) -> bool:
        """Make progress without blocking; true once the allreduce is complete."""
        if self.active:
            self._progress(block=False)
        return not self.active

    def wait(self) -> None:
        """Block until the allreduce is complete."""
        while self.active:
            self._progress(block=True)

    def run(self, result: np.ndarray, source: np.ndarray | None = None, *, seq: int = 0) -> None:
        """A blocking allreduce: :meth:`start` then :meth:`wait`.

        With one lane, the same steps without the bookkeeping that lets several
        lanes progress together (a third of swing-lat's per-call time at p = 2).
        """
        if len(self.lanes) != 1:
            self.start(result, source, seq=seq)
            self.wait()
            return
        work = self._begin(result, source, seq)
        self.active = True
        for k in range(len(self.lanes[0])):
            reqs = self._post(0, k, work)
            if reqs:
                _wait_all(reqs)
            self._apply(0, k, work)
        self._finish()

    def _begin(self, result: np.ndarray, source: np.ndarray | None, seq: int) -> np.ndarray:
        """The input in place, the tags of operation ``seq``; returns the work buffer."""
        if self.active:
            raise RuntimeError("this allreduce is still in progress; wait for it before starting it again")
        s = self.schedule
        n = self.vec_bytes
        if s.slots > 1:
            work = self.slot_work
            work[s.input_slot * n:(s.input_slot + 1) * n] = result if source is None else source
        else:
            work = result
            if source is not None and n:
                result[...] = source
        self._result = result
        self._work = work
        self._tag = TAG_BASE + (seq % TAG_SEQS) * MAX_LANES
        return work

    def _round(self) -> None:
        """Post the current step of every unfinished lane (the lockstep of the module doc).

        A lane with nothing to move in its step (this rank sits it out) completes
        it at once and posts its next step in the next round, with the others.
        """
        work = self._work
        pos = self._pos
        while True:
            busy = False
            for lane, steps in enumerate(self.lanes):
                k = pos[lane]
                if k == len(steps):
                    continue
                busy = True
                rs = self._post(lane, k, work)
                if rs:
                    self._left[lane] = len(rs)
                    self._reqs.extend(rs)
                    self._owner.extend([lane] * len(rs))
                else:
                    self._apply(lane, k, work)
                    pos[lane] = k + 1
            if self._reqs or not busy:
                return

    def _progress(self, block: bool) -> None:
        reqs = self._reqs
        if block and len(self.lanes) == 1:
            _wait_all(reqs)  # one lane: its step needs every request anyway
            done = list(range(len(reqs)))
        else:
            done = _wait_some(reqs) if block else MPI.Request.Testsome(reqs)
        if done:
            finished = []
            for i in done:
                lane = self._owner[i]
                self._left[lane] -= 1
                if self._left[lane] == 0:
                    finished.append(lane)
            if len(done) == len(reqs):
                reqs.clear()
                self._owner.clear()
            else:
                gone = set(done)
                keep = [i for i in range(len(reqs)) if i not in gone]
                self._reqs = [reqs[i] for i in keep]
                self._owner = [self._owner[i] for i in keep]
            for lane in finished:
                self._apply(lane, self._pos[lane], self._work)
                self._pos[lane] += 1
            if not self._reqs:
                self._round()
        if not self._reqs:
            self._finish()

    def _finish(self) -> None:
        s = self.schedule
        if s.slots > 1:
            n = self.vec_bytes
            self._result[...] = self._work[s.result_slot * n:(s.result_slot + 1) * n]
        self._result = self._work = None
        self.active = False
