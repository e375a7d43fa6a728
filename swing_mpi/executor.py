"""The runtime: runs a :class:`Plan` (a schedule bound to a communicator) with Isend/Irecv.

A plan is built once per (communicator, schedule, datatype, op) (:mod:`swing_mpi.transfers` resolves its transfers and
scratch); :meth:`Plan.run` and :meth:`Plan.start` then only post requests, wait and reduce (:class:`Reducer`, the
reduction kernel, with numpy where it is exactly MPI's op).

Progress: the lanes (sub-collectives) advance in lockstep. A round posts all receives and sends of the current step of
every lane; the next round starts only when every lane has finished the step (a rank's lanes use distinct ports in
each step; a lane left to run ahead would drift onto a port another lane still uses). Two engines run a plan, post the
same messages in the same order and give the same bits (``$SWING_MPI_ENGINE`` picks): the compiled core
(:mod:`swing_mpi.native`, the default where it builds) runs a plan's whole program (:mod:`swing_mpi.program`) in one
call from Python, reducing each block as soon as its messages are done, large ones on several threads; the pure-Python
loop below applies a lane's data when its whole step is in.

Hangs: with ``$SWING_MPI_TIMEOUT``, a wait that sees no completion for that long raises :class:`TimeoutError` naming
the operation, the algorithm, the step and the peers that did not answer. The plan then refuses further use (its
messages stay posted); the job should end.

Threads: a plan serves one operation at a time; one communicator used from two threads at once is erroneous, as in MPI.
"""

from __future__ import annotations

import weakref
from typing import Any, cast

import numpy as np
from mpi4py import MPI

from . import native
from .config import rc
from .errors import CollectiveError, mismatch_message, timeout_message
from .program import compile_program, kernel_for
from .reducer import Reducer, op_name
from .schedule.base import REDUCE, Schedule
from .transfers import SourcePlan, Xfer, compile_lanes, free_types, plan_sources
from .waiting import default_policy, keep_alive, wait_all, wait_some

__all__ = ["Plan", "CollectiveError", "TAG_BASE", "MAX_LANES", "TAG_SEQS", "POLICY_CODES"]

REDUCE_MIN_BYTES = 256 << 10
"""The compiled core splits a reduction over its threads in parts of at least this many bytes."""
TAG_BASE = 16
MAX_LANES = 64
"""At most 64 lanes (2D ≤ 64: tori of up to 32 dimensions)."""
TAG_SEQS = 256
"""Lane ``i`` of operation number ``seq`` uses tag
``TAG_BASE + (seq mod TAG_SEQS)·MAX_LANES + i`` on our private communicator
(at most 16400, below the 32767 every MPI guarantees)."""


POLICY_CODES = {"spin": 0, "yield": 1, "backoff": 2}
"""The wait policies as the compiled core numbers them."""


class Plan:
    """A schedule bound to a communicator, a datatype and an op."""

    def __init__(self, comm: MPI.Intracomm, schedule: Schedule, datatype: MPI.Datatype, op: MPI.Op, *,
                 wait: str | None = None, threads: int | None = None, engine: str | None = None) -> None:
        """Resolve every transfer of ``schedule`` to byte ranges and carve the scratch buffers.

        ``wait``: the wait policy (:mod:`swing_mpi.waiting`; default ``$SWING_MPI_WAIT``, else ``yield``).
        ``threads``: threads the compiled core reduces large blocks with (default ``$SWING_MPI_THREADS``, else 1).
        ``engine``: ``c`` or ``python`` to insist on one (default: ``$SWING_MPI_ENGINE``'s choice).
        ``$SWING_MPI_TIMEOUT``, ``$SWING_MPI_DATATYPES``, ``$SWING_MPI_SEGMENT`` and ``$SWING_MPI_ENGINE`` are
        taken from :data:`swing_mpi.config.rc` now.
        """
        self.comm = comm
        self.schedule = schedule
        self.datatype = datatype
        self.ext = datatype.extent
        self.reduce = Reducer(op, datatype)
        ext = self.ext
        self.vec_bytes = schedule.count * ext
        self.work_bytes = self.vec_bytes * schedule.slots
        if len(schedule.lanes) > MAX_LANES:
            raise ValueError(f"{len(schedule.lanes)} lanes: at most {MAX_LANES} are supported")
        self.segment = rc.segment
        """Bytes of a segment: longer messages go as several (the same on every rank: both ends cut alike)."""
        compiled = compile_lanes(schedule, datatype, datatypes=rc.datatypes, segment=self.segment)
        self.lanes = compiled.lanes
        self.scratch = compiled.scratch
        self.types = compiled.types
        if self.types:
            weakref.finalize(self, free_types, self.types)
        self.req_peers = compiled.req_peers
        """Who each request of a step talks to, in :meth:`_post`'s order: for timeout messages."""
        self.slot_work = np.empty(self.work_bytes if schedule.slots > 1 else 0, np.uint8)
        self.timeout = rc.timeout
        """Seconds a wait may see no completion (``$SWING_MPI_TIMEOUT``; None: forever)."""
        self.wait_policy = wait or default_policy()
        """How this plan's waits pass the time (:mod:`swing_mpi.waiting`)."""
        self.broken: str | None = None
        self.active = False
        self._src: np.ndarray | None = None
        self._sources: SourcePlan | None = None
        self._sources_planned = False
        self._out: np.ndarray | None = None
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
        self.threads = max(1, threads if threads is not None else rc.threads or 1)
        """Threads the compiled core reduces a large block with."""
        if engine not in (None, "c", "python"):
            raise ValueError(f"engine={engine!r}: expected 'c' or 'python'")
        self._core = native.load() if self.vec_bytes and engine != "python" else None
        if engine == "c" and self._core is None and self.vec_bytes:
            raise RuntimeError(f"the compiled core cannot run here: {native.why_not()}")
        self._kernel = kernel_for(op_name(op), self.reduce.dtype, self.reduce.ufunc is not None)
        if self._kernel is None:
            self._core = None
        self.engine = "c" if self._core is not None else "python"
        """Which engine runs this plan: ``c`` (the compiled core) or ``python``."""
        self._engines: dict[tuple[bool, bool], Any] = {}
        self._eng: Any = None
        """The compiled core's engine of the operation in progress (None: the Python loop runs it)."""
        self._fast: Any = self._engine(False, False) if schedule.slots == 1 else None
        """The engine of an in-place call (what the repeat path runs), if the compiled core runs this plan."""
        self._fast_src: Any = None
        """The engine :meth:`run_fast` runs out of place (:meth:`_src_engine`)."""
        self._policy = POLICY_CODES.get(self.wait_policy, 1)
        self._timeout_c = -1.0 if self.timeout is None else float(self.timeout)

    def trace(self, capacity: int = -1) -> list[tuple[float, int, int, int, int]]:
        """Return the compiled core's events of the last in-place run; ``capacity`` >= 0: keep that many from now.

        Events ``(seconds from the start, kind, step, lane, value)``; kinds: 0 a step posted (value: its
        messages), 1 a message complete (its index), 2 a reduction starts (bytes), 3 it ends, 4 done, 5 a
        sum copied back into its sent block ahead of its turn (bytes). Empty where the Python engine runs.
        """
        return [] if self._fast is None else list(self._fast.trace(capacity))

    def _engine(self, has_src: bool, has_out: bool) -> Any:
        """Return the compiled core's engine for a call with (or without) a separate input and an out buffer."""
        if self._core is None:
            return None
        key = (has_src, has_out)
        eng = self._engines.get(key)
        if eng is None:
            prog = compile_program(self.lanes, self.scratch, self.types, self.ext, has_src=has_src, has_out=has_out,
                                   slots=self.schedule.slots, vec_bytes=self.vec_bytes,
                                   split_sent=self._kernel is not None and self._kernel >= 0 and self.threads > 1)
            op, dt = self.reduce.op, self.datatype
            eng = self._engines[key] = self._core.Engine(
                prog.tobytes(), self.comm.py2f(), dt.py2f(), op.py2f(), tuple(t.py2f() for t in self.types),
                self._kernel, self.ext, self.threads, REDUCE_MIN_BYTES)
        return eng

    def _post_recvs(self, xs: list[Xfer], work: np.ndarray, tag: int) -> list[MPI.Request]:
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
            if src is not None:  # see plan_sources
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
        work = self._begin(result, source, seq, out)
        if self._core is not None:
            eng = self._eng = self._engine(self._src is not None, self._out is not None)
            self.active = True
            r = eng.start(work, self._src, self._out, self.scratch, self._tag)
            if r is True:
                self._finish()
            elif r is not False:
                self._core_failed(eng, r)
            return
        self._eng = None
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
            eng = self._eng
            if eng is None:
                try:
                    self._progress(block=False)
                except CollectiveError:
                    raise
                except MPI.Exception as e:
                    self._python_failed(e)
            else:
                r = eng.test()
                if r is True:
                    self._finish()
                elif r is not False:
                    self._core_failed(eng, r)
        return not self.active

    def wait(self) -> None:
        """Block until the allreduce is complete."""
        eng = self._eng
        if eng is not None and self.active:
            r = eng.wait(self._policy, self._timeout_c, rc.sleep_us)
            if r is not True:
                self._core_failed(eng, r)
            self._finish()
            return
        try:
            while self.active:
                self._progress(block=True)
        except CollectiveError:
            raise
        except MPI.Exception as e:
            self._python_failed(e)

    @property
    def fast(self) -> bool:
        """Whether :meth:`run_fast` may run this plan (the compiled core runs it, one slot, not broken)."""
        return self._fast is not None and not self.active

    def run_fast(self, result: Any, source: Any, seq: int) -> None:
        """Run a blocking allreduce in one call of the compiled core, on any C-contiguous buffers.

        The repeat path's call (:mod:`swing_mpi.repeat`): what :meth:`run` does, without byte
        views. Only where :attr:`fast`; ``source`` None: in place.
        """
        tag = TAG_BASE + (seq % TAG_SEQS) * MAX_LANES
        eng = self._fast if source is None else self._fast_src or self._src_engine()
        if eng is None:  # the input is copied in, or bytes of it after the run: the general path
            self.run(np.frombuffer(result, np.uint8), np.frombuffer(source, np.uint8), seq=seq)
            return
        r = eng.run(result, source, None, self.scratch, tag, self._policy, self._timeout_c, rc.sleep_us)
        if r is not True:
            self._core_failed(eng, r, np.frombuffer(result, np.uint8),
                              None if source is None else np.frombuffer(source, np.uint8))

    def repeat_record(self, state: Any, recv: np.ndarray, send: np.ndarray | None) -> Any:
        """Return the compiled core's record that runs this plan on such arrays in one call (None: none can).

        :mod:`swing_mpi.repeat`'s fastest path: :meth:`run_fast` with its checks, taking ``state.seq``.
        """
        if self._core is None or not self.fast or send is not None and self._src_engine() is None:
            return None
        return self._core.Repeat(weakref.ref(self), state, recv.dtype, recv.nbytes,
                                 None if send is None else send.dtype, 0 if send is None else send.nbytes,
                                 self.scratch, self._policy, self._timeout_c, rc, TAG_BASE, TAG_SEQS, MAX_LANES)

    def _src_engine(self) -> Any:
        """Return (make once) the engine that reads a separate input where used; None: it is copied in, or after."""
        if self._fast_src is None and self._fast is not None:
            sources = self._source_plan()
            if sources is not None and not sources.from_input:
                self._fast_src = self._engine(True, False)
        return self._fast_src

    def run(self, result: np.ndarray, source: np.ndarray | None = None, *, seq: int = 0,
            out: np.ndarray | None = None) -> None:
        """Run a blocking allreduce: :meth:`start` then :meth:`wait`.

        With one lane, the same steps without the bookkeeping that lets several
        lanes progress together (that bookkeeping dominates small calls).
        """
        eng = self._fast
        if eng is not None and out is None and not self.active:
            src = None
            if source is not None:  # out of place: the input read where first used, the rest copied after
                if self._source_plan() is None:
                    result[...] = source
                else:
                    eng, src = self._engine(True, False), source
            r = eng.run(result, src, None, self.scratch, TAG_BASE + (seq % TAG_SEQS) * MAX_LANES, self._policy,
                        self._timeout_c, rc.sleep_us)
            if r is not True:
                self._core_failed(eng, r, result, src)
            if src is not None:
                for a, b in self._sources.from_input:  # type: ignore[union-attr]
                    result[a:b] = src[a:b]
            return
        if self._core is not None:
            work = self._begin(result, source, seq, out)
            eng = self._engine(self._src is not None, self._out is not None)
            self.active = True
            r = eng.run(work, self._src, self._out, self.scratch, self._tag, self._policy, self._timeout_c,
                        rc.sleep_us)
            if r is not True:
                self._core_failed(eng, r)
            self._finish()
            return
        if len(self.lanes) != 1:
            self.start(result, source, seq=seq, out=out)
            self.wait()
            return
        work = self._begin(result, source, seq, out)
        self.active = True
        timeout, wait = self.timeout, self.wait_policy
        k = 0
        try:
            for k in range(len(self.lanes[0])):
                reqs = self._post(0, k, work)
                if reqs and not wait_all(reqs, timeout, wait):
                    self._timed_out([(0, k, r, peer) for r, peer in zip(reqs, self.req_peers[0][k])])
                self._apply(0, k, work)
        except CollectiveError:
            raise
        except MPI.Exception as e:
            self._python_failed(e, k)
        self._finish()

    def _source_plan(self) -> SourcePlan | None:
        """Plan once where a separate input is read (:func:`plan_sources`); None: it is copied in first."""
        if not self._sources_planned and self.vec_bytes:
            self._sources = plan_sources(self.lanes, slots=self.schedule.slots, wanted=self._wanted)
            self._sources_planned = True
        return self._sources

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
        if source is not None or out is not None:
            self._source_plan()
        if s.slots > 1:
            work = self.slot_work
            work[s.input_slot * n:(s.input_slot + 1) * n] = result if source is None else source
        else:
            work = result
            if source is not None and n:
                if self._sources is not None:
                    self._src = source  # read where first used (plan_sources)
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
            if not wait_all(reqs, self.timeout, self.wait_policy):  # one lane: its step needs every request anyway
                self._timed_out([(0, self._pos[0], r, peer) for r, peer in zip(reqs, self._peers)])
            done = list(range(len(reqs)))
        else:
            done = wait_some(reqs, self.timeout, self.wait_policy) if block else MPI.Request.Testsome(reqs)
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
        sources = self._sources
        if out is not None and sources is not None:  # the result parts not already written into out
            for a, b, oo, fresh in sources.out_copy:
                out[oo:oo + b - a] = (src if fresh and src is not None else res)[a:b]
            out = None
        elif src is not None and sources is not None:
            for a, b in sources.from_input:
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

    def _timed_out(self, pending: list[tuple[int, int, MPI.Request | None, tuple[int, str]]]) -> None:
        """Raise :class:`TimeoutError` for the requests of ``pending`` (lane, step, request, (peer, what)).

        The plan is marked broken: its requests stay posted into its buffers, so it must not run again.
        """
        waiting = [(lane, step, peer, what) for lane, step, req, (peer, what) in pending
                   if req is None or req != MPI.REQUEST_NULL and not req.Test()]
        s = self.schedule
        message = timeout_message(self.comm, str(s.meta.get("collective", "allreduce")), s.algorithm, s.count,
                                  len(self.lanes), len(self.lanes[0]) if self.lanes else 0, self.timeout or 0.0,
                                  waiting, pending[0][1] if pending else 0)
        self.broken = f"an earlier wait timed out: {message}"
        self.active = False
        self._fast = self._fast_src = None
        self._result = self._work = self._src = None
        raise TimeoutError(message)

    def _core_failed(self, eng: Any, r: Any, result: np.ndarray | None = None, src: np.ndarray | None = None) -> None:
        """Raise for the compiled core's outcome ``r``: 2 timed out, -1 an MPI error (see :meth:`_mpi_error`).

        ``result``/``src``: the buffers of a one-call run (:meth:`run`'s and :meth:`run_fast`'s), kept alive.
        """
        if result is not None:
            self._result = self._work = result
            self._src = src
        if r == 2:
            step, pending = eng.pending()
            keep_alive((eng, self._work, self._src, self._out, self.scratch))  # its messages stay posted
            eng.abandon()
            what = {0: "receive from", 1: "send to"}
            self._timed_out([(lane, step, None, (peer, what.get(kind, "exchange with")))
                             for lane, peer, kind in pending])
        code, step, lane, peer, kind = eng.error()
        keep_alive((eng, self._work, self._src, self._out, self.scratch))
        self._mpi_error(code, step, lane, peer, kind)

    def _python_failed(self, e: MPI.Exception, step: int | None = None) -> None:
        """Raise :class:`CollectiveError` for an MPI error the Python engine met (its requests stay posted)."""
        keep_alive((self._reqs, self._work, self._src, self._out, self.scratch))
        self._mpi_error(e.Get_error_code(), self._pos[0] if step is None and self._pos else step or 0, -1, -1, -1)

    def _mpi_error(self, code: int, step: int, lane: int, peer: int, kind: int) -> None:
        """Raise :class:`CollectiveError` for MPI's error ``code`` in ``step`` of ``lane`` with ``peer``.

        ``kind``: 0 a receive, 1 a send, 2 a reduction, -1 unknown. The plan is broken afterwards.
        """
        s = self.schedule
        message = mismatch_message(self.comm, code, str(s.meta.get("collective", "allreduce")), s.algorithm, s.count,
                                   self.ext, step, lane if len(self.lanes) > 1 else -1, peer, kind)
        self.broken = message
        self.active = False
        self._fast = self._fast_src = None
        self._result = self._work = self._src = self._out = None
        raise CollectiveError(code, message)
