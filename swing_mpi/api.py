"""The drop-in: ``allreduce(comm, sendbuf, recvbuf, op)`` and ``Intracomm``.

Semantics are those of ``comm.Allreduce(sendbuf, recvbuf, op)``. All our
traffic runs on a private duplicate of the user's communicator, created on
first use and cached on it as an attribute (freed with it), so user messages
and ours can never match each other.
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from typing import Any, Tuple

import numpy as np
from mpi4py import MPI

from .buffers import BufferSpec, is_in_place, numpy_dtype, parse_buffer
from .executor import Plan
from .schedule import ALGORITHMS, build_schedule
from .topology import Torus, parse_dims

__all__ = ["allreduce", "Intracomm", "resolve", "is_exact", "NATIVE", "AUTO", "algorithm_names"]

NATIVE = "native"
"""The MPI library's own ``MPI_Allreduce``."""
AUTO = "auto"

_PLAN_CACHE_SIZE = 64


def algorithm_names() -> Tuple[str, ...]:
    return (AUTO, NATIVE) + tuple(ALGORITHMS)


# -- per-communicator state (private duplicate + plan cache) ------------------

class _State:
    def __init__(self, comm: MPI.Comm) -> None:
        self.comm: MPI.Intracomm = comm.Dup()
        self.plans: "OrderedDict[tuple, Plan]" = OrderedDict()

    def free(self) -> None:
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


def is_exact(op: MPI.Op, datatype: MPI.Datatype) -> bool:
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


def _dims_for(comm: MPI.Comm, dims: Any) -> Tuple[int, ...]:
    p = comm.Get_size()
    if dims is None:
        env = os.environ.get("SWING_MPI_DIMS")
        if env:
            return parse_dims(env, p)
        if comm.Get_topology() == MPI.CART:
            return Torus.from_cartcomm(MPI.Cartcomm(comm)).dims
        return (p,)
    return parse_dims(dims, p)


def _auto(p: int, nbytes: int, exact: bool, commutative: bool) -> str:
    """Default choice (equal on all ranks: depends on p, count, datatype, op only)."""
    if not commutative:
        return "recdoub"
    steps = max(1, math.ceil(math.log2(p))) if p > 1 else 1
    lat_bytes = nbytes * (steps if exact else p - 1)
    return "swing-lat" if lat_bytes <= 32768 else "swing-bw"


def resolve(algorithm: str | None, p: int, nbytes: int, op: MPI.Op,
            datatype: MPI.Datatype) -> str:
    """The algorithm that really runs: env/default, ``auto``, fallbacks."""
    name = algorithm if algorithm is not None else os.environ.get("SWING_MPI_ALGORITHM", AUTO)
    if name not in algorithm_names():
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(algorithm_names())}")
    commutative = op.Is_commutative()
    if name == AUTO:
        return _auto(p, nbytes, is_exact(op, datatype), commutative)
    if name != NATIVE and ALGORITHMS[name].commutative_only and not commutative:
        return "recdoub"  # documented fallback: order-preserving
    return name


# -- the call ----------------------------------------------------------------------

def _check_args(comm: Any, sendbuf: Any, recvbuf: Any, op: Any
                ) -> Tuple[BufferSpec | None, BufferSpec]:
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
    """
    send, recv = _check_args(comm, sendbuf, recvbuf, op)
    p = comm.Get_size()
    name = resolve(algorithm, p, recv.nbytes, op, recv.datatype)
    dims_t = _dims_for(comm, dims)
    if name == NATIVE:
        MPI.Intracomm.Allreduce(comm, MPI.IN_PLACE if send is None else sendbuf, recvbuf, op)
        return
    if recv.count == 0:
        return
    exact = is_exact(op, recv.datatype)
    st = _state(comm)
    cacheable = recv.datatype.is_predefined and op.is_predefined
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
    plan.run(recv.data, None if send is None else send.data)


class Intracomm(MPI.Intracomm):
    """An ``MPI.Intracomm`` whose ``Allreduce`` is Swing's.

    ``comm = swing_mpi.Intracomm(MPI.COMM_WORLD)`` is the one-line drop-in.
    ``Dup()`` returns an ``Intracomm`` too. Options are keyword-only and kept
    by ``Dup()``.
    """

    _swing_algorithm: str | None = None
    _swing_dims: Any = None

    def __new__(cls, comm: MPI.Comm | None = None, *, algorithm: str | None = None,
                dims: Any = None) -> "Intracomm":
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

    def Dup(self, info: Any = None) -> "Intracomm":  # noqa: N802
        new = super().Dup() if info is None else super().Dup(info)
        if not isinstance(new, Intracomm):
            new = Intracomm(new)
        new._swing_algorithm = self._swing_algorithm
        new._swing_dims = self._swing_dims
        return new
