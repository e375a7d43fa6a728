"""Per-communicator state: our private communicator, operation numbers, plans, tuning, wait policy.

All our traffic runs on a private communicator derived from the user's one
(``Dup``, or ``Split`` when ranks state their torus positions), created on
first use and cached on the user's communicator as an MPI attribute, so it is
freed with it and user messages and ours can never match each other.

The first use is collective and bounded by ``$SWING_MPI_TIMEOUT`` like every
later wait: a nonblocking barrier on the user's communicator waits for every
rank to arrive (naming the missing ones on timeout, :mod:`swing_mpi.waiting`);
the agreements after it (tuning, trial switch, wait policy) are nonblocking
collectives polled with the same deadline.

A communicator may carry several states, one per rank placement (``None``:
torus position = rank; else a tuple giving every rank's position): the private
communicator of a placement numbers its ranks by torus position, so every
schedule runs unchanged with each rank at its stated place.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import Any

import numpy as np
from mpi4py import MPI

from . import online
from .choose import Tuning, tuning_for_comm
from .config import rc
from .executor import Plan
from .schedule import AUTO, Schedule
from .topology import Torus, node_dims, parse_dims
from .waiting import bounded_bcast, node_info, wait_collective

__all__ = ["CommState", "comm_state", "find_state", "dims_for", "requested_algorithm", "arrive", "NODE_HINTS",
           "agreed_trial", "PLAN_CACHE_SIZE", "IDLE_PLANS"]

PLAN_CACHE_SIZE = 64
"""Plans kept per communicator state (least recently used go first)."""
IDLE_PLANS = 4
"""Idle plans of nonblocking calls kept per key (as many calls of one kind may be in flight at once)."""

Placement = tuple[int, ...] | None

NODE_HINTS: dict[int, tuple[str, int]] = {}
"""(wait policy, threads) of communicators that hold only some of a node's ranks (a lane of
:mod:`swing_mpi.nodes`), by handle: their node's answer, not the one their own ranks would find."""


class CommState:
    """What one placement on one user communicator keeps between calls."""

    def __init__(self, comm: MPI.Comm, placement: Placement) -> None:
        """Create the private communicator; agree on the tuning, the trial switch and the wait policy (collective)."""
        timeout = rc.timeout
        arrive(comm, timeout)
        private = comm.Dup() if placement is None else comm.Split(0, placement[comm.Get_rank()])
        self.comm: Any = private
        self.placement = placement
        try:
            tuning = tuning_for_comm(self.comm, timeout=timeout)
            trial = agreed_trial(self.comm, timeout)
            hint = NODE_HINTS.get(comm.py2f())
            wait, threads = hint if hint is not None else node_info(self.comm, timeout)
        except TimeoutError:  # the communicator is broken: freeing would wait for the missing ranks too
            raise
        except BaseException:  # raised on every rank alike: nothing is left behind
            private.Free()
            raise
        self.tuning: Tuning = tuning
        """``auto``'s cost-model constants: read on rank 0 and broadcast, equal on all ranks."""
        self.trial: bool = trial
        """``auto`` tries close contenders on its first calls (:mod:`swing_mpi.online`): rank 0's switch."""
        self.wait_policy: str = wait
        """How this communicator's plans wait (``$SWING_MPI_WAIT``, else the node's rule; equal on a node)."""
        self.threads: int = threads
        """Threads this rank's plans reduce large blocks with (``$SWING_MPI_THREADS``, else the node's spare cores)."""
        self.trials: dict[Hashable, online.Trial | None] = {}
        """Those trials, per size (kept by :func:`swing_mpi.online.trial_for`)."""
        self.plans: OrderedDict[Hashable, Plan] = OrderedDict()
        self.idle: OrderedDict[Hashable, list[Plan]] = OrderedDict()
        """Plans of finished nonblocking calls, by key: the next such call takes one instead of building it."""
        self._idle_lock = threading.Lock()  # requests finish in the progress thread too
        self.vectors: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        """Work vectors of blocking calls that need one besides the user's buffers (reduce-scatter)."""
        self.seq = 0
        """Operations started on this state (the same count on every rank)."""
        self.alive = True
        self.extra_comms: list[Any] = []
        """Duplicates of ``comm`` for persistent requests (:func:`swing_mpi.request.persistent_comm`)."""
        self.persistent_count = 0

    @property
    def rank(self) -> int:
        """This rank's torus position (its rank in the private communicator)."""
        return self.comm.Get_rank()

    def next_seq(self) -> int:
        """Return the number of the next operation (it selects the operation's tags)."""
        self.seq += 1
        return self.seq

    def plan(self, key: Hashable | None, schedule: Callable[[], Schedule], datatype: MPI.Datatype,
             op: MPI.Op) -> Plan:
        """Return the plan cached under ``key``, or bind ``schedule()`` to a new one (cached unless ``key`` is None).

        Blocking calls share cached plans (scratch buffers too); nonblocking and
        persistent requests pass ``key=None`` and own their plan.
        """
        plan = self.plans.get(key) if key is not None else None
        if plan is None:
            plan = Plan(self.comm, schedule(), datatype, op, wait=self.wait_policy, threads=self.threads)
            if key is not None:
                self.plans[key] = plan
                if len(self.plans) > PLAN_CACHE_SIZE:
                    self.plans.popitem(last=False)
        else:
            self.plans.move_to_end(key)
        return plan

    def idle_plan(self, key: Hashable | None) -> Plan | None:
        """Return an idle plan kept under ``key`` (removed from the pool), or None."""
        if key is None:
            return None
        with self._idle_lock:
            got = self.idle.get(key)
            return got.pop() if got else None

    def release_plan(self, key: Hashable, plan: Plan) -> None:
        """Keep the plan of a finished nonblocking call for the next one under ``key`` (a few per key)."""
        with self._idle_lock:
            if not self.alive:
                return
            kept = self.idle.setdefault(key, [])
            if len(kept) < IDLE_PLANS:
                kept.append(plan)
            self.idle.move_to_end(key)
            if len(self.idle) > PLAN_CACHE_SIZE:
                self.idle.popitem(last=False)

    def vector(self, key: Hashable | None, nbytes: int) -> np.ndarray:
        """Return a work vector of ``nbytes`` bytes, kept under ``key`` for the next blocking call (None: a new one)."""
        if key is None:
            return np.empty(nbytes, np.uint8)
        got = self.vectors.get(key)
        if got is None or got.nbytes != nbytes:
            got = self.vectors[key] = np.empty(nbytes, np.uint8)
            if len(self.vectors) > PLAN_CACHE_SIZE:
                self.vectors.popitem(last=False)
        else:
            self.vectors.move_to_end(key)
        return got

    def free(self) -> None:
        """Drop the plans and free the private communicator."""
        self.alive = False
        self.plans.clear()
        with self._idle_lock:
            self.idle.clear()
        self.vectors.clear()
        if self.comm != MPI.COMM_NULL and not MPI.Is_finalized():
            for c in self.extra_comms:
                c.Free()
            self.comm.Free()


class _States(dict):
    """The attribute value: placement -> :class:`CommState`."""


def _delete_states(comm: MPI.Comm, keyval: int, states: _States) -> None:
    for st in states.values():
        try:
            st.free()
        except Exception:  # never raise out of an MPI callback
            pass


_KEYVAL: int | None = None
_KEYVAL_LOCK = threading.Lock()
"""Threads that meet the first use together create one keyval (a second would hide the first's states)."""


def arrive(comm: MPI.Comm, timeout: float | None) -> None:
    """Wait until every rank of ``comm`` has come to its first use (a nonblocking barrier, bounded by ``timeout``).

    Without a timeout there is nothing to bound: the ``Dup`` that follows waits for every rank anyway.
    """
    if timeout is not None and comm.Get_size() > 1:
        wait_collective(MPI.Comm.Ibarrier(comm), comm, "the first call on this communicator", timeout)


def agreed_trial(comm: MPI.Comm, timeout: float | None) -> bool:
    """Return rank 0's ``$SWING_MPI_TRIAL`` on every rank (collective; a bad value on rank 0 raises everywhere)."""
    mine: bool | str = False
    if comm.Get_rank() == 0:
        try:
            mine = bool(rc.checked("trial"))
        except ValueError as err:
            mine = str(err)
    got = mine if comm.Get_size() == 1 else bounded_bcast(comm, mine, "the trial switch's agreement", timeout)
    if isinstance(got, str):
        raise ValueError(got)
    return bool(got)


def comm_state(comm: MPI.Comm, placement: Placement = None) -> CommState:
    """Return the state of ``comm`` for ``placement``, creating it (collective) on first use."""
    global _KEYVAL
    if _KEYVAL is None:
        with _KEYVAL_LOCK:
            if _KEYVAL is None:
                _KEYVAL = MPI.Comm.Create_keyval(delete_fn=_delete_states)
    states: Any = comm.Get_attr(_KEYVAL)
    if states is None:
        states = _States()
        comm.Set_attr(_KEYVAL, states)
    st = states.get(placement)
    if st is None:
        st = states[placement] = CommState(comm, placement)
    return st


def find_state(comm: MPI.Comm, placement: Placement = None) -> CommState | None:
    """Return the state of ``comm`` for ``placement`` if one exists (local, creates nothing)."""
    if _KEYVAL is None:
        return None
    states: Any = comm.Get_attr(_KEYVAL)
    return None if states is None else states.get(placement)


def requested_algorithm(algorithm: str | None) -> str:
    """Return what a call asks for: ``algorithm``, else ``$SWING_MPI_ALGORITHM``, else ``auto``."""
    return algorithm if algorithm is not None else (rc.algorithm or AUTO)


@lru_cache(maxsize=64)
def _parse_dims_cached(spec: Any, p: int) -> tuple[int, ...]:
    return parse_dims(spec, p)


def dims_for(comm: MPI.Comm, dims: Any = None) -> tuple[int, ...]:
    """Return the torus dims a call on ``comm`` with ``dims=dims`` uses.

    ``dims`` itself if given, else ``$SWING_MPI_DIMS``, the communicator's
    Cartesian topology, or a ring of all ranks. Local: no communication. Dims of
    nodes (a product that divides the rank count, :mod:`swing_mpi.nodes`) come back
    as given: the torus the nodes form.
    """
    p = comm.Get_size()
    if dims is None:
        if rc.dims:
            return node_dims(rc.dims, p) or _parse_dims_cached(rc.dims, p)
        if comm.Get_topology() == MPI.CART:
            return Torus.from_cartcomm(MPI.Cartcomm(comm)).dims
        return (p,)
    nodes = node_dims(dims, p)
    if nodes is not None:
        return nodes
    if isinstance(dims, str) or (isinstance(dims, tuple) and all(type(d) is int for d in dims)):
        # the cache matches keys by equality, where (2.0,) == (True, 2) == (2,): only plain ints share it
        return _parse_dims_cached(dims, p)
    return parse_dims(dims, p)
