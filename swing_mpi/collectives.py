"""Reduce-scatter and all-gather with mpi4py's semantics, run on the halves of our allreduce schedules.

``reduce_scatter_block(comm, sendbuf, recvbuf, op)`` is
``comm.Reduce_scatter_block(sendbuf, recvbuf, op)``, ``reduce_scatter(comm,
sendbuf, recvbuf, recvcounts, op)`` is ``comm.Reduce_scatter(...)`` and
``allgather(comm, sendbuf, recvbuf)`` is ``comm.Allgather(...)``: buffer specs
as for :func:`swing_mpi.allreduce`, ``MPI.IN_PLACE``, block ``i`` to (or from)
rank ``i``. The ``i...`` functions return a request, the ``..._init`` ones a
persistent request (``Start``/``Wait``).

A front-end: every call goes through :func:`swing_mpi.pipeline.call`, as an
allreduce does. The schedules are :func:`swing_mpi.schedule.halves.build_half`
of an algorithm the registry marks for the collective; the decision is
:func:`swing_mpi.choose.decide`'s (a non-commutative op: the MPI library's own
collective, since our halves reduce each block in their schedule's order).
Bad input raises ``TypeError``/``ValueError`` on the calling rank before any
communication (a ``recvcounts=None`` reduce-scatter first gathers the counts,
as mpi4py does); ``check=True`` (or ``$SWING_MPI_CHECK``) compares the
arguments across ranks first and raises
:class:`~swing_mpi.guard.CollectiveMismatchError` on every rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from .choose import supports
from .pipeline import BLOCKING, NONBLOCKING, PERSISTENT, call
from .repeat import NATIVE_SHAPES, native_again

__all__ = ["reduce_scatter_block", "ireduce_scatter_block", "reduce_scatter_block_init",
           "reduce_scatter", "ireduce_scatter", "reduce_scatter_init",
           "allgather", "iallgather", "allgather_init", "supports"]


def reduce_scatter_block(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
                         algorithm: str | None = None, dims: Any = None, check: bool | None = None) -> None:
    """Do ``comm.Reduce_scatter_block(sendbuf, recvbuf, op)`` on a reduce-scatter schedule of ours.

    Args:
        comm: any intracommunicator.
        sendbuf: ``p·n`` elements, or ``MPI.IN_PLACE`` (then ``recvbuf``
            holds the ``p·n`` inputs and gets the result in its first ``n``).
        recvbuf: ``n`` elements: block ``rank`` of the reduced vector.
        op: any ``MPI.Op``; non-commutative ones run the MPI library's collective.
        algorithm, dims: as for :func:`swing_mpi.allreduce`; the algorithm must
            be one the registry marks for ``reduce_scatter``.
        check: compare the arguments (counts, datatype, op, algorithm, dims)
            across ranks first (:mod:`swing_mpi.guard`; default ``$SWING_MPI_CHECK``).
    """
    if (NATIVE_SHAPES and not check and type(recvbuf) is np.ndarray
            and native_again("reduce_scatter_block", comm, sendbuf, recvbuf, op, algorithm, dims)):
        return  # new arrays of a shape that went to MPI before (swing_mpi.repeat)
    call("reduce_scatter_block", BLOCKING, comm, sendbuf, recvbuf, op, algorithm, dims, check)


def ireduce_scatter_block(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
                          algorithm: str | None = None, dims: Any = None, check: bool | None = None) -> Any:
    """Start a nonblocking :func:`reduce_scatter_block`; return its request."""
    return call("reduce_scatter_block", NONBLOCKING, comm, sendbuf, recvbuf, op, algorithm, dims, check)


def reduce_scatter_block_init(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
                              algorithm: str | None = None, dims: Any = None, check: bool | None = None) -> Any:
    """Set up a persistent :func:`reduce_scatter_block` (``Start``/``Wait``); buffers are bound now."""
    return call("reduce_scatter_block", PERSISTENT, comm, sendbuf, recvbuf, op, algorithm, dims, check)


def reduce_scatter(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                   op: MPI.Op = MPI.SUM, *, algorithm: str | None = None, dims: Any = None,
                   check: bool | None = None) -> None:
    """Do ``comm.Reduce_scatter(sendbuf, recvbuf, recvcounts, op)`` on a reduce-scatter schedule of ours.

    Args:
        comm: any intracommunicator.
        sendbuf: ``sum(recvcounts)`` elements, or ``MPI.IN_PLACE`` (then
            ``recvbuf`` holds them and gets the result in its first
            ``recvcounts[rank]``).
        recvbuf: at least ``recvcounts[rank]`` elements.
        recvcounts: elements of each rank's block, in rank order (zeros
            allowed); ``None``: each rank's ``recvbuf`` count, gathered
            (not in place).
        op, algorithm, dims, check: as for :func:`reduce_scatter_block`.
    """
    call("reduce_scatter", BLOCKING, comm, sendbuf, recvbuf, op, algorithm, dims, check, recvcounts)


def ireduce_scatter(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                    op: MPI.Op = MPI.SUM, *, algorithm: str | None = None, dims: Any = None,
                    check: bool | None = None) -> Any:
    """Start a nonblocking :func:`reduce_scatter`; return its request."""
    return call("reduce_scatter", NONBLOCKING, comm, sendbuf, recvbuf, op, algorithm, dims, check, recvcounts)


def reduce_scatter_init(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                        op: MPI.Op = MPI.SUM, *, algorithm: str | None = None, dims: Any = None,
                        check: bool | None = None) -> Any:
    """Set up a persistent :func:`reduce_scatter` (``Start``/``Wait``); buffers are bound now."""
    return call("reduce_scatter", PERSISTENT, comm, sendbuf, recvbuf, op, algorithm, dims, check, recvcounts)


# -- all-gather -------------------------------------------------------------------------------

def allgather(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None,
              dims: Any = None, check: bool | None = None) -> None:
    """Do ``comm.Allgather(sendbuf, recvbuf)`` on an all-gather schedule of ours.

    Args:
        comm: any intracommunicator.
        sendbuf: ``n`` elements, or ``MPI.IN_PLACE`` (then this rank's block
            of ``recvbuf`` is its input).
        recvbuf: ``p·n`` elements; block ``i`` gets rank ``i``'s ``sendbuf``.
        algorithm, dims: as for :func:`swing_mpi.allreduce`; the algorithm must
            be one the registry marks for ``allgather``.
        check: as for :func:`reduce_scatter_block`.
    """
    if (NATIVE_SHAPES and not check and type(recvbuf) is np.ndarray
            and native_again("allgather", comm, sendbuf, recvbuf, None, algorithm, dims)):
        return  # new arrays of a shape that went to MPI before (swing_mpi.repeat)
    call("allgather", BLOCKING, comm, sendbuf, recvbuf, None, algorithm, dims, check)


def iallgather(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None,
               dims: Any = None, check: bool | None = None) -> Any:
    """Start a nonblocking :func:`allgather`; return its request."""
    return call("allgather", NONBLOCKING, comm, sendbuf, recvbuf, None, algorithm, dims, check)


def allgather_init(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None,
                   dims: Any = None, check: bool | None = None) -> Any:
    """Set up a persistent :func:`allgather` (``Start``/``Wait``); buffers are bound now."""
    return call("allgather", PERSISTENT, comm, sendbuf, recvbuf, None, algorithm, dims, check)
