"""``auto`` on a launch's first calls: try the close contenders of the measured table, keep the fastest.

Algorithm:
    A decision table measured by ``swing-mpi calibrate`` describes the
    launch that measured it. On a machine shared by more ranks than cores the
    fastest algorithm can change from one launch to the next: MPICH with 4
    ranks on 2 cores ran a 1 MiB allreduce in one of several modes drawn per
    launch, with ``MPI_Allreduce`` and ``recdoub`` each up to 2.2x ahead of
    the other. So where the table names other candidates close to the
    fastest at a call's size (:func:`swing_mpi.choose.contenders`), the first
    blocking calls of that size (same dims, op class, rank placement) run
    them in turns of ``rounds`` calls: the table's pick (a warmup, not
    counted), every other contender, the pick again. Every rank times each
    of these calls itself; the call that ends the trial takes the maximum
    over the ranks of every time (one ``MPI_Allreduce`` of a few doubles on
    the private communicator: a call takes as long as its slowest rank), and
    every later call of that size runs the contender with the least median
    over the later half of its turn if it is clearly faster than the table's
    pick (:func:`clearly_faster`: a median :data:`SWITCH_MARGIN` less, and a
    rank test sure of it); else the pick. All ranks reduce to the same
    numbers, so they agree.

    Why so: 16 ranks on 2 cores (MPICH, 1 KiB, calls back to back), a
    launch's first calls ran 2-300x slower than its later ones, and the first
    2-3 calls after a switch of algorithm 1.5-3x slower even once every
    algorithm had run (plans built, buffers touched); in the torus lab a call
    right after another algorithm's finds what that one left in the links'
    queues. A first try (turns counted but for their first call, the pick's
    only turn first) put algorithms 1.3-2x slower ahead at 4 of the 20
    shared-memory points. The minimum over ranks is no way out: the last rank
    to arrive often finds its peers' messages waiting and ends a recursive
    doubling in 33-72 us where the call takes 0.8-0.9 ms.

Restrictions:
    Blocking allreduce only. Nonblocking and persistent calls run the trial's
    result once it is in, the table's pick before, and take no part in it.
    Off with ``SWING_MPI_TRIAL=off`` (rank 0's value counts on every rank): ``auto``
    then runs the table's pick. User-defined ops and derived datatypes are not tried
    (nothing tells that two ranks' objects are the same op).
    A trial runs its contenders on the program's own data, so while it lasts
    consecutive floating-point results may differ in their last bits from
    call to call (each is still bit-identical on every rank).

Cost:
    ``rounds`` = :data:`TRIAL_SECONDS` over the contenders' measured times
    per round, between :data:`MIN_ROUNDS` and :data:`MAX_ROUNDS`: at most
    ``(TRIAL_MAX + 1) x MAX_ROUNDS`` calls per size, two turns of them the
    pick's (what would run anyway), the slowest contender at most
    ``TRIAL_FACTOR`` times the fastest. The first calls of a size run the
    table's pick, so a program that calls a few times pays nothing. A size
    whose trial would take more than :data:`TRIAL_BUDGET` by the table's
    times is not tried. After the trial,
    calls take the usual path (and the repeat path of :mod:`swing_mpi.repeat`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["Trial", "trial_for", "rounds_for", "clearly_faster", "enabled", "agreed", "ENV_TRIAL",
           "TRIAL_SECONDS", "MIN_ROUNDS", "MAX_ROUNDS", "SWITCH_MARGIN", "SWITCH_Z", "TRIAL_BUDGET", "TRIALS_KEPT"]

ENV_TRIAL = "SWING_MPI_TRIAL"
_ON = ("on", "1", "yes", "true")
_OFF = ("off", "0", "no", "false")
TRIAL_SECONDS = 0.05
"""What a trial aims to spend per turn (sets ``rounds`` from the measured times)."""
MIN_ROUNDS = 10
"""Calls per turn at least: the later five count, the fewest in which a test can tell (:data:`SWITCH_Z`)."""
MAX_ROUNDS = 100
"""Calls per turn at most. Short calls get many: at 1 MiB on 4 ranks on 2 cores (0.5 ms a call) the
later half of a 10-call turn put MPI_Allreduce 4-7 % behind recursive halving where 60 calls later
it ran 13-22 % behind."""
SWITCH_MARGIN = 0.05
"""Another contender replaces the table's pick only if its median is at least this fraction less."""
SWITCH_Z = 2.33
"""How sure a switch must be: one-sided, about 1 % that a contender no faster than the pick looks it."""
TRIAL_BUDGET = 2.0
"""Seconds a trial may take by the table's times; a size whose trial would take longer is not tried (a
16 MiB allreduce on 16 ranks on 2 cores, 70 ms a call, or most sizes of 1 MiB and more in the torus lab)."""
TRIALS_KEPT = 1024
"""Sizes tried per communicator; later new sizes run the table's pick untried (:func:`trial_for`)."""


@lru_cache(maxsize=1)
def enabled() -> bool:
    """``$SWING_MPI_TRIAL`` (default on); an unknown value raises ``ValueError`` naming the allowed ones."""
    v = os.environ.get(ENV_TRIAL, "").strip().lower()
    if not v or v in _ON:
        return True
    if v in _OFF:
        return False
    raise ValueError(f"${ENV_TRIAL}={os.environ[ENV_TRIAL]!r} is not understood; "
                     f"expected one of: {', '.join(_ON + _OFF)}")


def agreed(comm: Any) -> bool:
    """Return rank 0's :func:`enabled` on every rank of ``comm`` (collective; a bad value raises everywhere).

    Ranks that tried different things would run different algorithms in one call.
    """
    mine: bool | str = False
    if comm.Get_rank() == 0:
        try:
            mine = enabled()
        except ValueError as err:
            mine = str(err)
    got = comm.bcast(mine, root=0)
    if isinstance(got, str):
        raise ValueError(got)
    return bool(got)


@dataclass
class Trial:
    """The trial of one size: its contenders, the times so far, and its result once in."""

    contenders: tuple[str, ...]
    rounds: int
    """Calls per turn; the last :meth:`counted` of a turn count."""
    times: list[float] = field(default_factory=list)
    """Seconds of each trial call on this rank, in call order (the maximum over ranks once the trial ends)."""
    pick: str | None = None
    """What every call runs once the trial is over (``None`` while it runs)."""
    medians: tuple[float, ...] = ()
    """Median seconds of every contender (max over ranks per call, counted calls), once the trial is over."""

    @property
    def turns(self) -> tuple[str, ...]:
        """Who runs each turn: the table's pick (a warmup, not counted), the others, the pick again."""
        return self.contenders + self.contenders[:1]

    @property
    def counted(self) -> int:
        """Calls that count at the end of each turn (the later half)."""
        return max(2, self.rounds // 2)

    @property
    def calls(self) -> int:
        """Calls the whole trial takes."""
        return len(self.turns) * self.rounds

    @property
    def algorithm(self) -> str:
        """What the next call runs: the contender whose turn it is, or the result."""
        if self.pick is not None:
            return self.pick
        return self.turns[len(self.times) // self.rounds]

    def record(self, seconds: float, comm: Any) -> None:
        """Add the time of the call just run; the last trial call agrees on the result over ``comm`` (collective)."""
        self.times.append(float(seconds))
        if len(self.times) < self.calls:
            return
        t = np.array(self.times, np.float64)
        comm.Allreduce(MPI.IN_PLACE, t, MPI.MAX)
        self.times = [float(x) for x in t]
        r, c, k = self.rounds, self.counted, len(self.contenders)
        turn = [self.times[j * r + r - c:(j + 1) * r] for j in range(k + 1)]
        calls = [turn[k]] + turn[1:k]  # the pick's second turn, then the others'
        self.medians = tuple(float(np.median(x)) for x in calls)
        best = min(range(k), key=lambda i: (self.medians[i], i))
        self.pick = self.contenders[best if clearly_faster(calls[best], calls[0]) else 0]


def clearly_faster(a: Sequence[float], b: Sequence[float]) -> bool:
    """Tell whether calls ``a`` beat calls ``b``: a median :data:`SWITCH_MARGIN` less, and not by chance.

    Not by chance: a one-sided Mann-Whitney test, ``a`` faster than ``b`` at
    the :data:`SWITCH_Z` level (normal approximation of U, ties counted
    half). Calls on a busy machine spread; at 1 MiB on 4 ranks on 2 cores
    medians of 5-15 calls put MPI_Allreduce 4-11 % ahead of or behind ours
    where 60 calls later it ran 13-25 % ahead.
    """
    ma, mb = float(np.median(a)), float(np.median(b))
    if not ma < (1.0 - SWITCH_MARGIN) * mb:
        return False
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    n1, n2 = len(x), len(y)
    u = float(np.sum(x[:, None] < y[None, :]) + 0.5 * np.sum(x[:, None] == y[None, :]))
    sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
    return (u - n1 * n2 / 2.0) / sd >= SWITCH_Z


def rounds_for(seconds: Sequence[float]) -> int:
    """Return the calls per contender: :data:`TRIAL_SECONDS` over their mean measured time, within the bounds."""
    per_round = sum(seconds)
    if per_round <= 0:
        return MAX_ROUNDS
    return max(MIN_ROUNDS, min(MAX_ROUNDS, math.ceil(TRIAL_SECONDS * len(seconds) / per_round)))


def trial_for(state: Any, key: Hashable, contenders: Callable[[], Sequence[tuple[str, float]]]) -> Trial | None:
    """Return the trial of ``key`` in ``state.trials``, started from ``contenders()`` on first use (None: none).

    ``key`` must be equal on every rank for the same call (sizes, predefined
    datatype and op codes, dims). A key's first call is never a repeat (the
    repeat path only knows calls made before), so every rank starts the same
    trials in the same order. Nothing is ever dropped: a rank whose repeat path
    runs a trial's result while another rank, dropping it, started it again
    would run another algorithm in the same call. Past :data:`TRIALS_KEPT`
    sizes, new ones are not tried (the table's pick).
    """
    kept: dict[Hashable, Trial | None] = state.trials
    if key in kept:
        return kept[key]
    if len(kept) >= TRIALS_KEPT:
        return None
    c = tuple(contenders())
    trial = None
    if len(c) > 1:
        seconds = [t for _, t in c]
        rounds = rounds_for(seconds)
        if rounds * (sum(seconds) + seconds[0]) <= TRIAL_BUDGET:
            trial = Trial(tuple(a for a, _ in c), rounds)
    kept[key] = trial
    return trial
