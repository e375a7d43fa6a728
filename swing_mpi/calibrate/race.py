"""calibrate's races: more rounds for the candidates a size's first rounds cannot tell apart.

Where the time cap left few rounds, the candidates within :data:`~swing_mpi.choose.CLOSE_FACTOR` of
the fastest of their decision table get rounds of their own; the pick among them is what a median of
a few samples gets wrong. docs/auto.md ("Calibrating") has the measurements behind each rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from ..choose import CLOSE_FACTOR

__all__ = ["narrowed", "race_basis", "to_confirm", "table_groups", "race_groups", "CONTEND_ROUNDS",
           "CONTEND_TIME", "CONFIRM_WITHIN", "CONTEND_FLOOR"]

CONTEND_ROUNDS = 7
"""Contenders get rounds of their own until each has this many samples ..."""
CONTEND_TIME = 3.0
"""... or these rounds have taken this many times ``--point-time`` ..."""
CONFIRM_WITHIN = 2.0
"""A candidate timed once at a size, within this factor of its table's fastest but not within
``CLOSE_FACTOR``, gets a second call before the races are drawn, and with fewer than three calls its
best one decides whether it races: one slow call must not keep it out (shared memory, Open MPI, 16 ranks,
16 MiB: swing-bw-1port took 150 ms in its one round, native 77 ms; head to head swing-bw-1port was the
faster, 1.11-1.17x, in three launches of three)."""
CONTEND_FLOOR = 8.0
"""... or this many seconds, if more: on shared memory (``--point-time`` 1 s) a round of six contenders at
16 MiB on 16 ranks takes 1.6 s with its settling calls, and three samples each ordered two candidates
that a launch of 15 calls each orders the other way (4 launches out of 4)."""

def narrowed(close: Sequence[int], samples: Sequence[Sequence[float]], *, least: int = 3) -> list[int]:
    """Return the contenders still worth rounds: drop each whose every sample is slower than the leader's median.

    ``close``: indices into ``samples`` (each candidate's times so far). The
    leader is the one with the smallest median; a candidate is judged only
    once it has ``least`` samples (three slower samples in a row happen to an
    equal one in one case of eight). The leader's rivals then share the time
    left, so the pick among the two or three that matter gets their samples.
    """
    if len(close) < 2:
        return list(close)
    lead = min(close, key=lambda j: statistics.median(samples[j]))
    bar = statistics.median(samples[lead])
    return [j for j in close if j == lead or len(samples[j]) < least or min(samples[j]) <= bar]


def race_basis(samples: Sequence[Sequence[float]]) -> list[float]:
    """Return the time each candidate races on: its median from three calls on, its best call before."""
    return [statistics.median(x) if len(x) >= 3 else min(x, default=math.inf) for x in samples]


def to_confirm(groups: Sequence[Sequence[int]], samples: Sequence[Sequence[float]], *,
               close: float = CLOSE_FACTOR, within: float = CONFIRM_WITHIN) -> list[int]:
    """Return the candidates to time once more before the races (:data:`CONFIRM_WITHIN`).

    Those timed once, more than ``close`` times their table's fastest but within ``within`` times it.
    """
    basis = race_basis(samples)
    out: set[int] = set()
    for g in groups:
        if not g:
            continue
        lead = min(basis[j] for j in g)
        out |= {j for j in g if len(samples[j]) == 1 and lead * close < basis[j] <= lead * within}
    return sorted(out)


def table_groups(run: Sequence[Any]) -> list[list[int]]:
    """Return, for each decision table :func:`tables_from` builds, the indices into ``run`` of its candidates.

    The inexact table holds every float64 series; the exact table every int64 series plus the float64
    series of the algorithms that have none (their schedule does not depend on exactness), so a series may
    be in both. Contenders are judged within a table: an exact-only leader (swing-lat's reduced form on
    int64) must not hide the close race among the float64 ones.
    """
    inexact = [j for j, s in enumerate(run) if not s.exact]
    exact_algs = {s.algorithm for s in run if s.exact}
    if not exact_algs:
        return [inexact] if inexact else []
    exact = [j for j, s in enumerate(run) if s.exact or s.algorithm not in exact_algs]
    return [g for g in (inexact, exact) if g]


def race_groups(groups: Sequence[Sequence[int]], first: Sequence[float], *,
                close: float = CLOSE_FACTOR) -> list[list[int]]:
    """Return each table's candidates within ``close`` times that table's fastest (``first``: their medians)."""
    out = []
    for g in groups:
        lead = min(first[j] for j in g)
        out.append([j for j in g if first[j] <= lead * close])
    return out
