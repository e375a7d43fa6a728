"""Per-communicator state: our private communicator, operation numbers, plans, tuning.

All our traffic runs on a private communicator derived from the user's one
(``Dup``, or ``Split`` when ranks state their torus positions), created on
first use and cached on the user's communicator as an MPI attribute, so it is
freed with it and user messages and ours can never match each other.

A communicator may carry several states, one per rank placement (``None``:
torus position = rank; else a tuple giving every rank's position): the private
communicator of a placement numbers its ranks by torus position, so every
schedule runs unchanged with each rank at its stated place.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import Any

import numpy as np
from mpi4py import MPI

from . import online
from .choose import Tuning, tuning_for_comm
from .executor import Plan
from .schedule import AUTO, Schedule
from .topology import Torus, parse_dims

__all__ = ["CommState", "comm_state", "find_state", "dims_for", "requested_algorithm", "ENV_ALGORITHM",
           "ENV_DIMS", "PLAN_CACHE_SIZE"]

PLAN_CACHE_SIZE = 64
"""Plans kept per communicator state (least recently used go first)."""

ENV_ALGORITHM = os.environ.get("SWING_MPI_ALGORITHM") or None
"""``$SWING_MPI_ALGORITHM``, read once at import (as MPI libraries read theirs at ``MPI_Init``)."""
ENV_DIMS = os.environ.get("SWING_MPI_DIMS") or None
"""``$SWING_MPI_DIMS``, read once at import."""

Placement = tuple[int, ...] | None


class CommState:
    """What one placement on one user communicator keeps between calls."""

    def __init__(self, comm: MPI.Comm, placement: Placement) -> None:
        """Create the private communicator and read the tuning and the trial switch on rank 0 (collective)."""
        private = comm.Dup() if placement is None else comm.Split(0, placement[comm.Get_rank()])
        self.comm: Any = private
        self.placement = placement
        try:
            tuning, trial = tuning_for_comm(self.comm), online.agreed(self.comm)
        except BaseException:  # raised on every rank alike: nothing is left behind
            private.Free()
            raise
        self.tuning: Tuning = tuning
        """``auto``'s cost-model constants: read on rank 0 and broadcast, equal on all ranks."""
        self.trial: bool = trial
        """``auto`` tries close contenders on its first calls (:mod:`swing_mpi.online`): rank 0's switch."""
        self.trials: dict[Hashable, online.Trial | None] = {}
        """Those trials, per size (kept by :func:`swing_mpi.online.trial_for`)."""
        self.plans: OrderedDict[Hashable, Plan] = OrderedDict()
        self.vectors: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        """Work vectors of blocking calls that need one besides the user's buffers (reduce-scatter)."""
        self.seq = 0
        """Operations started on this state (the same count on every rank)."""
        self.alive = True

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
            plan = Plan(self.comm, schedule(), datatype, op)
            if key is not None:
                self.plans[key] = plan
                if len(self.plans) > PLAN_CACHE_SIZE:
                    self.plans.popitem(last=False)
        else:
            self.plans.move_to_end(key)
        return plan

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
        self.vectors.clear()
        if self.comm != MPI.COMM_NULL and not MPI.Is_finalized():
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
    return algorithm if algorithm is not None else (ENV_ALGORITHM or AUTO)


@lru_cache(maxsize=64)
def _parse_dims_cached(spec: Any, p: int) -> tuple[int, ...]:
    return parse_dims(spec, p)


def dims_for(comm: MPI.Comm, dims: Any = None) -> tuple[int, ...]:
    """Return the torus dims a call on ``comm`` with ``dims=dims`` uses.

    ``dims`` itself if given, else ``$SWING_MPI_DIMS``, the communicator's
    Cartesian topology, or a ring of all ranks. Local: no communication.
    """
    p = comm.Get_size()
    if dims is None:
        if ENV_DIMS:
            return _parse_dims_cached(ENV_DIMS, p)
        if comm.Get_topology() == MPI.CART:
            return Torus.from_cartcomm(MPI.Cartcomm(comm)).dims
        return (p,)
    if isinstance(dims, (str, tuple)):
        return _parse_dims_cached(dims, p)
    return parse_dims(dims, p)
