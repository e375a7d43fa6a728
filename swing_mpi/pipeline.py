"""The one path of every collective call: checked arguments -> decision -> plan (cached) -> run.

Allreduce, reduce-scatter and all-gather, blocking, nonblocking and persistent, all go through
:func:`call`; the mode only says how the run is driven (now, or by the :class:`~swing_mpi.request.Request`
it returns). :mod:`swing_mpi.api` and :mod:`swing_mpi.collectives` are front-ends that name the
collective and pass the user's arguments on. With the mismatch check on, the call compares its
arguments and decision across ranks (:func:`swing_mpi.guard.verify`) before any data moves.
"""

from __future__ import annotations

import math
from time import perf_counter
from typing import Any

import numpy as np
from mpi4py import MPI

from . import guard, nodes, online
from .buffers import Args, DeviceBuffer, call_args, is_in_place, native_bit_identical
from .choose import Decision, decide, node_form, supports
from .config import rc
from .executor import Plan
from .repeat import RECORDS, again, remember, remember_native
from .request import persistent_comm, persistent_request, start_request
from .schedule import AUTO, NATIVE, build_schedule
from .schedule.halves import ALL_GATHER, REDUCE_SCATTER, build_half
from .state import CommState, comm_state, dims_for

__all__ = ["call", "decision_for", "trial_of", "node_form_trial", "BLOCKING", "NONBLOCKING", "PERSISTENT",
           "NATIVE_CALLS"]

BLOCKING, NONBLOCKING, PERSISTENT = 0, 1, 2

NATIVE_CALLS: dict[str, tuple[Any, Any, Any]] = {
    "allreduce": (MPI.Intracomm.Allreduce, MPI.Intracomm.Iallreduce, MPI.Intracomm.Allreduce_init),
    "reduce_scatter_block": (MPI.Intracomm.Reduce_scatter_block, MPI.Intracomm.Ireduce_scatter_block,
                             MPI.Intracomm.Reduce_scatter_block_init),
    "reduce_scatter": (MPI.Intracomm.Reduce_scatter, MPI.Intracomm.Ireduce_scatter,
                       MPI.Intracomm.Reduce_scatter_init),
    "allgather": (MPI.Intracomm.Allgather, MPI.Intracomm.Iallgather, MPI.Intracomm.Allgather_init),
}
"""The MPI library's own collective for each operation, by mode (what ``native`` runs)."""
_COLLECTIVE = {"allreduce": "allreduce", "reduce_scatter_block": "reduce_scatter", "reduce_scatter": "reduce_scatter",
               "allgather": "allgather"}


def _native(operation: str, mode: int, comm: Any, sendbuf: Any, recvbuf: Any, op: Any, counts: Any) -> Any:
    fn = NATIVE_CALLS[operation][mode]
    sb = MPI.IN_PLACE if is_in_place(sendbuf) else sendbuf
    if operation == "allgather":
        return fn(comm, sb, recvbuf)
    if operation == "reduce_scatter":
        return fn(comm, sb, recvbuf, counts, op)
    return fn(comm, sb, recvbuf, op)


_UNRECORDED: Any = object()
"""``recorded_as`` of a call the repeat path must not remember (a trial's call of a form)."""
_AS_CALLED: Any = object()
"""``recorded_as`` of a call remembered under its own ``dims`` (the default)."""


def call(operation: str, mode: int, comm: Any, sendbuf: Any, recvbuf: Any, op: Any, algorithm: str | None,
         dims: Any, check: bool | None, recvcounts: Any = None, *, recorded_as: Any = _AS_CALLED) -> Any:
    """Run (blocking) or start (nonblocking, persistent: return the request) one collective call.

    ``operation``: ``allreduce``, ``reduce_scatter_block``, ``reduce_scatter`` or ``allgather`` (``op``
    ``None``). Bad arguments raise on the calling rank before any data moves (with the check on, on every
    rank). A blocking call on plain numpy arrays without the check is remembered for the repeat path,
    under ``dims`` (``recorded_as``: under those dims instead, the ones the user gave, ``None`` included;
    :data:`_UNRECORDED`: not).
    """
    if (dims is not None or rc.dims) and isinstance(comm, MPI.Comm):
        nodes_t = nodes.node_torus(comm, dims)
        if nodes_t is not None:  # a torus of nodes, several ranks on each
            return _on_nodes(operation, mode, comm, sendbuf, recvbuf, op, algorithm, dims, nodes_t, check,
                             recvcounts)
    if recorded_as is _AS_CALLED:
        recorded_as = dims
    checking = rc.check if check is None else bool(check)
    private = guard.private(comm) if checking else None
    try:
        a = call_args(operation, comm, sendbuf, recvbuf, op, recvcounts)
        d, dims_t, trial, st0 = _decision(operation, comm, a, op, algorithm, dims, mode == BLOCKING)
    except (DeviceBuffer, TypeError, ValueError) as e:
        return _refused(e, private, operation, mode, comm, sendbuf, recvbuf, op, recvcounts)
    if private is not None:
        guard.verify(private, count=a.count, datatype=a.datatype, op=op or MPI.REPLACE, algorithm=d.algorithm,
                     dims=dims_t, operation=operation, counts=None if operation == "allreduce" else a.counts)
    name = d.algorithm
    placement = getattr(comm, "swing_placement", None)
    if trial is not None and d.why == "trial":  # a trial call (blocking allreduce): timed, not remembered
        _tried(trial, comm_state(comm, placement), name, dims_t, a, op, comm, sendbuf, recvbuf)
        return None
    if name == NATIVE:
        out = _native(operation, mode, comm, sendbuf, recvbuf, op, a.counts)
        if (mode == BLOCKING and not (checking or rc.check) and operation != "reduce_scatter"
                and recorded_as is not _UNRECORDED):
            # remembered only where no call checks by default: a later call with check=None must check
            if operation == "allreduce":
                remember(comm, sendbuf, recvbuf, op, algorithm, recorded_as, a.datatype, None, None)
            remember_native(operation, comm, sendbuf, recvbuf, op, algorithm, recorded_as, a.datatype)
        return out
    st = st0 if st0 is not None and placement is None else comm_state(comm, placement)
    if operation != "allreduce":
        return _halves(operation, mode, st, comm.Get_rank(), name, dims_t, a, op or MPI.REPLACE)
    if mode != BLOCKING:
        return _request(mode, st, lambda: build_schedule(name, dims_t, st.rank, a.count, exact=a.exact),
                        bool(a.count), a.datatype, op, a.recv.data, None if a.send is None else a.send.data,
                        key=_key("allreduce", name, dims_t, a.count, a, op))
    plan = _run(st, name, dims_t, a, op, comm, sendbuf, recvbuf)
    if plan is not None and not (checking or rc.check) and recorded_as is not _UNRECORDED:
        remember(comm, sendbuf, recvbuf, op, algorithm, recorded_as, a.datatype, st, plan)  # the next call may reuse it
    return None


def _refused(e: Exception, private: Any, operation: str, mode: int, comm: Any, sendbuf: Any, recvbuf: Any, op: Any,
             recvcounts: Any) -> Any:
    """Hand a call whose buffers only MPI can reduce (device memory) to MPI; raise any other argument error.

    With the mismatch check on (``private``), every rank hears of it first, so all take the same way.
    """
    if isinstance(e, DeviceBuffer):
        if private is not None:
            guard.verify(private, count=-1, op=op or MPI.REPLACE, algorithm=NATIVE, operation=operation)
        return _native(operation, mode, comm, sendbuf, recvbuf, op, recvcounts)
    if private is not None:
        guard.verify(private, operation=operation, error=e)
    raise e


def _on_nodes(operation: str, mode: int, comm: Any, sendbuf: Any, recvbuf: Any, op: Any, algorithm: str | None,
              dims: Any, nodes_t: tuple[int, ...], check: bool | None, recvcounts: Any) -> Any:
    """Run a call whose ``dims`` are a torus of nodes (:mod:`swing_mpi.nodes`).

    A blocking call runs the node phases around the torus algorithm among nodes; a nonblocking or
    persistent one runs the torus algorithm over all ranks on ``nodes_t + (K,)``. A blocking
    allreduce left to ``auto`` runs whichever of the two :func:`_node_form` picks. The nodes are
    checked (collectively, the same verdict on every rank) before anything else.
    """
    layout = nodes.node_layout(comm)
    layout.check(nodes_t)
    ranks_t = nodes.flat_dims(nodes_t, layout.k)
    requested = algorithm if algorithm is not None else (rc.algorithm or AUTO)
    if mode != BLOCKING or requested == NATIVE:
        return call(operation, mode, comm, sendbuf, recvbuf, op, algorithm, ranks_t, check, recvcounts)
    checking = rc.check if check is None else bool(check)
    private = guard.private(comm) if checking else None
    try:
        a = call_args(operation, comm, sendbuf, recvbuf, op, recvcounts)
    except (DeviceBuffer, TypeError, ValueError) as e:
        return _refused(e, private, operation, mode, comm, sendbuf, recvbuf, op, recvcounts)
    if private is not None:
        guard.verify(private, count=a.count, datatype=a.datatype, op=op or MPI.REPLACE, algorithm=requested,
                     dims=ranks_t, operation=operation, counts=None if operation == "allreduce" else a.counts)
    if operation == "allreduce":
        form, trial, st = _node_form(comm, layout, nodes_t, a, op) if requested == AUTO else ("nodes", None, None)
        timed = trial is not None and trial.pick is None
        t0 = perf_counter()
        if form == "flat":  # remembered under the user's dims once the form is settled: the repeat path runs it
            call("allreduce", BLOCKING, comm, sendbuf, recvbuf, op, algorithm, ranks_t, False,
                 recorded_as=_UNRECORDED if timed or checking else dims)
        else:
            _nodes_allreduce(layout, nodes_t, a, op, sendbuf, algorithm)
        if timed:
            assert trial is not None and st is not None
            trial.record(perf_counter() - t0, st.comm)
    elif operation == "allgather":
        nodes.allgather(layout, a, lambda lane, send, recv: call("allgather", BLOCKING, lane, send, recv, None,
                                                                 algorithm, nodes_t, False))
    else:
        nodes.reduce_scatter(layout, a, op, lambda lane, send, recv, counts: call(
            "reduce_scatter", BLOCKING, lane, send, recv, op, algorithm, nodes_t, False, counts))
    return None


def _node_form(comm: Any, layout: nodes.NodeLayout, nodes_t: tuple[int, ...], a: Args,
               op: MPI.Op) -> tuple[str, online.Trial | None, CommState]:
    """Return ``auto``'s form for a blocking allreduce on a torus of nodes, its trial and the state holding it.

    The model's pick (:func:`swing_mpi.choose.node_form`); where it names contenders, the first calls of
    the size try them (:mod:`swing_mpi.online`, predefined ops and datatypes), every rank alike.
    """
    st = comm_state(comm)
    lanes = nodes.lanes_for(a.nbytes, a.count, layout.k)
    d = node_form(nodes_t, layout.k, a.nbytes, a.recv.extent, lanes, exact=a.exact, commutative=a.commutative,
                  native_ok=a.native_ok, tuning=st.tuning)
    trial = None
    if d.contenders and a.count and st.trial and op.is_predefined and a.datatype.is_predefined:
        key = ("node-form", nodes_t, layout.k, a.nbytes, a.datatype.py2f(), op.py2f())
        trial = online.trial_for(st, key, d.contenders)
    return (d.algorithm if trial is None else trial.algorithm), trial, st


def node_form_trial(comm: Any, nodes_t: tuple[int, ...], a: Args, op: MPI.Op) -> online.Trial | None:
    """Return the trial of ``auto``'s form for blocking allreduces like ``a`` on the torus of nodes ``nodes_t``.

    ``None``: none (one form priced close enough, or no trial). Collective on first use (the nodes are found).
    """
    layout = nodes.node_layout(comm)
    layout.check(nodes_t)
    return _node_form(comm, layout, nodes_t, a, op)[1]


def _nodes_allreduce(layout: nodes.NodeLayout, nodes_t: tuple[int, ...], a: Args, op: MPI.Op, sendbuf: Any,
                     algorithm: str | None) -> None:
    """Run the node form of a blocking allreduce (:func:`swing_mpi.nodes.allreduce`)."""
    def lane_allreduce(lane: Any, buf: Any) -> None:  # the repeat path where buf is last call's array
        r = RECORDS.get(id(buf))
        if (r is not None and r.comm is lane and r.op is op and r.algorithm is algorithm and r.dims is nodes_t
                and r.send is None and r.in_place is MPI.IN_PLACE and type(buf) is np.ndarray
                and buf.dtype is r.rdtype and again(r, MPI.IN_PLACE, buf)):
            return
        call("allreduce", BLOCKING, lane, MPI.IN_PLACE, buf, op, algorithm, nodes_t, False)

    nodes.allreduce(layout, nodes_t, a, op, sendbuf, lane_allreduce)


def _tried(trial: online.Trial, st: CommState, name: str, dims_t: tuple[int, ...], a: Args, op: MPI.Op,
           comm: Any, sendbuf: Any, recvbuf: Any) -> None:
    """Run and time one call of a trial; its time goes to the trial (which agrees over ranks at a turn's end).

    A schedule runs as its settled calls will: through the compiled core's record for such arrays (made
    before the clock starts, kept on the trial), so that MPI's call and ours are timed alike, without the
    Python of a first call (1-2 us at p = 2, as much as the gap a trial of small vectors must see).
    """
    run = _trial_run(trial, st, name, dims_t, a, op, sendbuf, recvbuf)
    t0 = perf_counter()
    if run is None or run(sendbuf, recvbuf, op) is False:  # False: it declined, nothing sent (the full path)
        _run(st, name, dims_t, a, op, comm, sendbuf, recvbuf)
    trial.record(perf_counter() - t0, comm_state(comm).comm)


def _trial_run(trial: online.Trial, st: CommState, name: str, dims_t: tuple[int, ...], a: Args, op: MPI.Op,
               sendbuf: Any, recvbuf: Any) -> Any:
    """Return (make once per trial) the compiled core's record that runs ``name`` on such arrays; None: none."""
    in_place = is_in_place(sendbuf)
    if name == NATIVE or not a.count or type(recvbuf) is not np.ndarray or not (
            in_place or type(sendbuf) is np.ndarray):
        return None
    ck = (name, recvbuf.dtype, None if in_place else sendbuf.dtype)
    if ck not in trial.runs:
        key = _key("allreduce", name, dims_t, a.count, a, op)
        plan = None if key is None else _plan(st, key, name, dims_t, a, op)
        trial.runs[ck] = None if plan is None else plan.repeat_record(st, recvbuf, None if in_place else sendbuf)
    return trial.runs[ck]


def _key(what: str, name: str, dims_t: tuple[int, ...], counts: Any, a: Args, op: MPI.Op) -> tuple | None:
    """Return the plan-cache key of a blocking call, ``None`` where the plan cannot be shared."""
    if not (a.datatype.is_predefined and op.is_predefined):
        return None
    return (what, name, dims_t, counts, a.datatype.py2f(), op.py2f())


def _plan(st: CommState, key: tuple | None, name: str, dims_t: tuple[int, ...], a: Args, op: MPI.Op) -> Plan:
    plan = st.plans.get(key) if key is not None else None
    if plan is None:
        # two ranks combine one pair, the same bits on both for SUM and PROD of floats (IEEE's are commutative):
        # the exact form then, not the rank-ordered contributions form
        exact = a.exact or math.prod(dims_t) == 2 and native_bit_identical(op, a.datatype, False)
        plan = st.plan(key, lambda: build_schedule(name, dims_t, st.rank, a.count, exact=exact), a.datatype, op)
    return plan


def _run(st: CommState, name: str, dims_t: tuple[int, ...], a: Args, op: MPI.Op, comm: Any, sendbuf: Any,
         recvbuf: Any) -> Plan | None:
    """Run one blocking allreduce with ``name``; return its cached plan (``None``: native, count 0 or not cached)."""
    if name == NATIVE:
        MPI.Intracomm.Allreduce(comm, MPI.IN_PLACE if a.send is None else sendbuf, recvbuf, op)
        return None
    st.seq += 1
    if not a.count:
        return None
    key = _key("allreduce", name, dims_t, a.count, a, op)
    plan = _plan(st, key, name, dims_t, a, op)
    plan.run(a.recv.data, None if a.send is None else a.send.data, seq=st.seq)
    return plan if key is not None else None


def _halves(operation: str, mode: int, st: CommState, rank: int, name: str, dims_t: tuple[int, ...], a: Args,
            op: MPI.Op) -> Any:
    """Run (or start) a reduce-scatter or all-gather: the half of ``name``'s allreduce schedule."""
    counts = a.counts
    assert counts is not None
    ext = a.recv.extent
    total = sum(counts)
    blocks, off = [], 0
    for c in counts:
        blocks.append((off, off + c))
        off += c
    if st.placement is not None:  # indexed by torus position (private rank) instead of user rank
        placed = [(0, 0)] * len(blocks)
        for user_rank, pos in enumerate(st.placement):
            placed[pos] = blocks[user_rank]
        blocks = placed
    collective = _COLLECTIVE[operation]
    half = REDUCE_SCATTER if collective == "reduce_scatter" else ALL_GATHER
    key = _key(collective, name, dims_t, tuple(counts), a, op) if mode == BLOCKING else None
    plan = None
    if total and mode == BLOCKING:
        plan = st.plans.get(key) if key is not None else None
        if plan is None:
            plan = st.plan(key, lambda: build_half(name, dims_t, st.rank, tuple(blocks), half=half), a.datatype, op)
    before = out = source = None
    if collective == "reduce_scatter":
        # a work vector of ours, in place too: MPI libraries leave the receive buffer beyond the
        # result as it was (mpi4py's tests check it), so the schedule cannot run in it
        work = st.vector(key, total * ext)
        mine = counts[rank] * ext
        out = a.recv.data[:mine] if mine else None
        if a.send is None:
            before = _move(work, a.recv.data[:total * ext])
        else:
            source = a.send.data
    else:
        n = counts[0]
        work = a.recv.data[:n * len(counts) * ext]
        if a.send is not None and n:
            before = _move(work[rank * n * ext:(rank + 1) * n * ext], a.send.data[:n * ext])
    if mode != BLOCKING:
        return _request(mode, st, lambda: build_half(name, dims_t, st.rank, tuple(blocks), half=half), bool(total),
                        a.datatype, op, work, source, before=before, out=out,
                        key=_key(collective, name, dims_t, (tuple(counts), st.placement), a, op))
    st.seq += 1
    if before is not None:
        before()
    if plan is not None:
        plan.run(work, source, seq=st.seq, out=out)
    return None


def _request(mode: int, st: CommState, schedule: Any, moves: bool, datatype: MPI.Datatype, op: MPI.Op,
             work: np.ndarray, source: np.ndarray | None, key: tuple | None = None, **kw: Any) -> Any:
    """Start a nonblocking call, or set up a persistent one, on a plan of its own (none where nothing ``moves``).

    A persistent request's plan runs on the communicator and operation number it owns
    (:func:`swing_mpi.request.persistent_comm`): it may start at a different moment on each rank.
    A nonblocking call takes an idle plan of an earlier one with the same ``key`` (its plan-cache key:
    None where plans cannot be shared), and gives its plan back when done.
    """
    if mode == PERSISTENT:
        comm, seq = persistent_comm(st)
        plan = Plan(comm, schedule(), datatype, op, wait=st.wait_policy, threads=st.threads) if moves else None
        return persistent_request(st, plan, work, source, seq, **kw)
    if not moves:
        return start_request(st, None, work, source, **kw)
    pool = None if key is None else ("nonblocking", *key)
    plan = st.idle_plan(pool) or st.plan(None, schedule, datatype, op)
    return start_request(st, plan, work, source, pool=pool, **kw)


def _move(dst: np.ndarray, src: np.ndarray) -> Any:
    def move() -> None:
        dst[...] = src
    return move


def decision_for(operation: str, comm: Any, a: Args, op: Any, algorithm: str | None, dims: Any, *,
                 timed: bool = True) -> tuple[Decision, tuple[int, ...], online.Trial | None]:
    """Return (decision, dims, trial) of a call with checked arguments ``a`` (dims ``()`` for native).

    ``timed``: a blocking call (one that takes part in a trial).
    """
    return _decision(operation, comm, a, op, algorithm, dims, timed)[:3]


def _decision(operation: str, comm: Any, a: Args, op: Any, algorithm: str | None, dims: Any,
              timed: bool) -> tuple[Decision, tuple[int, ...], online.Trial | None, CommState | None]:
    """Return :func:`decision_for`'s answer and the communicator's state where ``auto`` needed it.

    ``auto`` reads the communicator's tuning, which creates its state (private duplicate + tuning
    broadcast) on first use: collective, like the call itself. A reduce-scatter or all-gather whose
    algorithm comes from ``$SWING_MPI_ALGORITHM`` and lacks that collective is decided by ``auto``.
    """
    collective = _COLLECTIVE[operation]
    requested = algorithm if algorithm is not None else (rc.algorithm or AUTO)
    if algorithm is None and not supports(requested, collective):
        requested = AUTO
    if requested == NATIVE:
        return decide(NATIVE, 0, (), 0, exact=True), (), None, None
    dims_t = dims_for(comm, dims)  # validated even for count 0: a bad dims is a bad call
    st = comm_state(comm) if requested == AUTO else None
    p = comm.Get_size()
    d = decide(requested, p, dims_t, a.nbytes, exact=a.exact, commutative=a.commutative, native_ok=a.native_ok,
               tuning=None if st is None else st.tuning, collective=collective)
    trial = None
    if d.contenders and a.count and st is not None and st.trial:
        trial = trial_of(st, comm, dims_t, a, op, d)
        if trial is not None:
            d = decide(requested, p, dims_t, a.nbytes, exact=a.exact, commutative=a.commutative,
                       native_ok=a.native_ok, tuning=st.tuning, collective=collective, trial=trial, timed=timed)
    return d, dims_t, trial, st


def trial_of(st: CommState, comm: Any, dims_t: tuple[int, ...], a: Args, op: MPI.Op,
             d: Decision) -> online.Trial | None:
    """Return the trial of ``auto``'s blocking allreduces like this one (:mod:`swing_mpi.online`); None: none."""
    dt = a.datatype
    if not (op.is_predefined and dt.is_predefined):  # a key must be equal on every rank
        return None
    key = ("allreduce", dims_t, getattr(comm, "swing_placement", None), a.nbytes, dt.py2f(), op.py2f())
    return online.trial_for(st, key, d.contenders)
