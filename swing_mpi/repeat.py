"""The repeat path: a call on the same numpy arrays as an earlier one skips checks and choice.

Applications reduce the same arrays again and again (a training loop, a
solver's dot products). Everything :func:`swing_mpi.allreduce` checks and
decides depends only on the communicator, the op, the options and the arrays
themselves: their identity (contiguity, overlap) and the dtype and size that
numpy lets a program change in place. A call repeating all of these skips
straight to the data movement. Arrays are held by weak reference (a dead one
never matches), plans too (the communicator's plan cache owns them).

The ``native`` path checks the least: it passes the arrays to MPI as they are
now, as ``comm.Allreduce`` does, so mpi4py infers their datatypes and counts on
every call and refuses send and receive buffers whose datatypes or counts
differ; an array whose dtype was changed in place is reduced as its new dtype
(sizes cannot change in place: numpy refuses ``ndarray.resize`` on an array
with weak references). A communicator freed since fails in that MPI call, as
``comm.Allreduce`` would.

Where the compiled core runs the plan, a call on recorded arrays is one call into C:
the record of :data:`NATIVE_RECORDS` holds, in place of MPI's allreduce, the core's
record of the plan (:meth:`swing_mpi.executor.Plan.repeat_record`), which checks what
can change (the plan alive and idle, the state alive, the dtypes, sizes, contiguity,
writability), takes the operation's number and runs the plan, or returns ``False``
without sending anything; the caller then takes the Python path below.

Programs also reduce *new* arrays every call (``np.array([loss])`` in a training
loop), which no record matches. For these, the choice itself repeats: a call that
went to MPI is remembered by what decided it (communicator, op, options, dtype,
size, in place or not; :data:`NATIVE_SHAPES`), and a later call on new arrays of
that shape goes straight to MPI after the checks that depend on the arrays
themselves (contiguous, writable, same dtype and size, no overlap); a call that ran
a schedule with the compiled core is remembered the same way, with the core's record
of its plan in place of MPI's call. Any other call takes the full path. Blocking
reduce-scatter-block and all-gather calls do the same (:func:`native_again`), for new
and repeated arrays alike.
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

import numpy as np
from mpi4py import MPI

from .executor import Plan
from .state import CommState

__all__ = ["Repeat", "NativeRecord", "ShapeRecord",
           "RECORDS", "NATIVE_RECORDS", "LAST_NATIVE", "NO_RECORD", "REPEATS_MAX", "remember", "again",
           "NATIVE_SHAPES", "remember_native", "native_again"]


class Repeat:
    """What a call on plain numpy arrays resolved to a schedule for, for the next call on the same arrays."""

    __slots__ = ("recv", "send", "in_place", "comm", "op", "algorithm", "dims", "rdtype", "rsize",
                 "sdtype", "ssize", "datatype", "st", "plan")
    recv: weakref.ref
    send: weakref.ref | None
    in_place: Any
    comm: Any
    op: MPI.Op
    algorithm: Any
    dims: Any
    rdtype: np.dtype
    rsize: int
    sdtype: np.dtype | None
    ssize: int | None
    datatype: MPI.Datatype
    st: Any
    plan: weakref.ref


class NativeRecord(NamedTuple):
    """A call that went to MPI, for the next call on the same arrays (:data:`NATIVE_RECORDS`).

    The layout of the records: they are stored as plain tuples in this order (``tuple(NativeRecord(...))``),
    which :func:`swing_mpi.allreduce` unpacks at once. Python 3.11 specializes unpacking and indexing for
    exact tuples only: a NamedTuple's unpacking takes the generic path, measured 0.1 us more a call on a path
    whose whole cost over ``comm.Allreduce`` is a few tenths.
    """

    comm: Any
    op: Any
    algorithm: Any
    dims: Any
    send: Any
    """The send array's weak reference, or ``None`` in place."""
    in_place: Any
    """In place: what the call passed as ``sendbuf`` (``None`` or ``MPI.IN_PLACE``)."""
    native: Any
    """What runs the call: MPI's allreduce bound to ``comm``, or the compiled core's record of a schedule's plan
    (called alike, ``native(sendbuf, recvbuf, op)``; it returns ``False`` where it did not run)."""
    recv: Any
    """The receive array's weak reference."""


class ShapeRecord(NamedTuple):
    """A shape of blocking call that went to MPI (:data:`NATIVE_SHAPES`)."""

    comm: Any
    op: Any
    datatype: MPI.Datatype
    native: Any
    """MPI's collective bound to ``comm``."""
    seen: list
    """``[recv, send, countdown]``: watching for arrays that come back."""
    ours: bool = False
    """``native`` is a schedule's record of the compiled core (:meth:`swing_mpi.executor.Plan.repeat_record`),
    called as ``record(sendbuf, recvbuf, op)``, not MPI's collective."""


RECORDS: dict[int, Repeat] = {}
"""Keyed by ``id(recvbuf)``. A record leaves as soon as its receive or send array
is garbage (weak reference callbacks run before the memory can be reused), so a
record found under ``id(recvbuf)`` is this very array's, without calling its weak
reference."""
_SEND = NativeRecord._fields.index("send")
_RECV = NativeRecord._fields.index("recv")
NATIVE_RECORDS: dict[int, tuple] = {}
"""The calls that went to MPI, keyed by ``id(recvbuf)`` as :data:`RECORDS` (and dropped the same way).
No dtype or datatype: the call lets mpi4py infer them, which costs less than checking them."""


class _Never:
    """What :data:`NO_RECORD`'s receive reference returns: an object no call passes."""


_NEVER = _Never()
_no_ref = weakref.ref(_NEVER)
"""A weak reference that never leads to an array: it returns :data:`_NEVER`, which lives as long as the module."""
NO_RECORD = tuple(NativeRecord(*(_NEVER,) * 7, _no_ref))
"""A native record that matches no call: a private object where the communicator, the arrays and the rest
would be."""
LAST_NATIVE: list[tuple] = [NO_RECORD]
"""The native record made or used last (or :data:`NO_RECORD`), looked at before :data:`NATIVE_RECORDS`: a
loop on the same arrays finds its record with one weak-reference call instead of hashing ``id(recvbuf)``
into the dict, which an oversubscribed barrier-timed 1 KiB call at p = 4 measured as 3 % of the call.
Reset to :data:`NO_RECORD` when either of its arrays dies, so its arrays are alive whenever it is there."""
REPEATS_MAX = 256
"""More records than this (of either kind) and all of that kind are dropped (a program cycling through many
arrays)."""


def _forget_recv(ref: weakref.ref, key: int) -> None:
    r = RECORDS.get(key)
    if r is not None and r.recv is ref:
        RECORDS.pop(key, None)  # another thread may have cleared RECORDS meanwhile


def _forget_send(ref: weakref.ref, key: int) -> None:
    r = RECORDS.get(key)
    if r is not None and r.send is ref:
        RECORDS.pop(key, None)  # another thread may have cleared RECORDS meanwhile


def _forget_native(ref: weakref.ref, key: int) -> None:
    last = LAST_NATIVE[0]
    if last[_SEND] is ref or last[_RECV] is ref:
        LAST_NATIVE[0] = NO_RECORD
    t = NATIVE_RECORDS.get(key)
    if t is not None and (t[_SEND] is ref or t[_RECV] is ref):
        NATIVE_RECORDS.pop(key, None)


def _remember_call(key: int, comm: Any, op: MPI.Op, algorithm: Any, dims: Any, sendbuf: Any, recvbuf: Any,
                   in_place: bool, run: Any) -> None:
    """Keep a :class:`NativeRecord` of a call whose next call on these arrays ``run`` makes."""
    forget = lambda ref: _forget_native(ref, key)  # noqa: E731
    t = tuple(NativeRecord(comm, op, algorithm, dims, None if in_place else weakref.ref(sendbuf, forget),
                           sendbuf if in_place else None, run, weakref.ref(recvbuf, forget)))
    if len(NATIVE_RECORDS) >= REPEATS_MAX:
        NATIVE_RECORDS.clear()
    NATIVE_RECORDS[key] = t
    LAST_NATIVE[0] = t


def remember(comm: Any, sendbuf: Any, recvbuf: Any, op: MPI.Op, algorithm: Any, dims: Any,
             datatype: MPI.Datatype, st: CommState | None, plan: Plan | None) -> None:
    """Record a finished allreduce for the next call on the same arrays, if it is one that can repeat.

    ``plan`` is ``None`` for ``native`` (then ``st`` is unused; :data:`NATIVE_RECORDS`).
    """
    if type(recvbuf) is not np.ndarray or not recvbuf.size:
        return
    in_place = sendbuf is None or sendbuf is MPI.IN_PLACE
    if not in_place and type(sendbuf) is not np.ndarray:
        return
    if not (algorithm is None or type(algorithm) is str) or not (dims is None or type(dims) in (str, tuple)):
        return  # a list of dims could change between calls
    key = id(recvbuf)
    if plan is None:  # not comm.Allreduce: swing_mpi.Intracomm's
        _remember_call(key, comm, op, algorithm, dims, sendbuf, recvbuf, in_place,
                       MPI.Intracomm.Allreduce.__get__(comm))
        return
    r = Repeat()
    r.recv = weakref.ref(recvbuf, lambda ref: _forget_recv(ref, key))
    r.in_place = sendbuf if in_place else None
    r.send = None if in_place else weakref.ref(sendbuf, lambda ref: _forget_send(ref, key))
    r.sdtype = None if in_place else sendbuf.dtype
    r.ssize = None if in_place else sendbuf.size
    r.comm, r.op, r.algorithm, r.dims = comm, op, algorithm, dims
    r.rdtype, r.rsize = recvbuf.dtype, recvbuf.size
    r.datatype = datatype
    r.st = st
    r.plan = weakref.ref(plan)
    if len(RECORDS) >= REPEATS_MAX:
        RECORDS.clear()
    RECORDS[key] = r
    run = plan.repeat_record(st, recvbuf, None if in_place else sendbuf)
    if run is not None:  # the compiled core runs the next call on these arrays in one call, as MPI's own would
        _remember_call(key, comm, op, algorithm, dims, sendbuf, recvbuf, in_place, run)
        _remember_shape("allreduce", comm, sendbuf, recvbuf, op, algorithm, dims, datatype, run, in_place, True)


def again(r: Repeat, sendbuf: Any, recvbuf: Any) -> bool:
    """Run a recorded schedule call again on its arrays; false if a size, dtype or state no longer fits.

    The caller (:func:`swing_mpi.allreduce`) has found ``r`` under ``id(recvbuf)``
    and matched the communicator, op, options, receive dtype and send array;
    ``native`` records (:data:`NATIVE_RECORDS`) it runs itself.
    """
    plan = r.plan()
    if (plan is not None and r.st.alive and recvbuf.size == r.rsize and recvbuf.flags.writeable
            and (r.send is None or sendbuf.dtype is r.sdtype and sendbuf.size == r.ssize)):
        if plan.fast and recvbuf.flags.c_contiguous and (r.send is None or sendbuf.flags.c_contiguous):
            plan.run_fast(recvbuf, None if r.send is None else sendbuf, r.st.next_seq())
        else:
            plan.run(np.frombuffer(recvbuf, np.uint8),
                     None if r.send is None else np.frombuffer(sendbuf, np.uint8), seq=r.st.next_seq())
        return True
    return False


NATIVE_SHAPES: dict[tuple, ShapeRecord] = {}
"""Blocking calls that went to MPI, by what decided it: ``(collective, id(comm), id(op), algorithm, dims,
recv dtype, recv size, send size or None in place)`` maps to a :class:`ShapeRecord`.
A value holds ``comm`` and ``op`` (``None`` for the all-gather), so their ids
cannot be reused while the entry lives; more than :data:`REPEATS_MAX` entries and all are dropped.

``[recv, send, countdown]`` watch for arrays that come back: every :data:`WATCH_EVERY` allreduce calls of
that shape without a record, a weak reference to the receive array is taken; if the next such call is on
the same receive array, one to its send array; if the call after that is on the same pair (in place: at
once), the pair gets a record of :data:`NATIVE_RECORDS`, the cheaper path. The second and later persistent
buffers of a shape (a solver's dot products, equal gradient buckets) would otherwise never get one, since
the first buffer's call recorded the shape; a new array every call never comes back and gets no record."""


WATCH_EVERY = 8
"""How many allreduce calls of one shape without a record between two looks for arrays that come back."""

_NATIVE_CALLS = {"allreduce": MPI.Intracomm.Allreduce, "reduce_scatter_block": MPI.Intracomm.Reduce_scatter_block,
                 "allgather": MPI.Intracomm.Allgather}


def remember_native(collective: str, comm: Any, sendbuf: Any, recvbuf: Any, op: MPI.Op | None, algorithm: Any,
                    dims: Any, datatype: MPI.Datatype) -> None:
    """Record that a blocking call on plain numpy arrays went to MPI (see :data:`NATIVE_SHAPES`).

    ``collective``: ``"allreduce"``, ``"reduce_scatter_block"`` or ``"allgather"`` (``op`` ``None``).
    """
    in_place = sendbuf is None or sendbuf is MPI.IN_PLACE
    if type(recvbuf) is not np.ndarray or not in_place and type(sendbuf) is not np.ndarray:
        return
    if not ((algorithm is None or type(algorithm) is str)
            and (dims is None or type(dims) is str or type(dims) is tuple and all(type(d) is int for d in dims))):
        return  # a list of dims could change between calls
    _remember_shape(collective, comm, sendbuf, recvbuf, op, algorithm, dims, datatype,
                    _NATIVE_CALLS[collective].__get__(comm), in_place, False)


def _remember_shape(collective: str, comm: Any, sendbuf: Any, recvbuf: Any, op: MPI.Op | None, algorithm: Any,
                    dims: Any, datatype: MPI.Datatype, run: Any, in_place: bool, ours: bool) -> None:
    if type(dims) is tuple and not all(type(d) is int for d in dims):
        return  # (a key must hash, and a list inside could change between calls)
    if len(NATIVE_SHAPES) >= REPEATS_MAX:
        NATIVE_SHAPES.clear()
    key = (collective, id(comm), id(op), algorithm, dims, recvbuf.dtype, recvbuf.size,
           None if in_place else sendbuf.size)
    NATIVE_SHAPES[key] = ShapeRecord(comm, op, datatype, run, [_no_ref, _no_ref, 1], ours)


def native_again(collective: str, comm: Any, sendbuf: Any, recvbuf: Any, op: MPI.Op | None, algorithm: Any,
                 dims: Any) -> bool:
    """Run a blocking call on a numpy ``recvbuf`` on MPI if one of its shape went there; false if not (nothing done).

    The sizes of both arrays are in the key, so the counts stand as the recorded call's did. The
    caller has checked ``recvbuf`` is a numpy array and the mismatch check is off. Allreduce calls on
    the same arrays again and again get a record within about ten calls (see :data:`NATIVE_SHAPES`).
    """
    in_place = sendbuf is None or sendbuf is MPI.IN_PLACE
    if not in_place and type(sendbuf) is not np.ndarray:
        return False
    dtype = recvbuf.dtype
    try:
        v = NATIVE_SHAPES.get((collective, id(comm), id(op), algorithm, dims, dtype, recvbuf.size,
                               None if in_place else sendbuf.size))
    except TypeError:  # dims or algorithm of a type that cannot be a key: the full path says what is wrong
        return False
    if v is None or v.comm is not comm or v.op is not op:
        return False
    flags = recvbuf.flags
    if not (flags.c_contiguous and flags.writeable):
        return False
    if in_place:
        send: Any = MPI.IN_PLACE
    else:
        if sendbuf.dtype is not dtype or not sendbuf.flags.c_contiguous or sendbuf is recvbuf:
            return False
        if (sendbuf.base is not None or recvbuf.base is not None) and np.may_share_memory(sendbuf, recvbuf):
            return False  # (two arrays that own their memory cannot overlap)
        send = (sendbuf, v.datatype)
    run = v.native
    if op is None:
        run(send, (recvbuf, v.datatype))
        return True
    if v.ours:  # a schedule's record: the compiled core checks the rest (False: it did not run)
        if run(sendbuf if not in_place else MPI.IN_PLACE, recvbuf, op) is not None:
            return False
    else:
        run(send, (recvbuf, v.datatype), op)
    if collective == "allreduce":  # arrays that come back get a record, the cheaper repeat path (NATIVE_SHAPES)
        seen = v.seen  # [recv, send, countdown]
        if seen[0]() is recvbuf:
            if in_place or seen[1]() is sendbuf:
                if recvbuf.size:  # (as remember: a zero-size array gets no record)
                    _remember_call(id(recvbuf), comm, op, algorithm, dims, sendbuf, recvbuf, in_place, run)
            elif seen[1] is _no_ref:
                seen[1] = weakref.ref(sendbuf)  # the receive array came back: now the send array's reference
            else:
                seen[0], seen[1], seen[2] = _no_ref, _no_ref, WATCH_EVERY  # a new send array: look again later
        else:
            seen[2] -= 1
            if seen[2] <= 0:  # a weak reference costs a new array every call 0.3 us: take one every few calls
                seen[0], seen[1], seen[2] = weakref.ref(recvbuf), _no_ref, WATCH_EVERY
    return True
