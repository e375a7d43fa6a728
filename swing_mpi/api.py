"""The drop-in: ``allreduce(comm, sendbuf, recvbuf, op)`` and ``Intracomm``.

Semantics are those of ``comm.Allreduce(sendbuf, recvbuf, op)``. All our
traffic runs on a private duplicate of the user's communicator, created on
first use and cached on it as an attribute (freed with it), so user messages
and ours can never match each other.
"""

from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from functools import lru_cache
from typing import Any

import numpy as np
from mpi4py import MPI

from . import choose as chooser
from .buffers import BufferSpec, DeviceBuffer, is_in_place, numpy_dtype, parse_buffer
from .choose import algorithm_names, tuning_for_comm
from .executor import Plan
from .schedule import AUTO, NATIVE, build_schedule
from .topology import Torus, parse_dims

__all__ = ["allreduce", "iallreduce", "allreduce_init", "Request", "Intracomm", "resolve", "is_exact",
           "NATIVE", "AUTO", "algorithm_names"]

_PLAN_CACHE_SIZE = 64

_ENV_ALGORITHM = os.environ.get("SWING_MPI_ALGORITHM") or None
_ENV_DIMS = os.environ.get("SWING_MPI_DIMS") or None
"""``$SWING_MPI_ALGORITHM`` and ``$SWING_MPI_DIMS``, read once, when this module is
imported (as MPI libraries read their variables at ``MPI_Init``): reading the
environment costs about 0.7 µs, a fifth of MPICH's whole 8-byte allreduce."""


class _State:
    def __init__(self, comm: MPI.Comm) -> None:
        self.comm: MPI.Intracomm = comm.Dup()
        self.tuning = tuning_for_comm(self.comm)
        """``auto``'s cost-model constants: read on rank 0 and broadcast, equal on all ranks."""
        self.plans: OrderedDict[tuple, Plan] = OrderedDict()
        self.seq = 0
        """Operations started on this communicator (the same count on every rank)."""
        self.alive = True

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def free(self) -> None:
        self.alive = False
        self.plans.clear()
        if self.comm != MPI.COMM_NULL and not MPI.Is_finalized():
            self.comm.Free()


def _delete_state(comm: MPI.Comm, keyval: int, state: _State) -> None:
    try:
        state.free()
    except Exception:  # never raise out of an MPI callback
        pass


_KEYVAL: int | None = None


def _state(comm: MPI.Comm) -> _State:
    global _KEYVAL
    if _KEYVAL is None:
        _KEYVAL = MPI.Comm.Create_keyval(delete_fn=_delete_state)
    st = comm.Get_attr(_KEYVAL)
    if st is None:
        st = _State(comm)
        comm.Set_attr(_KEYVAL, st)
    return st


# -- choices ---------------------------------------------------------------------

_EXACT_OPS = ("BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP")
_exact_cache: dict[tuple[int, int], bool] = {}


def is_exact(op: MPI.Op, datatype: MPI.Datatype) -> bool:
    """Whether ``op`` on ``datatype`` gives the same bits in any grouping (cached for predefined ones)."""
    if op.is_predefined and datatype.is_predefined:
        key = (op.py2f(), datatype.py2f())
        got = _exact_cache.get(key)
        if got is None:
            got = _exact_cache[key] = _is_exact(op, datatype)
        return got
    return _is_exact(op, datatype)


def _is_exact(op: MPI.Op, datatype: MPI.Datatype) -> bool:
    """Whether ``op`` on ``datatype`` gives the same bits in any grouping.

    True for integer (and bool) SUM/PROD/MAX/MIN, bitwise and logical ops and
    MAXLOC/MINLOC; false for floating-point SUM/PROD/MAX/MIN (rounding, signed
    zeros, NaNs) and for user-defined ops.
    """
    if any(op == getattr(MPI, n) for n in _EXACT_OPS if hasattr(MPI, n)):
        return True
    if any(op == o for o in (MPI.SUM, MPI.PROD, MPI.MAX, MPI.MIN)):
        dt = numpy_dtype(datatype)
        return dt is not None and dt.kind in "iub"
    return False


@lru_cache(maxsize=64)
def _parse_dims_cached(spec: Any, p: int) -> tuple[int, ...]:
    return parse_dims(spec, p)


def _dims_for(comm: MPI.Comm, dims: Any) -> tuple[int, ...]:
    p = comm.Get_size()
    if dims is None:
        if _ENV_DIMS:
            return _parse_dims_cached(_ENV_DIMS, p)
        if comm.Get_topology() == MPI.CART:
            return Torus.from_cartcomm(MPI.Cartcomm(comm)).dims
        return (p,)
    if isinstance(dims, (str, tuple)):
        return _parse_dims_cached(dims, p)
    return parse_dims(dims, p)


def resolve(algorithm: str | None, p: int, nbytes: int, op: MPI.Op, datatype: MPI.Datatype, *,
            dims: tuple[int, ...] | None = None, count: int | None = None, tuning: Any = None) -> str:
    """Name the algorithm that really runs for a call (:func:`swing_mpi.choose.resolve` on MPI's op facts).

    ``algorithm`` defaults to ``$SWING_MPI_ALGORITHM``, else ``auto``; ``dims``
    to a ring of ``p``; ``tuning`` to the built-in constants (:func:`allreduce`
    passes its communicator's, equal on all ranks).
    """
    name = algorithm if algorithm is not None else (_ENV_ALGORITHM or AUTO)
    if name not in algorithm_names():
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(algorithm_names())}")
    itemsize = nbytes // count if count else max(1, datatype.extent)
    n = nbytes // itemsize if count is None else count
    exact = is_exact(op, datatype)
    return chooser.resolve(name, p, dims if dims is not None else (p,), n, itemsize, exact=exact,
                           commutative=op.Is_commutative(), native_ok=_native_bit_identical(op, datatype, exact),
                           tuning=tuning)


def _native_bit_identical(op: MPI.Op, datatype: MPI.Datatype, exact: bool) -> bool:
    """Tell whether any MPI gives the same bits on every rank for ``op`` on ``datatype``.

    True for exact ops and for floating-point SUM/PROD: IEEE addition and
    multiplication are commutative, so a pairwise combine gives the same bits on
    both partners. Not for float MIN/MAX (MPICH's result with +0.0 and -0.0 mixed
    differs between ranks).
    """
    return exact or (op == MPI.SUM or op == MPI.PROD) and numpy_dtype(datatype) is not None


def _resolve_call(comm: MPI.Comm, algorithm: str | None, dims: Any, recv: BufferSpec,
                  op: MPI.Op) -> tuple[str, tuple[int, ...]]:
    """(algorithm, dims) of one call; dims ``()`` for native.

    ``auto`` reads the communicator's tuning, which creates its state (private
    duplicate + tuning broadcast) on first use: collective, like the call itself.
    """
    requested = algorithm if algorithm is not None else (_ENV_ALGORITHM or AUTO)
    if requested == NATIVE:
        return NATIVE, ()
    dims_t = _dims_for(comm, dims)  # validated even for count 0: a bad dims is a bad call
    tuning = _state(comm).tuning if requested == AUTO else None
    name = resolve(requested, comm.Get_size(), recv.nbytes, op, recv.datatype,
                   dims=dims_t, count=recv.count, tuning=tuning)
    return name, dims_t


# -- the call ----------------------------------------------------------------------

def _check_args(comm: Any, sendbuf: Any, recvbuf: Any, op: Any
                ) -> tuple[BufferSpec | None, BufferSpec]:
    if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
        raise TypeError(f"comm must be an mpi4py intracommunicator, got {comm!r}")
    if comm.Is_inter():
        raise TypeError("comm is an intercommunicator; only intracommunicators are supported")
    if not isinstance(op, MPI.Op) or op == MPI.OP_NULL:
        raise TypeError(f"op must be an MPI.Op, got {op!r}")
    recv = parse_buffer(recvbuf, writable=True, where="recvbuf")
    if is_in_place(sendbuf):
        return None, recv
    send = parse_buffer(sendbuf, writable=False, where="sendbuf")
    if send.count != recv.count:
        raise ValueError(f"sendbuf has {send.count} elements, recvbuf {recv.count}")
    if send.datatype != recv.datatype and (
            send.datatype.size != recv.datatype.size or send.extent != recv.extent
            or _code(send.datatype) != _code(recv.datatype)):
        raise ValueError(f"sendbuf datatype {send.datatype.Get_name()} does not match "
                         f"recvbuf datatype {recv.datatype.Get_name()}")
    if send.count and np.shares_memory(send.data, recv.data):
        raise ValueError("sendbuf and recvbuf overlap; use MPI.IN_PLACE for an in-place allreduce")
    return send, recv


def _code(dt: MPI.Datatype) -> str | None:
    try:
        return dt.tocode()
    except (KeyError, ValueError):
        return None


class _Repeat:
    """What a call on plain numpy arrays resolved to, for the next call on the same arrays.

    Applications reduce the same arrays again and again (a training loop, a
    solver's dot products). Everything :func:`allreduce` checks and decides
    depends only on the communicator, the op, the options and the arrays
    themselves: their identity (contiguity, overlap) and the dtype and size that
    numpy lets a program change in place. A call repeating all of these skips
    straight to the data movement. Arrays are held by weak reference (a dead
    one never matches), plans too (the communicator's plan cache owns them).

    The ``native`` path checks the least: the MPI call itself (mpi4py) checks
    the send buffer's count against the receive buffer's, and sizes cannot
    change in place (numpy refuses ``ndarray.resize`` on an array with weak
    references). Changed dtypes are checked: the call passes the datatype
    (saving mpi4py's inference from the buffer format). A communicator freed
    since fails in that MPI call, as ``comm.Allreduce`` would.
    """

    __slots__ = ("recv", "send", "in_place", "comm", "op", "algorithm", "dims", "rdtype", "rsize",
                 "sdtype", "ssize", "datatype", "st", "plan", "native")


_repeats: dict[int, _Repeat] = {}
"""Keyed by ``id(recvbuf)``. A record leaves as soon as its receive or send array
is garbage (weak reference callbacks run before the memory can be reused), so a
record found under ``id(recvbuf)`` is this very array's, without calling its weak
reference."""
_REPEATS_MAX = 256


def _forget_recv(ref: weakref.ref, key: int) -> None:
    r = _repeats.get(key)
    if r is not None and r.recv is ref:
        del _repeats[key]


def _forget_send(ref: weakref.ref, key: int) -> None:
    r = _repeats.get(key)
    if r is not None and r.send is ref:
        del _repeats[key]


def _remember(comm: Any, sendbuf: Any, recvbuf: Any, op: MPI.Op, algorithm: Any, dims: Any,
              datatype: MPI.Datatype, st: _State | None, plan: Plan | None) -> None:
    """Record a finished call for :func:`allreduce`'s repeat path, if it is one that can repeat."""
    if type(recvbuf) is not np.ndarray or not recvbuf.size:
        return
    in_place = sendbuf is None or sendbuf is MPI.IN_PLACE
    if not in_place and type(sendbuf) is not np.ndarray:
        return
    if not (algorithm is None or type(algorithm) is str) or not (dims is None or type(dims) in (str, tuple)):
        return  # a list of dims could change between calls
    key = id(recvbuf)
    r = _Repeat()
    r.recv = weakref.ref(recvbuf, lambda ref: _forget_recv(ref, key))
    r.in_place = sendbuf if in_place else None
    r.send = None if in_place else weakref.ref(sendbuf, lambda ref: _forget_send(ref, key))
    r.sdtype = None if in_place else sendbuf.dtype
    r.ssize = None if in_place else sendbuf.size
    r.comm, r.op, r.algorithm, r.dims = comm, op, algorithm, dims
    r.rdtype, r.rsize = recvbuf.dtype, recvbuf.size
    r.datatype = datatype
    r.st = st
    r.plan = None if plan is None else weakref.ref(plan)
    r.native = MPI.Intracomm.Allreduce.__get__(comm)  # not comm.Allreduce: Intracomm overrides it
    if len(_repeats) >= _REPEATS_MAX:
        _repeats.clear()
    _repeats[key] = r


def allreduce(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
              algorithm: str | None = None, dims: Any = None) -> None:
    """``comm.Allreduce(sendbuf, recvbuf, op)`` with a Swing (or baseline) schedule.

    Args:
        comm: any intracommunicator (a ``Cartcomm`` gives its torus dims).
        sendbuf: a buffer spec, or ``MPI.IN_PLACE``/``None`` for in place.
        recvbuf: a writable buffer spec with the same count and datatype.
        op: any predefined or user-defined ``MPI.Op``. Non-commutative ops
            always run ``recdoub`` (operands in rank order).
        algorithm: ``"auto"`` (default, or ``$SWING_MPI_ALGORITHM``), a name
            from :data:`swing_mpi.ALGORITHMS`, or ``"native"``.
        dims: torus dims (``(4, 4)``, ``"4x4"``); default ``$SWING_MPI_DIMS``,
            the communicator's Cartesian topology, or a ring of all ranks.

    Raises:
        TypeError, ValueError: bad arguments, raised locally before any
            communication and before anything is written to ``recvbuf``.

    A call on the same numpy arrays (same communicator, op and options) as an
    earlier one reuses that call's checks and choice: it costs about 0.3 µs more
    than ``comm.Allreduce`` when ``native`` runs (see :class:`_Repeat`).
    """
    r = _repeats.get(id(recvbuf))
    if (r is not None and r.comm is comm and r.op is op and r.algorithm is algorithm and r.dims is dims
            and recvbuf.dtype is r.rdtype
            and (sendbuf is r.in_place if r.send is None else r.send() is sendbuf)):
        if r.plan is None:
            if r.send is None:
                r.native(MPI.IN_PLACE, (recvbuf, r.datatype), op)
                return
            if sendbuf.dtype is r.sdtype:
                r.native((sendbuf, r.datatype), (recvbuf, r.datatype), op)
                return
        plan = None if r.plan is None else r.plan()
        if (plan is not None and r.st.alive and recvbuf.size == r.rsize and recvbuf.flags.writeable
                and (r.send is None or sendbuf.dtype is r.sdtype and sendbuf.size == r.ssize)):
            plan.run(np.frombuffer(recvbuf, np.uint8),
                     None if r.send is None else np.frombuffer(sendbuf, np.uint8), seq=r.st.next_seq())
            return
    try:
        send, recv = _check_args(comm, sendbuf, recvbuf, op)
    except DeviceBuffer:  # device memory: only the MPI library can reduce it
        MPI.Intracomm.Allreduce(comm, MPI.IN_PLACE if sendbuf is None else sendbuf, recvbuf, op)
        return
    name, dims_t = _resolve_call(comm, algorithm, dims, recv, op)
    if name == NATIVE:
        MPI.Intracomm.Allreduce(comm, MPI.IN_PLACE if send is None else sendbuf, recvbuf, op)
        _remember(comm, sendbuf, recvbuf, op, algorithm, dims, recv.datatype, None, None)
        return
    st = _state(comm)
    seq = st.next_seq()
    if recv.count == 0:
        return
    plan = _plan(st, comm, name, dims_t, recv, op, cached=True)
    plan.run(recv.data, None if send is None else send.data, seq=seq)
    if recv.datatype.is_predefined and op.is_predefined:  # the plan is cached (see _plan)
        _remember(comm, sendbuf, recvbuf, op, algorithm, dims, recv.datatype, st, plan)


def _plan(st: _State, comm: MPI.Comm, name: str, dims_t: tuple[int, ...], recv: BufferSpec,
          op: MPI.Op, *, cached: bool) -> Plan:
    """A plan for this call; blocking calls share cached plans (their scratch too)."""
    exact = is_exact(op, recv.datatype)
    cacheable = cached and recv.datatype.is_predefined and op.is_predefined
    key = (name, dims_t, recv.count, recv.datatype.py2f(), op.py2f(), exact)
    plan = st.plans.get(key) if cacheable else None
    if plan is None:
        sched = build_schedule(name, dims_t, comm.Get_rank(), recv.count, exact=exact)
        plan = Plan(st.comm, sched, recv.datatype, op)
        if cacheable:
            st.plans[key] = plan
            if len(st.plans) > _PLAN_CACHE_SIZE:
                st.plans.popitem(last=False)
    else:
        st.plans.move_to_end(key)
    return plan


class Request:
    """A nonblocking (``Iallreduce``) or persistent (``Allreduce_init``) allreduce.

    The method names follow ``MPI.Request``/``MPI.Prequest``: ``Start`` (persistent
    only), ``Test``, ``Wait``, ``Free``; :meth:`Waitall` and :meth:`Testall` take a
    list mixing these and ``MPI.Request`` objects.

    Progress: the schedule advances inside ``Test``/``Wait`` (and ``Start``, which
    posts the first step of every lane); there is no progress thread. A request
    that nobody tests makes no progress beyond its first step, as with most MPI
    libraries' nonblocking collectives without asynchronous progress.
    """

    def __init__(self, st: _State, plan: Plan | None, recv: BufferSpec, send: BufferSpec | None,
                 *, persistent: bool) -> None:
        self._st = st
        self._plan = plan
        self._recv = recv
        self._send = send
        self._persistent = persistent
        self._freed = False

    def Start(self) -> None:  # noqa: N802
        if not self._persistent:
            raise RuntimeError("Start() is for persistent requests from Allreduce_init")
        if self._freed:
            raise RuntimeError("this request has been freed")
        seq = self._st.next_seq()
        if self._plan is not None:
            self._plan.start(self._recv.data, None if self._send is None else self._send.data, seq=seq)

    def Test(self) -> bool:  # noqa: N802
        return self._plan is None or self._plan.test()

    def Wait(self) -> None:  # noqa: N802
        if self._plan is not None:
            self._plan.wait()

    def Free(self) -> None:  # noqa: N802
        if self._plan is not None and self._plan.active:
            raise RuntimeError("cannot free an allreduce in progress; Wait() for it first")
        self._plan = None
        self._freed = True

    @property
    def active(self) -> bool:
        return self._plan is not None and self._plan.active

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
        done = [r.Test() for r in requests]
        return all(done)


def _nonblocking(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op, algorithm: str | None,
                 dims: Any, *, persistent: bool) -> Any:
    try:
        send, recv = _check_args(comm, sendbuf, recvbuf, op)
    except DeviceBuffer:  # device memory: only the MPI library can reduce it
        send, name, dims_t = (None if sendbuf is None or sendbuf is MPI.IN_PLACE else sendbuf), NATIVE, ()
    else:
        name, dims_t = _resolve_call(comm, algorithm, dims, recv, op)
    if name == NATIVE:
        sb = MPI.IN_PLACE if send is None else sendbuf
        if persistent:
            return MPI.Intracomm.Allreduce_init(comm, sb, recvbuf, op)
        return MPI.Intracomm.Iallreduce(comm, sb, recvbuf, op)
    st = _state(comm)
    plan = _plan(st, comm, name, dims_t, recv, op, cached=False) if recv.count else None
    req = Request(st, plan, recv, send, persistent=persistent)
    if not persistent:
        seq = st.next_seq()
        if plan is not None:
            plan.start(recv.data, None if send is None else send.data, seq=seq)
    return req


def iallreduce(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
               algorithm: str | None = None, dims: Any = None) -> Any:
    """Nonblocking :func:`allreduce`: returns a :class:`Request` (``MPI.Request`` for native)."""
    return _nonblocking(comm, sendbuf, recvbuf, op, algorithm, dims, persistent=False)


def allreduce_init(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
                   algorithm: str | None = None, dims: Any = None) -> Any:
    """Persistent :func:`allreduce` (like MPI-4's ``MPI_Allreduce_init``).

    Everything is set up once: the schedule, the plan with its scratch buffers
    and byte offsets, the private communicator. Each ``Start()`` then only
    moves data; ``Wait()`` completes it. The buffers are bound at init.
    """
    return _nonblocking(comm, sendbuf, recvbuf, op, algorithm, dims, persistent=True)


class Intracomm(MPI.Intracomm):
    """An ``MPI.Intracomm`` whose ``Allreduce`` is Swing's.

    ``comm = swing_mpi.Intracomm(MPI.COMM_WORLD)`` is the one-line drop-in.
    ``Dup()`` returns an ``Intracomm`` too. Options are keyword-only and kept
    by ``Dup()``.
    """

    _swing_algorithm: str | None = None
    _swing_dims: Any = None

    def __new__(cls, comm: MPI.Comm | None = None, *, algorithm: str | None = None,
                dims: Any = None) -> Intracomm:
        if comm is not None and (not isinstance(comm, MPI.Comm) or comm.Is_inter()):
            raise TypeError(f"expected an intracommunicator, got {comm!r}")
        self = super().__new__(cls, comm)
        if algorithm is not None:
            if algorithm not in algorithm_names():
                raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(algorithm_names())}")
            self._swing_algorithm = algorithm
        if dims is not None:
            self._swing_dims = dims
        elif comm is not None and comm != MPI.COMM_NULL and comm.Get_topology() == MPI.CART:
            self._swing_dims = Torus.from_cartcomm(MPI.Cartcomm(comm)).dims
        return self

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:  # noqa: N802
        allreduce(self, sendbuf, recvbuf, op, algorithm=self._swing_algorithm, dims=self._swing_dims)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> Any:  # noqa: N802
        return iallreduce(self, sendbuf, recvbuf, op, algorithm=self._swing_algorithm, dims=self._swing_dims)

    def Allreduce_init(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM,  # noqa: N802
                       info: Any = None) -> Any:
        return allreduce_init(self, sendbuf, recvbuf, op, algorithm=self._swing_algorithm,
                              dims=self._swing_dims)

    def Dup(self, info: Any = None) -> Intracomm:  # noqa: N802
        new = super().Dup() if info is None else super().Dup(info)
        if not isinstance(new, Intracomm):
            new = Intracomm(new)
        new._swing_algorithm = self._swing_algorithm
        new._swing_dims = self._swing_dims
        return new
