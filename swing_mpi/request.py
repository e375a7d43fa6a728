"""Requests of the nonblocking (``I…``) and persistent (``…_init``) collectives our engine runs.

They are mpi4py requests, whatever the size or algorithm: every ``MPI.Request``
method and class method takes them, mixed with plain MPI requests.

- :class:`Request` (nonblocking) is an ``MPI.Request`` whose handle is an MPI
  generalized request (``MPI_Grequest_start``), completed when our collective
  is done.
- :class:`PersistentRequest` (``…_init``) is an ``MPI.Prequest`` whose handle is
  a persistent synchronous send of an empty message to this process itself (on a
  private duplicate of ``COMM_SELF``): ``MPI_Start``/``MPI_Startall`` activate it,
  which makes its message appear to ``MPI_Iprobe``; a synchronous send completes
  only once received, and we receive it when our collective is done. (Asking the
  handle itself whether it is active does not work: Open MPI's
  ``MPI_Request_get_status`` says "complete" while another thread waits on it.)

Progress. Our own methods (``req.Wait()``, ``req.Test()``, ``req.Start()``,
:meth:`Request.Waitall`/:meth:`Request.Testall`) drive the collective in the
calling thread (``Wait`` waits in the compiled core with the GIL released).
When the user waits inside MPI instead (``MPI.Request.Waitall([ours, irecv])``,
``Waitany``, ``Testsome`` loops) or starts inside MPI (``MPI.Prequest.Startall``),
the progress thread of :mod:`swing_mpi.progress` tests the collective and
completes the handle; it also notices a persistent request started behind our
back (its message appears) and runs its collective. That thread needs
``MPI_THREAD_MULTIPLE`` (mpi4py's default); without it only our own methods
make progress.

Tags. A nonblocking operation takes the next operation number of its
communicator when it is called, as blocking calls do. A persistent one may be
started by ``MPI_Startall`` and noticed by the thread at a different moment on
each rank, so it cannot take a number then: it owns a number (1 to 255) on a
duplicate of the private communicator kept for persistent requests (one more
duplicate per 255 requests), fixed at init.

``Cancel`` raises :class:`CancelError`: MPI defines no cancelling of a collective.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from mpi4py import MPI

from .executor import TAG_SEQS, Plan
from .progress import ENGINE
from .state import CommState

__all__ = ["Request", "PersistentRequest", "CancelError", "start_request", "persistent_request",
           "persistent_comm"]

_TOKEN = bytearray(1)
"""The (never written) buffer of the empty completion messages."""
_SELF: list[Any] = [None, 0]
"""This process's duplicate of ``COMM_SELF`` (created on first use) and the last tag handed out on it."""
_TAG_MAX = 32767
"""The largest tag every MPI allows."""


class CancelError(MPI.Exception):
    """``Cancel()`` on one of our requests: MPI defines no cancelling of a collective (``MPI_ERR_REQUEST``)."""

    def __init__(self) -> None:
        """Say why."""
        super().__init__(MPI.ERR_REQUEST)

    def __str__(self) -> str:
        """Return the message."""
        return ("a collective cannot be cancelled (MPI_Cancel on a nonblocking or persistent collective is "
                "erroneous in MPI); Wait() for it instead")


def _self_tag() -> tuple[MPI.Comm, int]:
    """Return the ``COMM_SELF`` duplicate and a tag for one persistent request's completion messages."""
    if _SELF[0] is None:
        _SELF[0] = MPI.COMM_SELF.Dup()
    _SELF[1] = _SELF[1] % _TAG_MAX + 1
    return _SELF[0], _SELF[1]


def persistent_comm(st: CommState) -> tuple[MPI.Intracomm, int]:
    """Return (communicator, operation number) for a new persistent request on ``st`` (collective: may ``Dup``).

    Every rank creates its persistent requests in the same order, so they agree on both.
    """
    k = st.persistent_count
    st.persistent_count = k + 1
    per = TAG_SEQS - 1
    if k // per >= len(st.extra_comms):
        st.extra_comms.append(st.comm.Dup())
    return st.extra_comms[k // per], k % per + 1


def _query(status: MPI.Status, err: list[BaseException | None]) -> None:
    """Fill a collective's status (MPI defines only its error field); raise the collective's error, if any."""
    status.Set_source(MPI.ANY_SOURCE)
    status.Set_tag(MPI.ANY_TAG)
    status.Set_elements(MPI.BYTE, 0)
    status.Set_cancelled(False)
    e = err[0]
    if e is not None:
        raise e if isinstance(e, MPI.Exception) else MPI.Exception(MPI.ERR_OTHER)


def _no_cancel(completed: bool) -> None:
    """Refuse to cancel (a generalized request's cancel function)."""
    raise CancelError()


class Request(MPI.Request):
    """A nonblocking collective of ours: an ``MPI.Request`` (a generalized request's handle).

    Made by :func:`start_request`. ``plan`` is ``None`` for an operation that
    moves nothing (count 0 or one rank): then only ``before`` and ``after`` run.
    """

    _persistent = False
    _st: CommState
    _plan: Plan | None
    _work: np.ndarray
    _source: np.ndarray | None
    _before: Callable[[], None] | None
    _after: Callable[[], None] | None
    _out: np.ndarray | None
    _lock: threading.Lock
    _running: bool
    _since: float
    _err: list[BaseException | None]
    _freed: bool
    _greq: MPI.Grequest | None
    _pool: Any = None
    """The key under which the plan goes back to its state's idle plans when the operation is done."""

    def _bind(self, st: CommState, plan: Plan | None, work: np.ndarray, source: np.ndarray | None,
              before: Callable[[], None] | None, after: Callable[[], None] | None, out: np.ndarray | None) -> None:
        self._st = st
        self._plan = plan
        self._work = work
        self._source = source
        self._before = before
        self._after = after
        self._out = out
        self._lock = threading.Lock()
        self._running = False
        self._since = 0.0
        self._freed = False
        self._greq = None

    # -- driving the collective (callers hold self._lock, or own the request) --------------
    def _begin(self, seq: int) -> None:
        """Start the collective (operation number ``seq``)."""
        if self._before is not None:
            self._before()
        plan = self._plan
        self._running = True
        if plan is not None:
            try:
                plan.start(self._work, self._source, seq=seq, out=self._out)
            except BaseException:
                self._running = False
                raise
            if plan.active:
                self._since = time.monotonic()
                ENGINE.running(self)
                return
        self._finish()

    def _finish(self) -> None:
        self._running = False
        try:
            if self._after is not None:
                self._after()
        finally:
            ENGINE.done(self)
            self._signal()
        if self._pool is not None and self._plan is not None:  # done with it: the next such call may take it
            self._st.release_plan(self._pool, self._plan)
            self._plan = None

    def _fail(self, e: BaseException) -> None:
        self._err[0] = e
        self._running = False
        ENGINE.done(self)
        self._signal()

    def _signal(self) -> None:
        """Complete the MPI handle."""
        g = self._greq
        if g is not None:
            self._greq = None
            g.Complete()

    def _advance(self) -> None:
        plan = self._plan
        assert plan is not None
        try:
            done = plan.test()
        except BaseException as e:
            self._fail(e)
            return
        if done:
            self._finish()

    def _catch_start(self) -> None:
        """Begin a collective started behind our back (persistent requests; nothing for a nonblocking one)."""

    def _poll(self) -> bool:
        """Take the progress thread's turn: test the collective unless another thread drives it now (then False)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            self._catch_start()
            if self._running:
                self._advance()
        finally:
            self._lock.release()
        return True

    def _drive(self, block: bool) -> None:
        """Make progress in the calling thread (``block``: until the collective is done)."""
        if not self._lock.acquire(blocking=block):
            return
        try:
            self._catch_start()
            if not self._running:
                return
            if not block:
                self._advance()
                return
            plan = self._plan
            assert plan is not None
            try:
                plan.wait()
            except BaseException as e:
                self._fail(e)
                return
            self._finish()
        finally:
            self._lock.release()

    def _raise_error(self) -> None:
        """Raise the collective's error once (after completing the MPI handle, so nothing is left pending)."""
        e = self._err[0]
        if e is not None:
            self._err[0] = None
            try:
                MPI.Request.Wait(self)
            except MPI.Exception:
                pass
            raise e

    # -- the MPI.Request methods ------------------------------------------------------------
    def Wait(self, status: MPI.Status | None = None) -> Literal[True]:  # noqa: N802
        """Block until the operation is complete (``status``: MPI defines only its error field for a collective)."""
        if self._running or self._persistent:
            self._drive(True)
        if self._err[0] is not None:
            self._raise_error()
        return MPI.Request.Wait(self, status)

    def Test(self, status: MPI.Status | None = None) -> bool:  # noqa: N802
        """Make progress without blocking; true once the operation is complete."""
        if self._running or self._persistent:
            self._drive(False)
        if self._err[0] is not None:
            self._raise_error()
        return MPI.Request.Test(self, status)

    def Get_status(self, status: MPI.Status | None = None) -> bool:  # noqa: N802
        """Make progress; tell whether the operation is complete, leaving the request as it is."""
        if self._running or self._persistent:
            self._drive(False)
        return MPI.Request.Get_status(self, status)

    def Cancel(self) -> None:  # noqa: N802
        """Refuse: MPI defines no cancelling of a collective (:class:`CancelError`)."""
        raise CancelError()

    def Free(self) -> None:  # noqa: N802
        """Release the request; an operation in progress still completes (the progress thread finishes it).

        Without the progress thread (no ``MPI_THREAD_MULTIPLE``), the operation is finished first.
        """
        if self._persistent:
            with self._lock:
                self._catch_start()  # started by MPI_Startall and not noticed yet: it runs all the same
        if self._running and not ENGINE.enabled:
            self._drive(True)
        self._freed = True
        ENGINE.unwatch(self)
        if self != MPI.REQUEST_NULL:
            MPI.Request.Free(self)

    @property
    def active(self) -> bool:
        """Whether our collective is running (started and not complete yet)."""
        return self._running

    @classmethod
    def Waitall(cls, requests: Any, statuses: Any = None) -> Literal[True]:  # noqa: N802
        """``MPI.Request.Waitall``, driving ours in the calling thread first."""
        for r in requests:
            if isinstance(r, Request):
                r._drive(True)
        for r in requests:
            if isinstance(r, Request) and r._err[0] is not None:
                r._raise_error()
        return MPI.Request.Waitall(requests, statuses)

    @classmethod
    def Testall(cls, requests: Any, statuses: Any = None) -> bool:  # noqa: N802
        """``MPI.Request.Testall``, making progress on ours in the calling thread first."""
        for r in requests:
            if isinstance(r, Request):
                r._drive(False)
        return MPI.Request.Testall(requests, statuses)


class PersistentRequest(Request, MPI.Prequest):
    """A persistent collective of ours: an ``MPI.Prequest`` (a persistent synchronous send to this process's self).

    Made by :func:`persistent_request`; ``MPI.Prequest.Startall`` over a list mixing these and MPI's
    own persistent requests starts it (the progress thread notices and runs it).
    """

    _persistent = True
    _seq: int
    _tag: int
    _self: MPI.Comm

    def _catch_start(self) -> None:
        if not self._running and self._self.Iprobe(0, self._tag):
            self._begin(self._seq)  # MPI_Start(all) activated the send: our collective runs now

    def _signal(self) -> None:
        self._self.Recv([_TOKEN, 0, MPI.BYTE], 0, self._tag)  # matches the send: the handle completes

    def Start(self) -> None:  # noqa: N802
        """Start the operation (again)."""
        if self._freed:
            raise RuntimeError("this request has been freed")
        if self._err[0] is not None:
            self._raise_error()
        with self._lock:
            if self._running or not MPI.Request.Get_status(self):
                raise RuntimeError("this operation is still in progress; Wait() for it before starting it again")
            MPI.Prequest.Start(self)
            self._begin(self._seq)


def start_request(st: CommState, plan: Plan | None, work: np.ndarray, source: np.ndarray | None, *,
                  before: Callable[[], None] | None = None, after: Callable[[], None] | None = None,
                  out: np.ndarray | None = None, pool: Any = None) -> Request:
    """Start a nonblocking collective on ``plan`` and return its request.

    ``work`` is the plan's work vector (bytes) and ``source`` its input when not
    in place; ``before`` runs first (e.g. placing the input block of an
    all-gather), ``after`` when the operation completes; ``out`` receives the
    plan's result ranges (a reduce-scatter's block, see :meth:`Plan.start`). ``pool``: the plan
    goes back to ``st``'s idle plans under this key once the operation is done
    (:meth:`~swing_mpi.state.CommState.release_plan`; not after a failure).
    """
    err: list[BaseException | None] = [None]
    greq = MPI.Grequest.Start(_query, None, _no_cancel, (err,))
    req = Request(greq)
    req._bind(st, plan, work, source, before, after, out)
    req._pool = pool
    req._err = err
    req._greq = greq
    try:
        req._begin(st.next_seq())
    except BaseException:
        req._signal()
        MPI.Request.Wait(req)
        raise
    return req


def persistent_request(st: CommState, plan: Plan | None, work: np.ndarray, source: np.ndarray | None, seq: int, *,
                       before: Callable[[], None] | None = None, after: Callable[[], None] | None = None,
                       out: np.ndarray | None = None) -> PersistentRequest:
    """Return an inactive persistent request for ``plan`` (operation number ``seq``, see :func:`persistent_comm`).

    The arguments are those of :func:`start_request`; ``before`` runs at every start.
    """
    comm, tag = _self_tag()
    req = PersistentRequest(comm.Ssend_init([_TOKEN, 0, MPI.BYTE], 0, tag))
    req._bind(st, plan, work, source, before, after, out)
    req._err = [None]
    req._seq = seq
    req._tag = tag
    req._self = comm
    ENGINE.watch(req)
    return req
