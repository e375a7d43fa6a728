"""Per-algorithm cost coefficients for choosing an algorithm: ``T(n) = K·α + n·(moved·β + reduced·γ)``.

Algorithm:
    An algorithm's cost on a torus is read from its generated schedules once
    per (algorithm, dims, exact, network, part) and kept as three numbers, so
    that pricing any vector size afterwards is O(1)::

        T(n) = K·α + n·(moved·β + reduced·γ)

        K        α count: steps that move data
        moved    bytes on the bottleneck, summed over steps, per vector byte
        reduced  bytes reduced by the busiest rank, summed over steps, per vector byte

    The bottleneck depends on the network:

    ``flat`` (shared memory, one switch): no link is shared, each rank's own
        messages are the bottleneck and one process works its lanes one after
        the other. ``K`` counts every busy lane in every step, ``moved`` every
        lane's bytes (the larger of sent and received), both the worst of
        rank 0 and rank ``p−1`` (the rank that folds on non-power-of-two sides).
    ``torus``: messages share links. Every message of every rank is routed
        (:mod:`.routing`: minimal, dimension order) and ``moved`` is the
        busiest directed link's bytes per step, summed; ``K`` counts the steps
        in which anyone sends (lanes run at once, on their own ports).

    ``part`` prices a half of the allreduce: ``reduce_scatter`` keeps the
    transfers whose received data is reduced, ``allgather`` those that copy.

    The schedules are built once with ``p·lcm(1…2D)`` elements (whole lanes
    and blocks) and scaled linearly; a tiny vector's real schedule may have
    fewer busy steps, so ``K·α`` is an upper bound there.

Lower bound:
    Routing every message of a large torus takes longer than reading two
    ranks' schedules. :func:`lower_bound` is the torus cost with ``moved`` =
    the largest single message per step (that message alone occupies its
    first link for the step) and ``K`` from the two probed ranks: never more
    than the routed cost, so a chooser can route only the candidates whose
    bound beats the best routed cost found so far.

Restrictions:
    Pure data: no MPI. Every result is cached per process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from ..schedule import build_schedule
from ..schedule.base import COPY, REDUCE, Schedule
from .cost import analyze_schedules
from .routing import default_count

__all__ = ["NETWORKS", "PARTS", "Coefficients", "coefficients", "lower_bound", "probe_counts", "ProbeCounts"]

NETWORKS = ("torus", "flat")
"""Network kinds the model knows: links shared between messages (``torus``) or not (``flat``)."""
PARTS = ("allreduce", "reduce_scatter", "allgather")
"""Which transfers of an allreduce schedule are priced."""


@dataclass(frozen=True)
class Coefficients:
    """``T(n) = steps·α + n·(moved·β + reduced·γ)`` for one algorithm on one torus and network."""

    algorithm: str
    dims: tuple[int, ...]
    network: str
    steps: int
    """α count."""
    moved: float
    """Bytes on the bottleneck per vector byte, summed over steps."""
    reduced: float
    """Bytes reduced per vector byte, summed over steps (the busiest probed rank)."""
    bound: bool = False
    """A lower bound (:func:`lower_bound`), not the cost."""

    def time(self, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
        """Modelled seconds for a vector of ``nbytes``."""
        return self.steps * alpha + nbytes * (self.moved * beta + self.reduced * gamma)


@dataclass(frozen=True)
class ProbeCounts:
    """What rank 0 and rank ``p−1`` do (the worst of the two per step), per vector element."""

    steps: int
    """Steps in which a probed rank moves data."""
    lane_steps: int
    """Busy lanes summed over steps."""
    all_lanes: float
    """Elements moved by all lanes (larger of sent and received), summed over steps."""
    largest_message: float
    """The largest single message of the step, summed over steps."""
    reduced: float
    """Elements reduced, summed over steps and lanes (a final combine counts ``slots − 1`` vectors)."""


def _check(algorithm: str, dims: tuple[int, ...], network: str, part: str) -> None:
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {network!r}")
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if not dims or any(int(d) < 1 for d in dims):
        raise ValueError(f"bad torus dims {dims!r}")


def _keep(action: str, part: str) -> bool:
    if part == "reduce_scatter":
        return action == REDUCE
    if part == "allgather":
        return action == COPY
    return True


def _part_of(s: Schedule, part: str) -> Schedule:
    """Keep only the transfers of ``part`` (steps kept, so step indices still match)."""
    if part == "allreduce":
        return s
    lanes = tuple(tuple(replace(st, transfers=tuple(t for t in st.transfers if _keep(t.action, part)),
                                combine=st.combine and part == "reduce_scatter")
                        for st in lane) for lane in s.lanes)
    return replace(s, lanes=lanes)


def _reference_count(dims: tuple[int, ...]) -> int:
    return default_count(dims)


@lru_cache(maxsize=1024)
def probe_counts(algorithm: str, dims: tuple[int, ...], exact: bool, part: str = "allreduce") -> ProbeCounts:
    """Per-element step, byte and reduction counts of rank 0 and rank ``p−1`` (cached)."""
    dims = tuple(int(d) for d in dims)
    _check(algorithm, dims, "flat", part)
    p = math.prod(dims)
    if p <= 1:
        return ProbeCounts(0, 0, 0.0, 0.0, 0.0)
    count = _reference_count(dims)
    scheds = [_part_of(build_schedule(algorithm, dims, r, count, exact=exact), part) for r in (0, p - 1)]
    steps = lane_steps = 0
    all_lanes = largest = reduced = 0
    for k in range(max(s.nsteps for s in scheds)):
        busy_k = moved_k = big_k = red_k = 0
        for s in scheds:
            busy = moved = red = 0
            for lane in s.lanes:
                if k >= len(lane):
                    continue
                st = lane[k]
                sent = recv = 0
                for t in st.transfers:
                    sc, rc = t.send_count, t.recv_count
                    sent += sc
                    recv += rc
                    big_k = max(big_k, sc, rc)
                    if t.action == REDUCE:
                        red += rc
                if st.combine:
                    red += (s.slots - 1) * s.count
                m = max(sent, recv)
                busy += m > 0
                moved += m
            busy_k = max(busy_k, busy)
            moved_k = max(moved_k, moved)
            red_k = max(red_k, red)
        steps += busy_k > 0
        lane_steps += busy_k
        all_lanes += moved_k
        largest += big_k
        reduced += red_k
    return ProbeCounts(steps, lane_steps, all_lanes / count, largest / count, reduced / count)


@lru_cache(maxsize=1024)
def _routed(algorithm: str, dims: tuple[int, ...], exact: bool, part: str) -> tuple[int, float]:
    """Route every message: return (steps with any message, Σ busiest-link elements per vector element)."""
    count = _reference_count(dims)

    def get(rank: int) -> Schedule:
        return _part_of(build_schedule(algorithm, dims, rank, count, exact=exact), part)

    res = analyze_schedules(get, dims, name=algorithm, count=count)
    return res.K, res.load("routed")


@lru_cache(maxsize=1024)
def coefficients(algorithm: str, dims: tuple[int, ...], *, exact: bool, network: str,
                 part: str = "allreduce") -> Coefficients:
    """Return the cost coefficients of ``algorithm`` on ``dims`` (cached; see the module docstring)."""
    dims = tuple(int(d) for d in dims)
    _check(algorithm, dims, network, part)
    pc = probe_counts(algorithm, dims, exact, part)
    if math.prod(dims) <= 1:
        return Coefficients(algorithm, dims, network, 0, 0.0, 0.0)
    if network == "flat":
        return Coefficients(algorithm, dims, network, pc.lane_steps, pc.all_lanes, pc.reduced)
    k, link = _routed(algorithm, dims, exact, part)
    return Coefficients(algorithm, dims, network, k, link, pc.reduced)


@lru_cache(maxsize=1024)
def lower_bound(algorithm: str, dims: tuple[int, ...], *, exact: bool, part: str = "allreduce") -> Coefficients:
    """Return a torus cost never above :func:`coefficients` ``(network="torus")``, from two ranks' schedules."""
    dims = tuple(int(d) for d in dims)
    pc = probe_counts(algorithm, dims, exact, part)
    return Coefficients(algorithm, dims, "torus", pc.steps, pc.largest_message, pc.reduced, bound=True)
