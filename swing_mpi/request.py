"""Requests of nonblocking (``I…``) and persistent (``…_init``) collectives run by our engine.

The method names follow ``MPI.Request``/``MPI.Prequest``: ``Start`` (persistent
only), ``Test``, ``Wait``, ``Free``; :meth:`Request.Waitall` and
:meth:`Request.Testall` take a list mixing these and ``MPI.Request`` objects.

Progress: the schedule advances inside ``Test``/``Wait`` (and ``Start``, which
posts the first step of every lane); there is no progress thread. A request
that nobody tests makes no progress beyond its first step, as with most MPI
libraries' nonblocking collectives without asynchronous progress.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from .executor import Plan
from .state import CommState

__all__ = ["Request"]


class Request:
    """One nonblocking or persistent collective on a :class:`~swing_mpi.executor.Plan`.

    ``work`` is the plan's work vector (bytes) and ``source`` its input when not
    in place; ``before`` runs at every start (e.g. placing the input block of an
    all-gather), ``after`` once each operation completes; ``out`` receives the
    plan's result ranges (a reduce-scatter's block, see :meth:`Plan.start`). ``plan`` is ``None`` for an operation that
    moves nothing (count 0 or one rank): then only ``before`` and ``after`` run.
    """

    def __init__(self, st: CommState, plan: Plan | None, work: np.ndarray, source: np.ndarray | None, *,
                 persistent: bool, before: Callable[[], None] | None = None,
                 after: Callable[[], None] | None = None, out: np.ndarray | None = None) -> None:
        """Bind the operation; a nonblocking one starts now."""
        self._st = st
        self._plan = plan
        self._work = work
        self._source = source
        self._persistent = persistent
        self._before = before
        self._after = after
        self._out = out
        self._pending = False
        self._freed = False
        if not persistent:
            self._begin()

    def _begin(self) -> None:
        seq = self._st.next_seq()
        if self._before is not None:
            self._before()
        self._pending = True
        if self._plan is not None:
            self._plan.start(self._work, self._source, seq=seq, out=self._out)
        self._finish_if_done()

    def _finish_if_done(self) -> bool:
        if self._plan is not None and self._plan.active:
            return False
        if self._pending:
            self._pending = False
            if self._after is not None:
                self._after()
        return True

    def Start(self) -> None:  # noqa: N802
        """Start a persistent operation (again)."""
        if not self._persistent:
            raise RuntimeError("Start() is for persistent requests (from an ..._init call)")
        if self._freed:
            raise RuntimeError("this request has been freed")
        if self.active:
            raise RuntimeError("this operation is still in progress; Wait() for it before starting it again")
        self._begin()

    def Test(self) -> bool:  # noqa: N802
        """Make progress without blocking; true once the operation is complete."""
        if self._plan is not None:
            self._plan.test()
        return self._finish_if_done()

    def Wait(self) -> None:  # noqa: N802
        """Block until the operation is complete."""
        if self._plan is not None:
            self._plan.wait()
        self._finish_if_done()

    def Free(self) -> None:  # noqa: N802
        """Release the request; an operation in progress must be waited for first."""
        if self.active:
            raise RuntimeError("cannot free an operation in progress; Wait() for it first")
        self._plan = None
        self._freed = True

    @property
    def active(self) -> bool:
        """Whether an operation was started and is not complete yet."""
        return self._pending

    @staticmethod
    def Waitall(requests: list[Any]) -> None:  # noqa: N802
        """Wait for a mix of swing_mpi and MPI requests (ours progress in turn)."""
        ours = [r for r in requests if isinstance(r, Request)]
        theirs = [r for r in requests if not isinstance(r, Request)]
        while any(r.active for r in ours):
            for r in ours:
                r.Test()
            if theirs:
                MPI.Request.Testall(theirs)
        if theirs:
            MPI.Request.Waitall(theirs)

    @staticmethod
    def Testall(requests: list[Any]) -> bool:  # noqa: N802
        """Make progress on every request; true if all are complete."""
        done = [r.Test() for r in requests]
        return all(done)
