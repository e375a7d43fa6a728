"""Errors of our collectives that MPI reports: :class:`CollectiveError` and the message that names the likely cause."""

from __future__ import annotations

from mpi4py import MPI

from .waiting import END_THE_JOB, rank_name

__all__ = ["CollectiveError", "mismatch_message", "timeout_message"]


class CollectiveError(MPI.Exception):
    """An MPI error inside one of our collectives, said with where it happened and what probably caused it.

    An ``MPI.Exception`` (``Get_error_code()`` is MPI's code), so code that catches MPI's errors catches it.
    """

    def __init__(self, code: int, message: str) -> None:
        """Keep MPI's ``code`` and our ``message``."""
        super().__init__(code)
        self.message = message

    def __str__(self) -> str:
        """Return the message."""
        return self.message


def mismatch_message(comm: MPI.Comm, code: int, operation: str, algorithm: str, count: int, ext: int, step: int,
                     lane: int, peer: int, kind: int) -> str:
    """Say where MPI's error ``code`` happened in a collective and what probably caused it.

    ``lane`` -1: the plan has one lane (not named); ``kind``: 0 a receive, 1 a send, 2 a reduction, -1 unknown.
    """
    try:
        reason = MPI.Get_error_string(code).strip()
    except MPI.Exception:
        reason = f"error code {code}"
    where = f"step {step}" + (f" of lane {lane}" if lane >= 0 else "")
    what = {0: f", receiving from {rank_name(comm, peer)}", 1: f", sending to {rank_name(comm, peer)}",
            2: ", reducing"}.get(kind, "")
    return (f"{operation} ({algorithm}, {count} elements of {ext} bytes) on {rank_name(comm, comm.Get_rank())}: "
            f"MPI reported {reason!r} in {where}{what}. The ranks probably called it with different counts, "
            f"datatypes, ops, algorithms or dims; SWING_MPI_CHECK=1 compares every call's arguments across ranks "
            f"before any data moves. The collective is broken, {END_THE_JOB}")


def timeout_message(comm: MPI.Comm, operation: str, algorithm: str, count: int, lanes: int, nsteps: int,
                    timeout: float, waiting: list[tuple[int, int, int, str]], step: int) -> str:
    """Say which peers a collective waited for too long, in which steps (``waiting``: lane, step, peer, what).

    ``step``: the step named when no request is known to be pending.
    """
    peers: dict[int, set[str]] = {}
    for _, _, peer, what in waiting:
        peers.setdefault(peer, set()).add(what)
    where = ", ".join(f"step {k}" + (f" of lane {lane}" if lanes > 1 else "")
                      for lane, k in sorted({(lane, k) for lane, k, _, _ in waiting})) or f"step {step}"
    who = ", ".join(f"{rank_name(comm, peer)} ({' and '.join(sorted(w))} it)" for peer, w in sorted(peers.items()))
    return (f"{operation} ({algorithm}, {count} elements) on {rank_name(comm, comm.Get_rank())}: "
            f"waiting for {who or 'a peer'} in {where} (of {nsteps}) for more than {timeout:g} s "
            f"(SWING_MPI_TIMEOUT); the collective is broken, {END_THE_JOB}")
