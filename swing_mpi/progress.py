"""The progress thread: drives our collectives while the user waits inside MPI.

A request of ours (:mod:`swing_mpi.request`) holds a real MPI request handle, so
``MPI.Request.Waitall([ours, halo_irecv])`` or ``MPI.Prequest.Startall([ours, p])``
go straight to the MPI library, which never calls back into our engine. One
daemon thread per process, started on first use, makes the progress those calls
cannot: every round it tests each running collective whose lock nobody holds
(``Plan.test()``, nonblocking, so that no collective waits on another), finishes
the complete ones (completing their MPI handle), and looks for persistent
requests started behind our back (``MPI_Startall`` on their handle: its message to self appears,
:class:`swing_mpi.request.PersistentRequest`).

Between two rounds the thread sleeps a quarter of the age of the oldest running
collective, within :data:`POLL_MIN`..:data:`POLL_MAX` (a collective that has
run long is seen at most 25 % late), and only :data:`POLL_MAX` while it only
watches idle persistent requests; with nothing running or watched for :data:`LINGER`
it blocks (a program issuing nonblocking calls one after another wakes it only once).
The caller's own ``Wait``/``Test`` drive a request directly under its lock,
so the thread only ever takes over what nobody else is driving.

MPI must run with ``MPI_THREAD_MULTIPLE`` (mpi4py's default); otherwise no
thread is started and only our own methods (``req.Wait()``, not
``MPI.Request.Wait(req)``) make progress.
"""

from __future__ import annotations

import atexit
import threading
import time
from typing import Any

from mpi4py import MPI

__all__ = ["POLL_MIN", "POLL_MAX", "LINGER", "Engine", "ENGINE", "threads_ok"]

POLL_MIN = 50e-6
"""Seconds the thread sleeps at least between two rounds while a collective runs."""
POLL_MAX = 1e-3
"""Seconds it sleeps at most: while a collective runs for long, and between looks at idle persistent requests."""

LINGER = 0.1
"""Seconds the thread keeps polling (every :data:`POLL_MAX`) after the last request is done, before it blocks."""


def threads_ok() -> bool:
    """Tell whether MPI allows a second thread to call it at any time (``MPI_THREAD_MULTIPLE``)."""
    return MPI.Is_initialized() and not MPI.Is_finalized() and MPI.Query_thread() == MPI.THREAD_MULTIPLE


class Engine:
    """The registry of running and watched requests, and the thread that polls them."""

    def __init__(self) -> None:
        """Start empty; the thread starts with the first request."""
        self._cond = threading.Condition()
        self._running: dict[int, Any] = {}
        """Requests whose collective runs (id -> request, strong: they own their buffers until done)."""
        self._watched: dict[int, Any] = {}
        """Persistent requests to look at for a start behind our back."""
        self._thread: threading.Thread | None = None
        self._stop = False
        self._idle = False
        """The thread blocks until something runs or is watched (a new request must wake it)."""
        self.enabled: bool | None = None

    def _ensure(self) -> bool:
        if self.enabled is None:
            self.enabled = threads_ok()
        if self.enabled and self._thread is None and not self._stop:
            self._thread = threading.Thread(target=self._run, name="swing_mpi-progress", daemon=True)
            self._thread.start()
        return bool(self.enabled)

    def running(self, req: Any) -> None:
        """Drive ``req`` (its collective has just started) until it is finished."""
        with self._cond:
            self._running[id(req)] = req
            if self._ensure() and self._idle:
                self._cond.notify()

    def done(self, req: Any) -> None:
        """Forget a finished request."""
        with self._cond:
            self._running.pop(id(req), None)

    def watch(self, req: Any) -> None:
        """Look at persistent ``req`` for starts until :meth:`unwatch`."""
        with self._cond:
            self._watched[id(req)] = req
            if self._ensure() and self._idle:
                self._cond.notify()

    def unwatch(self, req: Any) -> None:
        """Stop looking at ``req`` (freed)."""
        with self._cond:
            self._watched.pop(id(req), None)

    def stop(self) -> None:
        """End the thread (before MPI finalizes: registered with :mod:`atexit`)."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5.0)

    def _run(self) -> None:
        cond = self._cond
        last = time.monotonic()
        while True:
            with cond:
                if self._running or self._watched:
                    last = time.monotonic()
                elif not self._stop and time.monotonic() - last < LINGER:
                    cond.wait(POLL_MAX)  # more requests soon, usually: no wake-up (and its switch) for each
                    continue
                if not (self._running or self._watched or self._stop):
                    self._idle = True
                    while not (self._running or self._watched or self._stop):
                        cond.wait()
                    self._idle = False
                    cond.wait(POLL_MIN)  # the caller's own Wait usually finishes a short collective first
                if self._stop or MPI.Is_finalized():
                    return
                running = list(self._running.values())
                watched = list(self._watched.values())
            now = time.monotonic()
            oldest: float | None = None
            for req in running:
                if req._poll() and req._running:  # skipped (False): its own thread waits on it, in C
                    oldest = req._since if oldest is None else min(oldest, req._since)
            for req in watched:
                if id(req) not in self._running:
                    req._poll()
            with self._cond:
                if oldest is not None:
                    delay = min(POLL_MAX, max(POLL_MIN, (now - oldest) * 0.25))
                else:
                    delay = POLL_MAX
                if not self._stop:
                    cond.wait(delay)


ENGINE = Engine()
atexit.register(ENGINE.stop)  # after mpi4py's own registration: runs before MPI_Finalize
