"""The drop-in: ``allreduce(comm, sendbuf, recvbuf, op)`` and ``Intracomm``.

Semantics are those of ``comm.Allreduce(sendbuf, recvbuf, op)``. A front-end: every call goes
through :func:`swing_mpi.pipeline.call` (checked arguments, decision, plan, run), except a call
that repeats an earlier one on the same arrays (:mod:`swing_mpi.repeat`). Reduce-scatter and
all-gather are in :mod:`swing_mpi.collectives`; :class:`Intracomm` offers all of them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from mpi4py import MPI

from . import collectives
from .buffers import Args, BufferSpec, call_args, op_facts
from .choose import algorithm_names, check_name, decide, node_form, supports
from .nodes import lanes_for, node_torus
from .online import Trial
from .pipeline import BLOCKING, NONBLOCKING, PERSISTENT, call, decision_for, node_form_trial
from .repeat import LAST_NATIVE, NATIVE_RECORDS, NATIVE_SHAPES, NO_RECORD, RECORDS, again, native_again
from .request import Request
from .schedule import AUTO, NATIVE
from .state import comm_state, dims_for, requested_algorithm
from .topology import Torus, parse_dims

__all__ = ["allreduce", "iallreduce", "allreduce_init", "Request", "Intracomm", "resolve", "is_exact",
           "check_args", "dims_for", "comm_tuning", "auto_trial", "NATIVE", "AUTO", "algorithm_names"]


def is_exact(op: MPI.Op, datatype: MPI.Datatype) -> bool:
    """Tell whether ``op`` on ``datatype`` gives the same bits in any grouping."""
    return op_facts(op, datatype)[0]


def comm_tuning(comm: MPI.Comm) -> Any:
    """Return the tuning ``auto`` uses on ``comm`` (equal on all ranks).

    Collective on the first call for a communicator: that call creates its
    private duplicate and broadcasts the tuning from rank 0.
    """
    return comm_state(comm).tuning


def resolve(algorithm: str | None, p: int, nbytes: int, op: MPI.Op, datatype: MPI.Datatype, *,
            dims: tuple[int, ...] | None = None, count: int | None = None, tuning: Any = None) -> str:
    """Name the algorithm that really runs for an allreduce (:func:`swing_mpi.choose.decide` on MPI's op facts).

    ``algorithm`` defaults to ``$SWING_MPI_ALGORITHM``, else ``auto``; ``dims``
    to a ring of ``p``; ``tuning`` to the built-in constants (:func:`allreduce`
    passes its communicator's, equal on all ranks).
    """
    exact, native_ok = op_facts(op, datatype)
    requested = requested_algorithm(algorithm)
    if dims is not None and len(dims) and p % math.prod(dims) == 0 and math.prod(dims) < p and nbytes:
        # dims of nodes (swing_mpi.nodes): auto's form (the model's, no trial), then over all ranks on
        # dims + (K,), or each lane's allreduce among the nodes on its chunk
        k = p // math.prod(dims)
        n = count if count is not None else nbytes
        lanes = lanes_for(nbytes, n, k)
        nodes_t = tuple(dims)
        if requested == AUTO and node_form(nodes_t, k, nbytes, max(1, nbytes // max(1, n)), lanes, exact=exact,
                                           commutative=op.Is_commutative(), native_ok=native_ok,
                                           tuning=tuning).algorithm == "flat":
            dims = (*nodes_t, k)
        else:
            p, nbytes = math.prod(dims), -(-nbytes // lanes)
    return decide(requested, p, dims if dims is not None else (p,), nbytes, exact=exact,
                  commutative=op.Is_commutative(), native_ok=native_ok, tuning=tuning).algorithm


def check_args(comm: Any, sendbuf: Any, recvbuf: Any, op: Any) -> tuple[BufferSpec | None, BufferSpec]:
    """Validate an allreduce's arguments locally; return the (send, recv) specs (send ``None``: in place).

    Raises :class:`~swing_mpi.buffers.DeviceBuffer` for buffers only the MPI library can reduce.
    """
    a = call_args("allreduce", comm, sendbuf, recvbuf, op)
    return a.send, a.recv


_recorded = RECORDS.get
_native_recorded = NATIVE_RECORDS.get


def allreduce(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
              algorithm: str | None = None, dims: Any = None, check: bool | None = None) -> None:
    """Do ``comm.Allreduce(sendbuf, recvbuf, op)`` with a Swing (or baseline) schedule.

    Args:
        comm: any intracommunicator (a ``Cartcomm`` gives its torus dims; a
            :class:`Intracomm` made with ``coords`` its rank placement).
        sendbuf: a buffer spec, or ``MPI.IN_PLACE``/``None`` for in place.
        recvbuf: a writable buffer spec with the same count and datatype.
        op: any predefined or user-defined ``MPI.Op``. A non-commutative op
            runs only what keeps rank order (:func:`swing_mpi.choose.keeps_order`).
        algorithm: ``"auto"`` (default, or ``$SWING_MPI_ALGORITHM``), a name
            from :data:`swing_mpi.ALGORITHMS`, or ``"native"``.
        dims: torus dims (``(4, 4)``, ``"4x4"``); default ``$SWING_MPI_DIMS``,
            the communicator's Cartesian topology, or a ring of all ranks.
        check: compare the arguments across ranks first (:mod:`swing_mpi.guard`);
            default ``$SWING_MPI_CHECK``.

    Raises:
        TypeError, ValueError: bad arguments, raised locally before any
            communication and before anything is written to ``recvbuf``.
        CollectiveMismatchError: with ``check``, on every rank, when the
            ranks' arguments differ (a ``ValueError``; nothing was sent).

    A call on the same numpy arrays (same communicator, op and options) as an
    earlier one reuses that call's checks and choice (:mod:`swing_mpi.repeat`);
    one on new arrays of a dtype and size that went to ``native`` before goes to
    MPI after checking only the arrays.
    """
    t = LAST_NATIVE[0]  # the repeat path (swing_mpi.repeat), inline: a call here costs 0.1 us
    if t[7]() is not recvbuf:  # the record's recv (swing_mpi.repeat.NativeRecord)
        t = _native_recorded(id(recvbuf), NO_RECORD)
        if t is not NO_RECORD:
            LAST_NATIVE[0] = t
    if not check:
        c, o, a, d, w, in_place, native, _ = t  # a NativeRecord: unpacked at once, the cheapest read
        if c is comm and o is op and a is algorithm and d is dims:
            if w is None:
                if sendbuf is in_place and native(MPI.IN_PLACE, recvbuf, op) is None:
                    return
            elif w() is sendbuf and native(sendbuf, recvbuf, op) is None:
                return  # MPI's call returns None; the compiled core's record False where it could not run
    r = _recorded(id(recvbuf))
    if (r is not None and not check and r.comm is comm and r.op is op and r.algorithm is algorithm and r.dims is dims
            and recvbuf.dtype is r.rdtype and (sendbuf is r.in_place if r.send is None else r.send() is sendbuf)
            and again(r, sendbuf, recvbuf)):
        return
    if (NATIVE_SHAPES and not check and type(recvbuf) is np.ndarray
            and native_again("allreduce", comm, sendbuf, recvbuf, op, algorithm, dims)):
        return  # new arrays of a shape that went to MPI before (swing_mpi.repeat)
    call("allreduce", BLOCKING, comm, sendbuf, recvbuf, op, algorithm, dims, check)


def iallreduce(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
               algorithm: str | None = None, dims: Any = None, check: bool | None = None) -> Any:
    """Start a nonblocking :func:`allreduce`; return an ``MPI.Request`` (a :class:`Request` unless native runs)."""
    return call("allreduce", NONBLOCKING, comm, sendbuf, recvbuf, op, algorithm, dims, check)


def allreduce_init(comm: MPI.Intracomm, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM, *,
                   algorithm: str | None = None, dims: Any = None, check: bool | None = None) -> Any:
    """Set up a persistent :func:`allreduce` (like MPI-4's ``MPI_Allreduce_init``).

    Everything is set up once: the schedule, the plan with its scratch buffers
    and byte offsets, the private communicator. Each ``Start()`` then only
    moves data; ``Wait()`` completes it. The buffers are bound at init.
    """
    return call("allreduce", PERSISTENT, comm, sendbuf, recvbuf, op, algorithm, dims, check)


def auto_trial(comm: MPI.Intracomm, recvbuf: Any, op: MPI.Op = MPI.SUM, *, dims: Any = None) -> Trial | None:
    """Return the trial ``auto`` runs for blocking allreduces like this one (:mod:`swing_mpi.online`).

    ``None`` where it tries nothing (no measured table with close contenders, a
    user-defined op or datatype, or ``SWING_MPI_TRIAL=off``). With ``dims`` of nodes: the trial of the
    two forms (node phases or the torus of ranks; its picks are ``nodes`` and ``flat``). Collective on a
    communicator's first use, like the call itself; a benchmark calls until ``trial.pick`` is set to time what
    ``auto`` settles on.
    """
    a: Args = call_args("allreduce", comm, None, recvbuf, op)
    if not a.count:
        return None
    nodes_t = node_torus(comm, dims)
    if nodes_t is not None:
        return node_form_trial(comm, nodes_t, a, op)
    return decision_for("allreduce", comm, a, op, AUTO, dims)[2]


def _check_dims(comm: MPI.Comm | None, dims: Any) -> None:
    """Refuse ``dims`` at construction, as a bad ``algorithm=`` is, not at the first call.

    Local: the sides must be integers and hold the communicator's ranks, or a divisor of them (a torus of
    nodes, :mod:`swing_mpi.nodes`, whose nodes are checked at the first call); for no communicator, only
    the form is checked.
    """
    if comm is not None and comm != MPI.COMM_NULL:
        if node_torus(comm, dims) is None:
            parse_dims(dims, comm.Get_size())
    elif not (isinstance(dims, str) and dims.strip().lower().endswith("d")):  # "2d" waits for the ranks
        parse_dims(dims)


def _placement_of(comm: MPI.Comm, coords: Any, dims: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Gather every rank's ``coords`` and return (torus dims, torus position of every rank).

    Collective. Every rank gets the same list, so a bad placement raises the
    same ``ValueError`` everywhere (no rank is left waiting).
    """
    try:
        mine: Any = tuple(int(c) for c in coords)
    except (TypeError, ValueError):
        mine = repr(coords)
    every = comm.allgather(mine)
    bad = [(r, c) for r, c in enumerate(every) if not isinstance(c, tuple)]
    if bad:
        raise ValueError(f"coords must be a sequence of integers; got {', '.join(f'{c} on rank {r}' for r, c in bad)}")
    ndims = {len(c) for c in every}
    if len(ndims) != 1:
        raise ValueError(f"ranks state coordinates of different lengths: {sorted(ndims)}")
    p = comm.Get_size()
    if dims is None:
        dims_t = tuple(max(c[k] for c in every) + 1 for k in range(ndims.pop()))
        if any(min(c[k] for c in every) < 0 for k in range(len(dims_t))):
            raise ValueError("coords must be >= 0")
    else:
        dims_t = parse_dims(dims, p)
    torus = Torus(dims_t)
    if torus.size != p:
        raise ValueError(f"coords span a {torus} torus of {torus.size} places, the communicator has {p} ranks")
    outside = [(r, c) for r, c in enumerate(every)
               if len(c) != torus.ndims or any(not 0 <= x < d for x, d in zip(c, dims_t))]
    if outside:
        raise ValueError(f"coords outside the {torus} torus: "
                         + ", ".join(f"rank {r} at {c}" for r, c in outside[:8]))
    where: dict[tuple[int, ...], list[int]] = {}
    for r, c in enumerate(every):
        where.setdefault(c, []).append(r)
    dups = {c: rs for c, rs in where.items() if len(rs) > 1}
    if dups:
        missing = [torus.coords(x) for x in range(p) if torus.coords(x) not in where]
        raise ValueError("coords are not a permutation of the torus: "
                         + "; ".join(f"{c} stated by ranks {rs}" for c, rs in list(dups.items())[:8])
                         + f"; missing {missing[:8]}")
    return dims_t, tuple(torus.rank(c) for c in every)


class Intracomm(MPI.Intracomm):
    """An ``MPI.Intracomm`` whose ``Allreduce``, ``Reduce_scatter(_block)`` and ``Allgather`` are ours.

    ``comm = swing_mpi.Intracomm(MPI.COMM_WORLD)`` is the one-line drop-in.
    Options are keyword-only and kept by ``Dup()``:

    - ``algorithm``: as for :func:`allreduce` (the same name for every collective).
    - ``dims``: torus dims.
    - ``check``: compare every collective's arguments across ranks first
      (:mod:`swing_mpi.guard`; default ``$SWING_MPI_CHECK``).
    - ``coords``: this rank's torus coordinates, when rank numbers do not
      follow the wiring (collective: gathered and checked to be a permutation
      of the torus; ``dims`` defaults to the coordinates' extent). Schedules
      then run with every rank at its stated place, and reduce-scatter still
      delivers block ``i`` to rank ``i`` of this communicator. A Cartesian
      communicator's own coordinates are used without asking.
    """

    _swing_algorithm: str | None = None
    _swing_dims: Any = None
    _swing_check: bool | None = None
    swing_placement: tuple[int, ...] | None = None
    """Torus position of every rank, or ``None`` (position = rank)."""

    def __new__(cls, comm: MPI.Comm | None = None, *, algorithm: str | None = None,
                dims: Any = None, coords: Any = None, check: bool | None = None) -> Intracomm:
        """Wrap ``comm`` (no copy: the same MPI communicator) with the options."""
        if comm is not None and (not isinstance(comm, MPI.Comm) or comm.Is_inter()):
            raise TypeError(f"expected an intracommunicator, got {comm!r}")
        self = super().__new__(cls, comm)
        if algorithm is not None:
            self._swing_algorithm = check_name(algorithm)
        if dims is None and comm is not None and comm != MPI.COMM_NULL and comm.Get_topology() == MPI.CART:
            # a Cartesian rank's coordinates are its row-major position: the placement is the identity
            dims = Torus.from_cartcomm(MPI.Cartcomm(comm)).dims
        if coords is not None:
            if comm is None or comm == MPI.COMM_NULL:
                raise ValueError("coords need a communicator")
            dims_t, placement = _placement_of(comm, coords, dims)
            dims = dims_t
            if placement != tuple(range(len(placement))):
                self.swing_placement = placement
        if dims is not None:
            _check_dims(comm, dims)
            self._swing_dims = dims
        if check is not None:
            self._swing_check = bool(check)
        return self

    def _opts(self, collective: str = "allreduce") -> dict[str, Any]:
        """Return the options for ``collective``: an algorithm that lacks it leaves the choice to ``auto``."""
        alg = self._swing_algorithm
        return {"algorithm": alg if supports(alg, collective) else None, "dims": self._swing_dims,
                "check": self._swing_check}

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:  # noqa: N802
        """Do :func:`swing_mpi.allreduce` with this communicator's options."""
        allreduce(self, sendbuf, recvbuf, op, algorithm=self._swing_algorithm, dims=self._swing_dims,
                  check=self._swing_check)

    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> Any:  # noqa: N802
        """Start :func:`swing_mpi.iallreduce` with this communicator's options."""
        return iallreduce(self, sendbuf, recvbuf, op, algorithm=self._swing_algorithm, dims=self._swing_dims,
                          check=self._swing_check)

    def Allreduce_init(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM,  # noqa: N802
                       info: Any = None) -> Any:
        """Set up :func:`swing_mpi.allreduce_init` with this communicator's options."""
        return allreduce_init(self, sendbuf, recvbuf, op, **self._opts())

    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> None:  # noqa: N802
        """Do :func:`swing_mpi.reduce_scatter_block` with this communicator's options."""
        collectives.reduce_scatter_block(self, sendbuf, recvbuf, op, **self._opts("reduce_scatter"))

    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM) -> Any:  # noqa: N802
        """Start :func:`swing_mpi.ireduce_scatter_block` with this communicator's options."""
        return collectives.ireduce_scatter_block(self, sendbuf, recvbuf, op, **self._opts("reduce_scatter"))

    def Reduce_scatter_block_init(self, sendbuf: Any, recvbuf: Any, op: MPI.Op = MPI.SUM,  # noqa: N802
                                  info: Any = None) -> Any:
        """Set up :func:`swing_mpi.reduce_scatter_block_init` with this communicator's options."""
        return collectives.reduce_scatter_block_init(self, sendbuf, recvbuf, op, **self._opts("reduce_scatter"))

    def Reduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,  # noqa: N802
                       op: MPI.Op = MPI.SUM) -> None:
        """Do :func:`swing_mpi.reduce_scatter` with this communicator's options."""
        collectives.reduce_scatter(self, sendbuf, recvbuf, recvcounts, op, **self._opts("reduce_scatter"))

    def Ireduce_scatter(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,  # noqa: N802
                        op: MPI.Op = MPI.SUM) -> Any:
        """Start :func:`swing_mpi.ireduce_scatter` with this communicator's options."""
        return collectives.ireduce_scatter(self, sendbuf, recvbuf, recvcounts, op, **self._opts("reduce_scatter"))

    def Reduce_scatter_init(self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None,  # noqa: N802
                            op: MPI.Op = MPI.SUM, info: Any = None) -> Any:
        """Set up :func:`swing_mpi.reduce_scatter_init` with this communicator's options."""
        return collectives.reduce_scatter_init(self, sendbuf, recvbuf, recvcounts, op, **self._opts("reduce_scatter"))

    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:  # noqa: N802
        """Do :func:`swing_mpi.allgather` with this communicator's options."""
        collectives.allgather(self, sendbuf, recvbuf, **self._opts("allgather"))

    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> Any:  # noqa: N802
        """Start :func:`swing_mpi.iallgather` with this communicator's options."""
        return collectives.iallgather(self, sendbuf, recvbuf, **self._opts("allgather"))

    def Allgather_init(self, sendbuf: Any, recvbuf: Any, info: Any = None) -> Any:  # noqa: N802
        """Set up :func:`swing_mpi.allgather_init` with this communicator's options."""
        return collectives.allgather_init(self, sendbuf, recvbuf, **self._opts("allgather"))

    def Dup(self, info: Any = None) -> Intracomm:  # noqa: N802
        """Duplicate the communicator, keeping the options (and the rank placement)."""
        new = super().Dup() if info is None else super().Dup(info)
        if not isinstance(new, Intracomm):
            new = Intracomm(new)
        new._swing_algorithm = self._swing_algorithm
        new._swing_dims = self._swing_dims
        new._swing_check = self._swing_check
        new.swing_placement = self.swing_placement
        return new
