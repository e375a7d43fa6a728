"""Reduce-scatter and all-gather with mpi4py's semantics, run on the halves of our allreduce schedules.

``reduce_scatter_block(comm, sendbuf, recvbuf, op)`` is
``comm.Reduce_scatter_block(sendbuf, recvbuf, op)``, ``reduce_scatter(comm,
sendbuf, recvbuf, recvcounts, op)`` is ``comm.Reduce_scatter(...)`` and
``allgather(comm, sendbuf, recvbuf)`` is ``comm.Allgather(...)``: buffer specs
as for :func:`swing_mpi.allreduce`, ``MPI.IN_PLACE``, block ``i`` to (or from)
rank ``i``. The ``i…`` functions return a request, the ``…_init`` ones a
persistent request (``Start``/``Wait``).

The schedules are :func:`swing_mpi.schedule.halves.build_half` of an algorithm
the registry marks for the collective (``AlgorithmInfo.collectives``). ``auto``
asks :func:`swing_mpi.choose.choose_collective`. A non-commutative op runs the
MPI library's own collective, which keeps rank order (our halves reduce each
block in their schedule's order). Device buffers go to the MPI library too.

Bad input raises ``TypeError``/``ValueError`` on the calling rank before any
communication (a ``recvcounts=None`` reduce-scatter first gathers the counts,
as mpi4py does, and a rank whose arguments fail then makes every rank raise).
What only other ranks could see (different counts, ops or algorithms on
different ranks) is erroneous in MPI; ``check=True`` (or ``$SWING_MPI_CHECK``)
compares it across ranks first and raises
:class:`~swing_mpi.guard.CollectiveMismatchError` on every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from mpi4py import MPI

from . import choose as chooser
from . import guard
from .buffers import BufferSpec, DeviceBuffer, check_comm_op, check_same_datatype, is_in_place, parse_buffer
from .opfacts import is_exact
from .repeat import NATIVE_SHAPES, native_again, remember_native
from .request import Request
from .schedule import AUTO, NATIVE, algorithm_info
from .schedule.halves import ALL_GATHER, REDUCE_SCATTER, build_half
from .state import CommState, comm_state, dims_for, requested_algorithm

__all__ = ["reduce_scatter_block", "ireduce_scatter_block", "reduce_scatter_block_init",
           "reduce_scatter", "ireduce_scatter", "reduce_scatter_init",
           "allgather", "iallgather", "allgather_init", "supports"]

BLOCKING, NONBLOCKING, PERSISTENT = "blocking", "nonblocking", "persistent"


def _checking(check: bool | None) -> bool:
    """Whether a call compares its arguments across ranks (``check``, default ``$SWING_MPI_CHECK``)."""
    return guard.CHECK_DEFAULT if check is None else bool(check)


def supports(algorithm: str | None, collective: str) -> bool:
    """Tell whether a named algorithm runs ``collective`` (``auto``/``native``/``None``: always)."""
    if algorithm is None or algorithm in (AUTO, NATIVE):
        return True
    try:
        return collective in algorithm_info(algorithm).collectives
    except ValueError:
        return True  # an unknown name: let the call report it


def _resolve(comm: MPI.Intracomm, collective: str, algorithm: str | None, dims: Any, nbytes: int,
             op: MPI.Op | None, datatype: MPI.Datatype) -> tuple[str, tuple[int, ...]]:
    """Return (algorithm, dims) of one call; ``native`` for non-commutative ops."""
    requested = requested_algorithm(algorithm)
    if requested not in chooser.algorithm_names():
        raise ValueError(f"unknown algorithm {requested!r}; known: {', '.join(chooser.algorithm_names())}")
    if requested == NATIVE:
        return NATIVE, ()
    if requested != AUTO and collective not in algorithm_info(requested).collectives:
        if algorithm is None:  # from $SWING_MPI_ALGORITHM, which also names allreduce's: auto decides here
            requested = AUTO
        else:
            ok = [a for a in chooser.algorithm_names() if supports(a, collective)]
            raise ValueError(f"{requested} has no {collective}; use one of {', '.join(ok)}")
    dims_t = dims_for(comm, dims)
    if op is not None and not op.Is_commutative():
        return NATIVE, dims_t
    if requested == AUTO:
        exact = True if op is None else is_exact(op, datatype)
        requested = chooser.choose_collective(collective, comm.Get_size(), dims_t, nbytes, exact=exact,
                                              commutative=True, native_ok=True,
                                              tuning=comm_state(comm).tuning)
    return requested, dims_t


def _placed(st: CommState, blocks: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Return the blocks indexed by torus position (private rank) instead of user rank."""
    if st.placement is None:
        return tuple(blocks)
    out = [(0, 0)] * len(blocks)
    for user_rank, pos in enumerate(st.placement):
        out[pos] = blocks[user_rank]
    return tuple(out)


def _blocks(counts: list[int]) -> list[tuple[int, int]]:
    out, off = [], 0
    for c in counts:
        out.append((off, off + c))
        off += c
    return out


def _check_counts(recvcounts: Any, p: int) -> list[int]:
    try:
        counts = [int(c) for c in recvcounts]
    except (TypeError, ValueError):
        raise TypeError(f"recvcounts must be a sequence of {p} integers, got {recvcounts!r}") from None
    if len(counts) != p:
        raise ValueError(f"recvcounts has {len(counts)} entries, the communicator {p} ranks")
    if any(c < 0 for c in counts):
        raise ValueError(f"recvcounts must be >= 0, got {counts}")
    if any(not float(c).is_integer() for c in recvcounts):
        raise ValueError(f"recvcounts must be whole numbers, got {list(recvcounts)}")
    return counts


def _no_overlap(send: BufferSpec, recv: BufferSpec, what: str) -> None:
    if send.count and recv.count and np.shares_memory(send.data, recv.data):
        raise ValueError(f"sendbuf and recvbuf overlap; use MPI.IN_PLACE for an in-place {what}")


def _go(comm: MPI.Intracomm, collective: str, name: str, dims_t: tuple[int, ...], counts: list[int],
        datatype: MPI.Datatype, op: MPI.Op, work: np.ndarray | None, source: np.ndarray | None,
        before: Callable[[], None] | None, out: np.ndarray | None, mode: str, *, stage: bool = False) -> Any:
    """Run (or start) the half ``collective`` of ``name`` on the vector ``work`` (``None``: a work vector of ours).

    ``before`` runs before the schedule; ``out`` (bytes) receives this rank's block of the result
    (a reduce-scatter's receive buffer; the plan writes its last reductions straight into it).
    ``stage``: copy ``source`` into the work vector first (it overlaps ``out``: an in-place call);
    otherwise the plan reads ``source`` where it first needs it.
    """
    st = comm_state(comm, getattr(comm, "swing_placement", None))
    half = REDUCE_SCATTER if collective == "reduce_scatter" else ALL_GATHER
    total = sum(counts)
    ext = datatype.extent
    blocks = _placed(st, _blocks(counts))
    key = None
    if mode == BLOCKING and datatype.is_predefined and op.is_predefined:
        key = (collective, name, dims_t, tuple(counts), datatype.py2f(), op.py2f())
    plan = None
    if total:
        plan = st.plan(key, lambda: build_half(name, dims_t, st.rank, blocks, half=half), datatype, op)
    if work is None:
        work = st.vector(key, total * ext)
    if stage and source is not None:
        before = _move(work, source)
        source = None
    if mode != BLOCKING:
        return Request(st, plan, work, source, persistent=mode == PERSISTENT, before=before, out=out)
    seq = st.next_seq()
    if before is not None:
        before()
    if plan is not None:
        plan.run(work, source, seq=seq, out=out)
    return None


def _move(dst: np.ndarray, src: np.ndarray) -> Callable[[], None]:
    def move() -> None:
        dst[...] = src
    return move


# -- reduce-scatter ---------------------------------------------------------------------------

def _rs_validate(comm: Any, sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Any,
                 block: bool) -> tuple[BufferSpec | None, BufferSpec, list[int]]:
    """Check a reduce-scatter's arguments on this rank; return (send, recv, counts).

    Raises :class:`DeviceBuffer` for buffers only the MPI library can reduce. With
    ``recvcounts=None`` the counts are gathered (collective) before any local error is raised, so an
    error on one rank reaches every rank instead of leaving the others waiting.
    """
    check_comm_op(comm, op)
    p, rank = comm.Get_size(), comm.Get_rank()
    what = "reduce_scatter_block" if block else "reduce_scatter"
    recv = parse_buffer(recvbuf, writable=True, where="recvbuf")
    send = None if is_in_place(sendbuf) else parse_buffer(sendbuf, writable=False, where="sendbuf")
    if block:
        if send is None:
            if recv.count % p:
                raise ValueError(f"in-place {what}: recvbuf has {recv.count} elements, not a multiple of {p} ranks")
            n = recv.count // p
        else:
            n = recv.count
            if send.count != n * p:
                raise ValueError(f"{what}: sendbuf has {send.count} elements, expected {p} x {n} "
                                 f"(recvbuf's count times the ranks)")
        counts = [n] * p
    elif recvcounts is None:
        problem: Exception | None = None
        if send is None:
            problem = ValueError(f"in-place {what} needs recvcounts")
        else:
            try:
                check_same_datatype(send, recv)
            except (TypeError, ValueError) as e:
                problem = e
        got = comm.allgather(None if problem is not None or send is None else (recv.count, send.count))
        if problem is not None:
            raise problem
        if None in got:
            bad = [r for r, c in enumerate(got) if c is None]
            raise ValueError(f"{what}: rank(s) {bad} rejected their arguments; no data moved")
        counts = [int(c) for c, _ in got]
        total = sum(counts)
        wrong = [r for r, (_, sc) in enumerate(got) if sc != total]
        if rank in wrong:
            raise ValueError(f"{what}: sendbuf has {got[rank][1]} elements, sum(recvcounts) is {total}")
        if wrong:  # every rank sees every sendbuf's length: all raise, none waits
            raise ValueError(f"{what}: the sendbuf of rank(s) {wrong} does not hold sum(recvcounts) = {total} "
                             f"elements; no data moved")
    else:
        counts = _check_counts(recvcounts, p)
    if not block:
        total = sum(counts)
        if send is None:
            if recv.count < total:
                raise ValueError(f"in-place {what}: recvbuf has {recv.count} elements, "
                                 f"sum(recvcounts) is {total}")
        else:
            if send.count != total:
                raise ValueError(f"{what}: sendbuf has {send.count} elements, sum(recvcounts) is {total}")
            if recv.count < counts[rank]:
                raise ValueError(f"{what}: recvbuf has {recv.count} elements, "
                                 f"recvcounts[{rank}] is {counts[rank]}")
    if send is not None:
        check_same_datatype(send, recv)
        _no_overlap(send, recv, what)
    return send, recv, counts


def _reduce_scatter(comm: Any, sendbuf: Any, recvbuf: Any, recvcounts: Any, op: Any, algorithm: str | None,
                    dims: Any, mode: str, *, block: bool, check: bool | None) -> Any:
    operation = "reduce_scatter_block" if block else "reduce_scatter"

    def resolve(v: tuple[BufferSpec | None, BufferSpec, list[int]]) -> tuple[str, tuple[int, ...]]:
        _, recv, counts = v
        return _resolve(comm, "reduce_scatter", algorithm, dims, sum(counts) * recv.extent, op, recv.datatype)

    try:
        if _checking(check):
            (send, recv, counts), name, dims_t = guard.checked(
                comm, lambda: _rs_validate(comm, sendbuf, recvbuf, recvcounts, op, block), resolve,
                lambda v: {"count": sum(v[2]), "datatype": v[1].datatype, "counts": v[2]}, op, operation=operation)
        else:
            send, recv, counts = _rs_validate(comm, sendbuf, recvbuf, recvcounts, op, block)
            name, dims_t = resolve((send, recv, counts))
    except DeviceBuffer:
        return _native_rs(comm, sendbuf, recvbuf, recvcounts, op, mode, block)
    if name == NATIVE:
        out = _native_rs(comm, sendbuf, recvbuf, counts if not block else None, op, mode, block)
        # remembered only where no call checks by default: a later call with check=None must check
        if block and mode == BLOCKING and not (_checking(check) or guard.CHECK_DEFAULT):
            remember_native("reduce_scatter_block", comm, sendbuf, recvbuf, op, algorithm, dims, recv.datatype)
        return out
    rank = comm.Get_rank()
    total = sum(counts)
    ext = recv.extent
    mine = counts[rank] * ext
    # in place too, a work vector of ours: MPI libraries leave the receive buffer beyond the
    # result as it was (mpi4py's tests check it), so the schedule cannot run in it
    source = recv.data[:total * ext] if send is None else send.data
    return _go(comm, "reduce_scatter", name, dims_t, counts, recv.datatype, op, None, source, None,
               recv.data[:mine] if mine else None, mode, stage=send is None)


def _native_rs(comm: Any, sendbuf: Any, recvbuf: Any, counts: Any, op: MPI.Op, mode: str, block: bool) -> Any:
    sb = MPI.IN_PLACE if is_in_place(sendbuf) else sendbuf
    fn: Any
    if block:
        fn = {BLOCKING: MPI.Intracomm.Reduce_scatter_block, NONBLOCKING: MPI.Intracomm.Ireduce_scatter_block,
              PERSISTENT: MPI.Intracomm.Reduce_scatter_block_init}[mode]
        return fn(comm, sb, recvbuf, op)
    fn = {BLOCKING: MPI.Intracomm.Reduce_scatter, NONBLOCKING: MPI.Intracomm.Ireduce_scatter,
          PERSISTENT: MPI.Intracomm.Reduce_scatter_init}[mode]
    return fn(comm, sb, recvbuf, counts, op)


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
    _reduce_scatter(comm, sendbuf, recvbuf, None, op, algorithm, dims, BLOCKING, block=True, check=check)


def ireduce_scatter_block(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
                          algorithm: str | None = None, dims: Any = None, check: bool | None = None) -> Any:
    """Start a nonblocking :func:`reduce_scatter_block`; return its request."""
    return _reduce_scatter(comm, sendbuf, recvbuf, None, op, algorithm, dims, NONBLOCKING, block=True, check=check)


def reduce_scatter_block_init(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
                              algorithm: str | None = None, dims: Any = None, check: bool | None = None) -> Any:
    """Set up a persistent :func:`reduce_scatter_block` (``Start``/``Wait``); buffers are bound now."""
    return _reduce_scatter(comm, sendbuf, recvbuf, None, op, algorithm, dims, PERSISTENT, block=True, check=check)


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
    _reduce_scatter(comm, sendbuf, recvbuf, recvcounts, op, algorithm, dims, BLOCKING, block=False, check=check)


def ireduce_scatter(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                    op: MPI.Op = MPI.SUM, *, algorithm: str | None = None, dims: Any = None,
                    check: bool | None = None) -> Any:
    """Start a nonblocking :func:`reduce_scatter`; return its request."""
    return _reduce_scatter(comm, sendbuf, recvbuf, recvcounts, op, algorithm, dims, NONBLOCKING, block=False,
                           check=check)


def reduce_scatter_init(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,
                        op: MPI.Op = MPI.SUM, *, algorithm: str | None = None, dims: Any = None,
                        check: bool | None = None) -> Any:
    """Set up a persistent :func:`reduce_scatter` (``Start``/``Wait``); buffers are bound now."""
    return _reduce_scatter(comm, sendbuf, recvbuf, recvcounts, op, algorithm, dims, PERSISTENT, block=False,
                           check=check)


# -- all-gather -------------------------------------------------------------------------------

def _ag_validate(comm: Any, sendbuf: Any, recvbuf: Any) -> tuple[BufferSpec | None, BufferSpec, int]:
    """Check an all-gather's arguments on this rank; return (send, recv, block count)."""
    check_comm_op(comm)
    p = comm.Get_size()
    recv = parse_buffer(recvbuf, writable=True, where="recvbuf")
    send = None if is_in_place(sendbuf) else parse_buffer(sendbuf, writable=False, where="sendbuf")
    if send is None:
        if recv.count % p:
            raise ValueError(f"in-place allgather: recvbuf has {recv.count} elements, not a multiple of {p} ranks")
        n = recv.count // p
    else:
        n = send.count
        check_same_datatype(send, recv)
        if recv.count < n * p:
            raise ValueError(f"allgather: recvbuf has {recv.count} elements, needs {p} x {n} "
                             f"(sendbuf's count times the ranks)")
        _no_overlap(send, recv, "allgather")
    return send, recv, n


def _allgather(comm: Any, sendbuf: Any, recvbuf: Any, algorithm: str | None, dims: Any, mode: str,
               check: bool | None) -> Any:
    def resolve(v: tuple[BufferSpec | None, BufferSpec, int]) -> tuple[str, tuple[int, ...]]:
        _, recv, n = v
        return _resolve(comm, "allgather", algorithm, dims, n * comm.Get_size() * recv.extent, None,
                        recv.datatype)

    try:
        if _checking(check):
            (send, recv, n), name, dims_t = guard.checked(
                comm, lambda: _ag_validate(comm, sendbuf, recvbuf), resolve,
                lambda v: {"count": v[2], "datatype": v[1].datatype}, MPI.REPLACE, operation="allgather")
        else:
            send, recv, n = _ag_validate(comm, sendbuf, recvbuf)
            name, dims_t = resolve((send, recv, n))
    except DeviceBuffer:
        return _native_ag(comm, sendbuf, recvbuf, mode)
    if name == NATIVE:
        out = _native_ag(comm, sendbuf, recvbuf, mode)
        if mode == BLOCKING and not (_checking(check) or guard.CHECK_DEFAULT):
            remember_native("allgather", comm, sendbuf, recvbuf, None, algorithm, dims, recv.datatype)
        return out
    p, rank = comm.Get_size(), comm.Get_rank()
    ext = recv.extent
    work = recv.data[:n * p * ext]
    before = None
    if send is not None and n:
        before = _move(work[rank * n * ext:(rank + 1) * n * ext], send.data[:n * ext])
    return _go(comm, "allgather", name, dims_t, [n] * p, recv.datatype, MPI.REPLACE, work, None, before, None,
               mode)


def _native_ag(comm: Any, sendbuf: Any, recvbuf: Any, mode: str) -> Any:
    sb = MPI.IN_PLACE if is_in_place(sendbuf) else sendbuf
    fn = {BLOCKING: MPI.Intracomm.Allgather, NONBLOCKING: MPI.Intracomm.Iallgather,
          PERSISTENT: MPI.Intracomm.Allgather_init}[mode]
    return fn(comm, sb, recvbuf)


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
    _allgather(comm, sendbuf, recvbuf, algorithm, dims, BLOCKING, check)


def iallgather(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None,
               dims: Any = None, check: bool | None = None) -> Any:
    """Start a nonblocking :func:`allgather`; return its request."""
    return _allgather(comm, sendbuf, recvbuf, algorithm, dims, NONBLOCKING, check)


def allgather_init(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, *, algorithm: str | None = None,
                   dims: Any = None, check: bool | None = None) -> Any:
    """Set up a persistent :func:`allgather` (``Start``/``Wait``); buffers are bound now."""
    return _allgather(comm, sendbuf, recvbuf, algorithm, dims, PERSISTENT, check)
