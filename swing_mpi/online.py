"""``auto`` on a launch's first calls: try the contenders a measured table cannot tell apart, keep the fastest.

A table measured by ``swing-mpi calibrate`` describes the launch that measured it; on a machine shared
by more ranks than cores the fastest of two close candidates can change from launch to launch. Where
the decision (:func:`swing_mpi.choose.decide`) names contenders within
:data:`~swing_mpi.choose.CLOSE_FACTOR` of its pick, the first blocking calls of that size run them in
turns of ``rounds`` calls (the pick first, then the others), every rank timing its own calls; at the end
of each turn one small ``MPI_Allreduce`` on the private communicator takes the least over ranks of each
call's time, so all ranks see the same numbers and agree. The least: the rank that came to a call last
did not wait for the others to arrive, so its time is the call's own; the others' add how much later it
came (the Python around a trial call, which varies from rank to rank, is several times a small call). A
schedule's trial call runs through the compiled core's record, as its settled calls will
(:mod:`swing_mpi.pipeline`). The pick runs a second turn, the reference, only where some contender looked
faster than its first; otherwise the trial ends there. The result is :func:`swing_mpi.choose.trial_verdict`.

The trial's calls are the user's, so it is short: only close contenders, at most
:data:`MAX_ROUNDS` calls a turn, none where it would take over :data:`TRIAL_BUDGET` seconds by the
table's times. Blocking allreduce with predefined ops and datatypes only; ``SWING_MPI_TRIAL=off``
(rank 0's value, agreed by :func:`swing_mpi.state.agreed_trial`) turns it off. docs/auto.md has the
measurements behind these choices.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from statistics import median  # not numpy's: its first call in a process costs 14 ms
from typing import Any

import numpy as np
from mpi4py import MPI

from .choose import SWITCH_MARGIN, clearly_faster, trial_verdict

__all__ = ["Trial", "trial_for", "rounds_for", "clearly_faster", "TRIAL_SECONDS", "MIN_ROUNDS", "MAX_ROUNDS",
           "TRIAL_BUDGET", "TRIALS_KEPT"]

TRIAL_SECONDS = 0.05
"""What a trial aims to spend per turn (sets ``rounds`` from the measured times)."""
MIN_ROUNDS = 10
"""Calls per turn at least: the later five count, the fewest in which a test can tell."""
MAX_ROUNDS = 30
"""Calls per turn at most: what a trial may cost a user's first calls."""
TRIAL_BUDGET = 2.0
"""Seconds a trial may take by the table's times; a size whose trial would take longer is not tried."""
TRIALS_KEPT = 1024
"""Sizes tried per communicator; later new sizes run the table's pick untried (:func:`trial_for`)."""


@dataclass
class Trial:
    """The trial of one size: its contenders, the times so far, and its result once in."""

    contenders: tuple[str, ...]
    rounds: int
    """Calls per turn; the last :attr:`counted` of a turn count."""
    times: list[float] = field(default_factory=list)
    """Seconds of each trial call in call order: the least over ranks for every finished turn."""
    turns: tuple[str, ...] = ()
    """Who runs each turn so far: the contenders, then the pick again where the evidence needs it."""
    pick: str | None = None
    """What every call runs once the trial is over (``None`` while it runs)."""
    medians: tuple[float, ...] = ()
    """Median seconds of every contender (counted calls), once the trial is over."""
    runs: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """The compiled core's records that run a contender's trial calls (:mod:`swing_mpi.pipeline`), by contender
    and the arrays' dtypes; emptied when the trial ends."""

    def __post_init__(self) -> None:
        """Start with one turn per contender."""
        if not self.turns:
            self.turns = tuple(self.contenders)

    @property
    def counted(self) -> int:
        """Calls that count at the end of each turn (the later half: a switch's first calls run slow)."""
        return max(2, self.rounds // 2)

    @property
    def calls(self) -> int:
        """Calls the trial takes at most (the pick's second turn included)."""
        return (len(self.contenders) + 1) * self.rounds

    @property
    def algorithm(self) -> str:
        """What the next call runs: the contender whose turn it is, or the result."""
        if self.pick is not None:
            return self.pick
        return self.turns[len(self.times) // self.rounds]

    def _turn(self, j: int) -> list[float]:
        r = self.rounds
        return self.times[j * r + r - self.counted:(j + 1) * r]

    def record(self, seconds: float, comm: Any) -> None:
        """Add the time of the call just run; a turn's last call agrees on its times over ``comm`` (collective)."""
        self.times.append(float(seconds))
        r = self.rounds
        if len(self.times) % r:
            return
        t = np.array(self.times[-r:], np.float64)
        comm.Allreduce(MPI.IN_PLACE, t, MPI.MIN)  # every rank now holds the same times: the same verdict
        self.times[-r:] = [float(x) for x in t]
        done, k = len(self.times) // r, len(self.contenders)
        if done < k:
            return
        if done == k:
            first = self._turn(0)
            samples = [first] + [self._turn(j) for j in range(1, k)]
            if not any(median(s) < (1.0 - SWITCH_MARGIN) * median(first) for s in samples[1:]):
                self._finish(samples)  # nothing looked faster than the pick: the evidence is clear
            else:
                self.turns += self.contenders[:1]  # the pick again, warmed up: the reference
            return
        self._finish([self._turn(k)] + [self._turn(j) for j in range(1, k)])

    def _finish(self, samples: list[list[float]]) -> None:
        self.medians = tuple(float(median(s)) for s in samples)
        self.pick = trial_verdict(self.contenders, samples)
        self.runs.clear()  # the records hold the communicator's state, which holds this trial: no cycle left


def rounds_for(seconds: Sequence[float]) -> int:
    """Return the calls per contender: :data:`TRIAL_SECONDS` over their mean measured time, within the bounds."""
    per_round = sum(seconds)
    if per_round <= 0:
        return MAX_ROUNDS
    return max(MIN_ROUNDS, min(MAX_ROUNDS, math.ceil(TRIAL_SECONDS * len(seconds) / per_round)))


def trial_for(state: Any, key: Hashable, contenders: Sequence[tuple[str, float]]) -> Trial | None:
    """Return the trial of ``key`` in ``state.trials``, started with ``contenders`` on first use (None: none).

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
    c = tuple(contenders)
    trial = None
    if len(c) > 1:
        seconds = [t for _, t in c]
        rounds = rounds_for(seconds)
        if rounds * (sum(seconds) + seconds[0]) <= TRIAL_BUDGET:
            trial = Trial(tuple(a for a, _ in c), rounds)
    kept[key] = trial
    return trial
