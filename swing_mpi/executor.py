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
torus), so the ports are never shared. Lanes left to run ahead on their own
drift apart: a lane done early moves on to a port another lane is still
using, and both then share that link at half speed. Received data is applied
only after the whole step of its lane has completed, so buffers being sent
are never modified while in flight.

Copies: a separate input (``sendbuf``) is not copied into the work vector
first; each byte is read from it where the schedule first uses it (sent
from it, or reduced with a peer's data into the work vector), and the last
reductions into a reduce-scatter's block write straight into the caller's
receive buffer (:meth:`Plan._source_plan`). A message of several ranges goes
as one MPI datatype over the buffer (``hindexed``), not packed by numpy into
scratch (``SWING_MPI_DATATYPES=0`` packs). Reductions into scratch copies
stay: a peer's data must land somewhere before it is combined.

Waiting polls (``Testsome``/``Testall`` and ``sched_yield``, see
:func:`_wait_some`) so that oversubscribed ranks let each other run;
``SWING_MPI_WAIT=backoff`` sleeps between polls instead (:class:`_Idle`).

Hangs: with ``SWING_MPI_TIMEOUT=seconds`` (off by default; read at import), a
wait that sees no completion for that long raises :class:`TimeoutError`
naming the operation, the algorithm, the step and the peer ranks that did not
answer. The collective is then broken (its messages stay posted, the other
ranks are stuck or will be): the plan refuses further use, and the job should
end, e.g. with ``comm.Abort()`` (``python -m mpi4py`` aborts on an uncaught
exception).

Threads: a plan is used by one operation at a time and holds no global state;
concurrent calls on different communicators (MPI_THREAD_MULTIPLE) use
different plans. One communicator used from two threads at once is erroneous,
as in MPI.
"""

from __future__ import annotations

import os
import time
import weakref
from typing import Any, cast

import numpy as np
from mpi4py import MPI

from .buffers import numpy_dtype
from .schedule.base import COPY, REDUCE, Schedule

__all__ = ["Plan", "Reducer", "TAG_BASE", "MAX_LANES", "TAG_SEQS", "TIMEOUT", "parse_timeout", "WAITS",
           "wait_policy", "parse_sleep"]

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
        """Pick the ufunc for ``op`` on ``datatype``, if one is exactly MPI's operation."""
        self.op = op
        self.datatype = datatype
        self.extent = datatype.extent
        self.ufunc: np.ufunc | None = None
        self.dtype = numpy_dtype(datatype)
        self._view = self.dtype if self.dtype is not None else np.dtype(np.uint8)
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
        """Reduce the bytes ``peer`` into ``local`` (``peer_first``: ``peer op local``)."""
        n = len(local) // self.extent
        if not n:
            return
        if self.ufunc is not None:
            a = peer.view(self._view)
            b = local.view(self._view)
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

    def first(self, peer: np.ndarray, given: np.ndarray, local: np.ndarray, peer_first: bool) -> None:
        """``local = peer op given`` (``given op peer``): the first reduction into bytes still only in the input."""
        if self.ufunc is not None and len(local) // self.extent:
            a = peer.view(self._view)
            g = given.view(self._view)
            b = local.view(self._view)
            if peer_first:
                self.ufunc(a, g, out=b)
            else:
                self.ufunc(g, a, out=b)
            return
        local[...] = given
        self(peer, local, peer_first)


def parse_timeout(text: str | None) -> float | None:
    """Return the seconds in ``$SWING_MPI_TIMEOUT`` (None: off, also for ``""``, ``0`` or ``off``)."""
    text = (text or "").strip().lower()
    if text in ("", "0", "off", "none", "no"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"SWING_MPI_TIMEOUT={text!r}: expected seconds, e.g. 30 or 0.5") from None
    if not seconds > 0:
        raise ValueError(f"SWING_MPI_TIMEOUT={text!r}: expected a positive number of seconds")
    return seconds


TIMEOUT: float | None = parse_timeout(os.environ.get("SWING_MPI_TIMEOUT"))
"""``$SWING_MPI_TIMEOUT``: seconds a wait may see no completion before :class:`TimeoutError` (None: wait forever).
Read at import; a plan takes the value current when it is built."""

_TYPES = os.environ.get("SWING_MPI_DATATYPES", "1") not in ("0", "off", "no")
"""``$SWING_MPI_DATATYPES=0``: pack several ranges into scratch with numpy instead of an MPI datatype."""


def _ranges_type(datatype: MPI.Datatype, ranges: list[tuple[int, int]], ext: int) -> MPI.Datatype:
    """Return the committed datatype covering byte ``ranges`` of a buffer, in order, as ``datatype`` elements."""
    return datatype.Create_hindexed([(b - a) // ext for a, b in ranges], [a for a, _ in ranges]).Commit()


def _out_offset(out_at: list[tuple[int, int, int]], a: int) -> int:
    """Return where byte ``a`` of the work vector goes in ``out`` (``out_at``: (start, stop, offset) ranges)."""
    for lo, hi, off in out_at:
        if lo <= a < hi:
            return off + a - lo
    raise AssertionError(f"byte {a} is not in the result")


def _free_types(types: list[MPI.Datatype]) -> None:
    if not MPI.Is_finalized():
        for t in types:
            t.Free()


WAITS = ("yield", "spin", "backoff")
"""Values of ``$SWING_MPI_WAIT`` (:func:`_wait_some`)."""

BACKOFF_SPINS = 4
"""``backoff``: idle polls with ``sched_yield`` before the first sleep."""
BACKOFF_FRACTION = 0.25
"""``backoff``: each sleep is this fraction of the time already waited since the first sleep ..."""
BACKOFF_MIN = 20e-6
"""... but at least this many seconds ..."""
BACKOFF_MAX = 4e-3
"""... and at most this many: a completion is seen at most 4 ms (or a quarter of the wait) late."""


def wait_policy(env: Any = os.environ) -> str:
    """Return ``$SWING_MPI_WAIT`` (default ``yield``); raise ``ValueError`` naming :data:`WAITS` on another value."""
    mode = env.get("SWING_MPI_WAIT", "") or "yield"
    if mode not in WAITS:
        raise ValueError(f"SWING_MPI_WAIT={mode!r}: expected one of {', '.join(WAITS)}")
    return mode


def parse_sleep(text: str | None) -> float:
    """Parse ``$SWING_MPI_SLEEP_US`` (a sleep between idle polls, µs; 0 or unset: none) to seconds."""
    if text is None or not text.strip():
        return 0.0
    try:
        us = float(text)
    except ValueError:
        us = -1.0
    if not 0 <= us < float("inf"):  # also NaN
        raise ValueError(f"SWING_MPI_SLEEP_US={text!r}: expected microseconds >= 0")
    return us * 1e-6


_WAIT = wait_policy()
_SLEEP = parse_sleep(os.environ.get("SWING_MPI_SLEEP_US"))


class _Idle:
    """What a waiting rank does between two polls that completed nothing (one wait's state).

    ``yield``: ``sched_yield()`` (or ``$SWING_MPI_SLEEP_US`` after the second idle poll);
    ``backoff``: :data:`BACKOFF_SPINS` yields, then sleeps that grow with the time already
    waited (:data:`BACKOFF_FRACTION` of it, within :data:`BACKOFF_MIN`..:data:`BACKOFF_MAX`).
    Backoff is for ranks whose bytes the kernel moves (TCP) while they sleep, many ranks to a
    core (the emulated lab, where it is the default): a 100 ms step then costs a few dozen
    polls, not thousands, and every poll there is a context switch and an MPI progress pass
    that the ranks still working need. It is not for latency-bound work on idle cores (a
    sleep takes tens of µs more than asked), nor for shared memory, where the MPI library
    copies a large message only while polled. The constants were chosen in the lab: a first
    sleep of 250 µs after two polls, half the time slept, made 64 KiB calls on the 3x4 torus
    1.7x slower than yielding; these were as fast as yielding or faster at 64 KiB-1 MiB on
    3x4 and 4x4 (3x4 64 KiB: 9.2 against 20.6 ms) and at 4 MiB on 8x8.
    """

    __slots__ = ("polls", "since")

    def __init__(self) -> None:
        self.polls = 0
        self.since = 0.0

    def __call__(self) -> None:
        self.polls += 1
        if _WAIT == "backoff" and self.polls > BACKOFF_SPINS:
            now = time.monotonic()
            if not self.since:
                self.since = now
            time.sleep(min(BACKOFF_MAX, max(BACKOFF_MIN, (now - self.since) * BACKOFF_FRACTION)))
        elif _SLEEP and self.polls > 2:
            time.sleep(_SLEEP)
        else:
            os.sched_yield()


def waits_sleeping() -> bool:
    """Whether ranks wait sleeping (``SWING_MPI_WAIT=backoff``), so a caller's own waits may as well."""
    return _WAIT == "backoff"


def wait_all(reqs: list[MPI.Request]) -> None:
    """Wait for every request the way the executor waits (``$SWING_MPI_WAIT``, :class:`_Idle`)."""
    _wait_all(reqs)


def _wait_some(reqs: list[MPI.Request], timeout: float | None = None) -> list[int] | None:
    """``Waitsome``, but giving the CPU away between polls; ``[]`` after ``timeout`` seconds without a completion.

    MPICH busy-polls inside ``Waitsome``; with more ranks than cores (tests,
    the emulated lab) a spinning rank starves the peer it waits for. Polling
    with ``Testsome`` and ``sched_yield`` (:class:`_Idle`) costs a microsecond on an
    idle core and lets the other ranks run on a busy one. ``SWING_MPI_WAIT=spin``
    restores plain ``Waitsome`` (unless a timeout is set).
    """
    if timeout is None and _WAIT == "spin":
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
            idle = _Idle()
        idle()


def _wait_all(reqs: list[MPI.Request], timeout: float | None = None) -> bool:
    """``Waitall`` with the polling of :func:`_wait_some`; False if ``timeout`` seconds passed first."""
    if timeout is None and _WAIT == "spin":
        MPI.Request.Waitall(reqs)
        return True
    deadline = None if timeout is None else time.monotonic() + timeout
    idle = None
    while not MPI.Request.Testall(reqs):
        if deadline is not None and time.monotonic() > deadline:
            return False
        if idle is None:
            idle = _Idle()
        idle()
    return True


class _Xfer:
    """A transfer resolved to byte offsets and scratch views."""

    __slots__ = ("peer", "send", "recv", "action", "peer_first", "send_buf", "recv_buf",
                 "send_elems", "recv_elems", "direct_send", "direct_recv", "send_type", "recv_type",
                 "src_pre", "src_send", "src_recv")

    def __init__(self, t: Any, ext: int) -> None:
        self.peer = t.peer
        self.send = [(a * ext, b * ext) for a, b in t.send]
        self.recv = [(a * ext, b * ext) for a, b in t.recv]
        self.action = t.action
        self.peer_first = t.peer_first
        self.send_elems = t.send_count
        self.recv_elems = t.recv_count
        # one contiguous range (or a datatype, see Plan): send straight from / receive straight into the buffer
        self.direct_send = len(self.send) == 1
        self.direct_recv = len(self.recv) == 1 and t.action == COPY
        self.send_buf: np.ndarray | None = None
        self.recv_buf: np.ndarray | None = None
        self.send_type: MPI.Datatype | None = None
        """Several send ranges as one MPI datatype over the whole buffer (no packing copy)."""
        self.recv_type: MPI.Datatype | None = None
        """Several copied receive ranges as one MPI datatype (no unpacking copy)."""
        # reading a separate input on first use (see Plan._source_plan)
        self.src_pre: list[tuple[int, int]] = []
        """Input ranges copied into the work buffer before this transfer's send."""
        self.src_send: bool | list[tuple[int, int, bool]] | None = None
        """None: send from the work buffer; True: send the one range from the input; else the pieces
        ``(a, b, from_input)`` packed into the send scratch."""
        self.src_recv: list[tuple[int, int, int, bool, int]] | None = None
        """None: reduce into the work buffer as usual; else pieces ``(a, b, offset in recv_buf, first_use,
        out_offset)``: ``first_use`` reads the input instead of the work buffer, ``out_offset >= 0`` writes
        to ``out`` at that offset (the last write of result bytes) instead of the work buffer."""


class _Written:
    """A set of byte ranges, kept sorted and merged (the part of the work buffer that holds data)."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []

    def pieces(self, a: int, b: int) -> list[tuple[int, int, bool]]:
        """Split ``[a, b)`` into ``(lo, hi, unwritten)`` pieces, in order."""
        out: list[tuple[int, int, bool]] = []
        pos = a
        for c, d in self.ranges:
            if d <= pos:
                continue
            if c >= b:
                break
            if c > pos:
                out.append((pos, c, True))
            out.append((max(c, pos), min(d, b), False))
            pos = min(d, b)
            if pos >= b:
                break
        if pos < b:
            out.append((pos, b, True))
        return out

    def add(self, a: int, b: int) -> None:
        """Mark ``[a, b)`` written."""
        if b <= a:
            return
        keep: list[tuple[int, int]] = []
        for c, d in self.ranges:
            if d < a or c > b:
                keep.append((c, d))
            else:
                a, b = min(a, c), max(b, d)
        keep.append((a, b))
        keep.sort()
        self.ranges = keep

    def total(self) -> int:
        """Bytes covered."""
        return sum(d - c for c, d in self.ranges)


class Plan:
    """A schedule bound to a communicator, a datatype and an op."""

    def __init__(self, comm: MPI.Intracomm, schedule: Schedule, datatype: MPI.Datatype,
                 op: MPI.Op) -> None:
        """Resolve every transfer of ``schedule`` to byte ranges and carve the scratch buffers."""
        self.comm = comm
        self.schedule = schedule
        self.datatype = datatype
        self.ext = datatype.extent
        self.reduce = Reducer(op, datatype)
        ext = self.ext
        self.vec_bytes = schedule.count * ext
        self.work_bytes = self.vec_bytes * schedule.slots
        self.lanes: list[list[tuple[list[_Xfer], bool]]] = []
        # MPI datatypes for transfers of several ranges; predefined element types only
        types = _TYPES and datatype.is_predefined
        scratch_need = 0
        lane_layouts = []
        for lane in schedule.lanes:
            steps = []
            need = 0
            for st in lane:
                xs = [_Xfer(t, ext) for t in st.transfers]
                sent = [r for x in xs for r in x.send]
                for x in xs:
                    if types and len(x.send) > 1:
                        x.send_type = _ranges_type(datatype, x.send, ext)
                        x.direct_send = True
                    if types and len(x.recv) > 1 and x.action == COPY:
                        x.recv_type = _ranges_type(datatype, x.recv, ext)
                        x.direct_recv = True
                    # never receive straight into bytes that this step also sends
                    if x.direct_recv and any(a < d and c < b for a, b in x.recv for c, d in sent):
                        x.direct_recv = False
                        if x.recv_type is not None:
                            x.recv_type.Free()
                            x.recv_type = None
                size = sum((x.send_elems * ext if not x.direct_send else 0)
                           + (x.recv_elems * ext if not x.direct_recv else 0) for x in xs)
                need = max(need, size)
                steps.append((xs, st.combine))
            lane_layouts.append((scratch_need, need))
            scratch_need += need
            self.lanes.append(steps)
        self.types = [t for steps in self.lanes for xs, _ in steps for x in xs
                      for t in (x.send_type, x.recv_type) if t is not None]
        if self.types:
            weakref.finalize(self, _free_types, self.types)
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
        # who each request of a step talks to, in _post's order (receives, then sends): for timeouts
        self.req_peers = [[[(x.peer, "receive from") for x in xs if x.recv_elems]
                           + [(x.peer, "send to") for x in xs if x.send_elems] for xs, _ in steps]
                          for steps in self.lanes]
        self.timeout = TIMEOUT
        """Seconds a wait may see no completion (``$SWING_MPI_TIMEOUT``; None: forever)."""
        self.broken: str | None = None
        self.active = False
        self._src: np.ndarray | None = None
        self._src_ready: bool | None = None
        self._src_final: list[tuple[int, int]] = []
        self._out: np.ndarray | None = None
        self._out_copy: list[tuple[int, int, int, bool]] = []
        wanted = cast("tuple[tuple[int, int], ...] | None", schedule.meta.get("result"))
        self._wanted = [(0, self.vec_bytes)] if wanted is None else [(a * ext, b * ext) for a, b in wanted if b > a]
        """The result's byte ranges in the work vector (what ``out`` receives, in order)."""
        self._tag = TAG_BASE
        self._result: np.ndarray | None = None
        self._work: np.ndarray | None = None
        self._pos: list[int] = []
        self._left: list[int] = []
        self._reqs: list[MPI.Request] = []
        self._owner: list[int] = []
        self._peers: list[tuple[int, str]] = []

    # -- reading a separate input on first use ----------------------------------
    def _source_plan(self) -> bool:
        """Plan reading a separate input where first used, and writing the result where it is wanted.

        *Input* (``source``): the work buffer starts empty; a walk over the
        steps in order tracks which bytes have been written. Until a byte is
        written, a send reads it from the input, and the first reduction into
        it computes ``peer op input`` into the work buffer, so a
        reduce-scatter never copies the parts it only sends.

        *Output* (``out``, a buffer for the schedule's result ranges,
        ``meta["result"]``, default the whole vector): a reduction that is the
        last write to result bytes, with no later read of them, writes into
        ``out`` instead of the work buffer; :meth:`_finish` copies the rest of
        the result (from the work buffer, or from the input where never
        written).

        Returns False (copy the input first and the result last) where lanes
        share bytes or the schedule uses slots.
        """
        s = self.schedule
        if s.slots > 1:
            return False
        union, total = _Written(), 0
        for steps in self.lanes:
            mine = _Written()
            for xs, combine in steps:
                if combine:
                    return False
                for x in xs:
                    for a, b in x.send + x.recv:
                        mine.add(a, b)
            total += mine.total()
            for a, b in mine.ranges:
                union.add(a, b)
        if union.total() != total:  # lanes run in any interleaving: only disjoint lanes are planned
            return False
        ext = self.ext
        result = cast("tuple[tuple[int, int], ...] | None", s.meta.get("result"))
        wanted = [(0, self.vec_bytes)] if result is None else [(a * ext, b * ext) for a, b in result if b > a]
        out_at: list[tuple[int, int, int]] = []  # result byte range -> offset in ``out``
        off = 0
        for a, b in wanted:
            out_at.append((a, b, off))
            off += b - a
        results = _Written()
        for a, b in wanted:
            results.add(a, b)
        # backwards: which reductions are the last touch of result bytes
        final: dict[int, _Written] = {}
        for steps in self.lanes:
            later = _Written()
            for xs, _ in reversed(steps):
                for x in reversed(xs):
                    if x.recv_elems and x.action == REDUCE:
                        fin = _Written()
                        for a, b in x.recv:
                            for c, d, outside in results.pieces(a, b):
                                if not outside:
                                    for e, f, untouched in later.pieces(c, d):
                                        if untouched:
                                            fin.add(e, f)
                        final[id(x)] = fin
                    for a, b in x.recv:
                        later.add(a, b)
                for x in xs:
                    for a, b in x.send:
                        later.add(a, b)
        redirected = _Written()
        written_all = _Written()
        for steps in self.lanes:
            written = _Written()
            for xs, _ in steps:
                for x in xs:  # the sends of a step are posted before any of its data is applied
                    x.src_pre, x.src_send = [], None
                    if not x.send_elems:
                        continue
                    pieces = [pc for a, b in x.send for pc in written.pieces(a, b)]
                    if not any(fresh for _, _, fresh in pieces):
                        continue
                    if not x.direct_send:
                        x.src_send = pieces
                    elif all(fresh for _, _, fresh in pieces):
                        x.src_send = True
                    else:
                        x.src_pre = [(a, b) for a, b, fresh in pieces if fresh]
                        for a, b in x.src_pre:
                            written.add(a, b)
                for x in xs:
                    x.src_recv = None
                    if x.recv_elems and x.action == REDUCE:
                        fin = final[id(x)]
                        rp: list[tuple[int, int, int, bool, int]] = []
                        off = 0
                        for a, b in x.recv:
                            for c, d, fresh in written.pieces(a, b):
                                for e, f, keep in fin.pieces(c, d):
                                    oo = -1 if keep else _out_offset(out_at, e)
                                    rp.append((e, f, off + e - a, fresh, oo))
                                    if oo >= 0:
                                        redirected.add(e, f)
                            off += b - a
                        if any(pc[3] or pc[4] >= 0 for pc in rp):
                            x.src_recv = rp
                    for a, b in x.recv:
                        written.add(a, b)
            for a, b in written.ranges:
                written_all.add(a, b)
        self._src_final = [(c, d) for a, b in wanted for c, d, fresh in written_all.pieces(a, b) if fresh]
        self._out_copy = [(e, f, _out_offset(out_at, e), fresh)
                          for a, b in wanted for c, d, fresh in written_all.pieces(a, b)
                          for e, f, todo in redirected.pieces(c, d) if todo]
        return True

    def _post_recvs(self, xs: list[_Xfer], work: np.ndarray, tag: int) -> list[MPI.Request]:
        reqs: list[MPI.Request] = []
        dt = self.datatype
        comm = self.comm
        buf: Any
        for x in xs:
            if x.recv_elems:
                if x.recv_type is not None:
                    reqs.append(comm.Irecv([work, 1, x.recv_type], x.peer, tag))
                    continue
                if x.direct_recv:
                    a, b = x.recv[0]
                    buf = work[a:b]
                else:
                    buf = x.recv_buf
                reqs.append(comm.Irecv([buf, x.recv_elems, dt], x.peer, tag))
        return reqs

    # -- data movement ------------------------------------------------------
    def _post(self, lane: int, step: int, work: np.ndarray) -> list[MPI.Request]:
        """Post the receives and sends of one step; with a separate input, read bytes not yet written from it."""
        xs, _ = self.lanes[lane][step]
        tag = self._tag + lane
        reqs = self._post_recvs(xs, work, tag)
        src = self._src
        dt = self.datatype
        comm = self.comm
        buf: Any
        for x in xs:
            if not x.send_elems:
                continue
            how: bool | list[tuple[int, int, bool]] | None = None
            if src is not None:  # see _source_plan
                for a, b in x.src_pre:
                    work[a:b] = src[a:b]
                how = x.src_send
            if isinstance(how, list):  # pieces from the input and from the work vector
                assert src is not None
                buf = x.send_buf
                off = 0
                for a, b, fresh in how:
                    buf[off:off + b - a] = (src if fresh else work)[a:b]
                    off += b - a
            else:
                base = src if how is True and src is not None else work
                if x.send_type is not None:
                    reqs.append(comm.Isend([base, 1, x.send_type], x.peer, tag))
                    continue
                if x.direct_send:
                    a, b = x.send[0]
                    buf = base[a:b]
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
        src = self._src
        out = self._out
        for x in xs:
            if not x.recv_elems or x.direct_recv:
                continue
            assert x.recv_buf is not None
            if x.src_recv is not None and (src is not None or out is not None):
                for a, b, off, fresh, oo in x.src_recv:
                    chunk = x.recv_buf[off:off + b - a]
                    given = src[a:b] if fresh and src is not None else None
                    if oo >= 0 and out is not None:
                        self.reduce.first(chunk, work[a:b] if given is None else given, out[oo:oo + b - a],
                                          x.peer_first)
                    elif given is not None:
                        self.reduce.first(chunk, given, work[a:b], x.peer_first)
                    else:
                        self.reduce(chunk, work[a:b], x.peer_first)
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
    def start(self, result: np.ndarray, source: np.ndarray | None = None, *, seq: int = 0,
              out: np.ndarray | None = None) -> None:
        """Begin an allreduce into ``result`` (bytes); ``source`` is the input if not in place.

        ``result`` is the work vector. With ``out``, the schedule's result
        ranges (``meta["result"]``, default all of it; concatenated) end in
        ``out`` instead, and the rest of ``result`` is left undefined.

        ``seq`` numbers the operation on its communicator (equal on all ranks,
        since MPI requires collectives to start in the same order everywhere):
        it selects the tags, so operations in flight at the same time on one
        communicator never match each other's messages.
        """
        self._begin(result, source, seq, out)
        nl = len(self.lanes)
        self._pos = [0] * nl
        self._left = [0] * nl
        self._reqs = []
        self._owner = []
        self._peers = []
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

    def run(self, result: np.ndarray, source: np.ndarray | None = None, *, seq: int = 0,
            out: np.ndarray | None = None) -> None:
        """Run a blocking allreduce: :meth:`start` then :meth:`wait`.

        With one lane, the same steps without the bookkeeping that lets several
        lanes progress together (that bookkeeping dominates small calls).
        """
        if len(self.lanes) != 1:
            self.start(result, source, seq=seq, out=out)
            self.wait()
            return
        work = self._begin(result, source, seq, out)
        self.active = True
        timeout = self.timeout
        for k in range(len(self.lanes[0])):
            reqs = self._post(0, k, work)
            if reqs and not _wait_all(reqs, timeout):
                self._timed_out([(0, k, r, peer) for r, peer in zip(reqs, self.req_peers[0][k])])
            self._apply(0, k, work)
        self._finish()

    def _begin(self, result: np.ndarray, source: np.ndarray | None, seq: int,
               out: np.ndarray | None = None) -> np.ndarray:
        """Put the input in place and take the tags of operation ``seq``; return the work buffer."""
        if self.broken:
            raise RuntimeError(f"this plan is unusable: {self.broken}")
        if self.active:
            raise RuntimeError("this allreduce is still in progress; wait for it before starting it again")
        s = self.schedule
        n = self.vec_bytes
        self._src = None
        self._out = out
        if out is not None and len(out) != sum(b - a for a, b in self._wanted):
            raise ValueError(f"out has {len(out)} bytes, the result {sum(b - a for a, b in self._wanted)}")
        if (source is not None or out is not None) and n and self._src_ready is None:
            self._src_ready = self._source_plan()
        if s.slots > 1:
            work = self.slot_work
            work[s.input_slot * n:(s.input_slot + 1) * n] = result if source is None else source
        else:
            work = result
            if source is not None and n:
                if self._src_ready:
                    self._src = source  # read where first used (_source_plan)
                else:
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
        assert work is not None
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
                    self._peers.extend(self.req_peers[lane][k])
                else:
                    self._apply(lane, k, work)
                    pos[lane] = k + 1
            if self._reqs or not busy:
                return

    def _progress(self, block: bool) -> None:
        reqs = self._reqs
        done: list[int] | None
        if block and len(self.lanes) == 1:
            if not _wait_all(reqs, self.timeout):  # one lane: its step needs every request anyway
                self._timed_out([(0, self._pos[0], r, peer) for r, peer in zip(reqs, self._peers)])
            done = list(range(len(reqs)))
        else:
            done = _wait_some(reqs, self.timeout) if block else MPI.Request.Testsome(reqs)
            if block and done == []:
                self._timed_out([(lane, self._pos[lane], r, peer)
                                 for r, lane, peer in zip(reqs, self._owner, self._peers)])
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
                self._peers.clear()
            else:
                gone = set(done)
                keep = [i for i in range(len(reqs)) if i not in gone]
                self._reqs = [reqs[i] for i in keep]
                self._owner = [self._owner[i] for i in keep]
                self._peers = [self._peers[i] for i in keep]
            work = self._work
            assert work is not None
            for lane in finished:
                self._apply(lane, self._pos[lane], work)
                self._pos[lane] += 1
            if not self._reqs:
                self._round()
        if not self._reqs:
            self._finish()

    def _finish(self) -> None:
        s = self.schedule
        src = self._src
        out = self._out
        res = self._result
        assert res is not None
        if out is not None and self._src_ready:  # the result parts not already written into out
            for a, b, oo, fresh in self._out_copy:
                out[oo:oo + b - a] = (src if fresh and src is not None else res)[a:b]
            out = None
        elif src is not None:
            for a, b in self._src_final:
                res[a:b] = src[a:b]
        self._src = self._out = None
        if s.slots > 1:
            n = self.vec_bytes
            assert self._result is not None and self._work is not None
            self._result[...] = self._work[s.result_slot * n:(s.result_slot + 1) * n]
        if out is not None:
            off = 0
            for a, b in self._wanted:
                out[off:off + b - a] = res[a:b]
                off += b - a
        self._result = self._work = None
        self.active = False

    def _timed_out(self, pending: list[tuple[int, int, MPI.Request, tuple[int, str]]]) -> None:
        """Raise :class:`TimeoutError` for the requests of ``pending`` (lane, step, request, (peer, what)).

        The plan is marked broken: its requests stay posted into its buffers, so it must not run again.
        """
        waiting: dict[int, list[str]] = {}
        steps: set[tuple[int, int]] = set()
        for lane, step, req, (peer, what) in pending:
            if req != MPI.REQUEST_NULL and not req.Test():
                waiting.setdefault(peer, []).append(what)
                steps.add((lane, step))
        me = self.comm.Get_rank()
        s = self.schedule
        nsteps = len(self.lanes[0]) if self.lanes else 0
        where = ", ".join(f"step {k}" + (f" of lane {lane}" if len(self.lanes) > 1 else "")
                          for lane, k in sorted(steps)) or f"step {pending[0][1] if pending else 0}"
        who = ", ".join(f"{_rank_name(self.comm, peer)} ({' and '.join(sorted(set(w)))} it)"
                        for peer, w in sorted(waiting.items())) or "a peer"
        operation = str(s.meta.get("collective", "allreduce"))
        message = (f"{operation} ({s.algorithm}, {s.count} elements) on {_rank_name(self.comm, me)}: "
                   f"waiting for {who} in {where} (of {nsteps}) for more than {self.timeout:g} s "
                   f"(SWING_MPI_TIMEOUT); the collective is broken, end the job (comm.Abort())")
        self.broken = f"an earlier wait timed out: {message}"
        self.active = False
        self._result = self._work = self._src = None
        raise TimeoutError(message)


def _rank_name(comm: MPI.Comm, rank: int) -> str:
    """Return ``rank N``, with the rank in ``MPI.COMM_WORLD`` too where the numbering differs."""
    try:
        world = MPI.Group.Translate_ranks(comm.Get_group(), [rank], MPI.COMM_WORLD.Get_group())[0]
    except MPI.Exception:
        return f"rank {rank}"
    return f"rank {rank}" if world == rank else f"rank {rank} (world rank {world})"
