"""Schedule generators: pure data, no MPI import.

The registry maps an algorithm name to its builder and its restrictions, as
data (like MPICH's ``coll_algorithms.txt``). :func:`build_schedule` is cached:
a schedule depends only on (algorithm, dims, rank, count, exact).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from .base import COPY, REDUCE, Range, Schedule, Step, Transfer
from .sizes import sizes_only

__all__ = [
    "AlgorithmInfo", "ALGORITHMS", "NATIVE", "AUTO", "build_schedule", "build_sizes", "algorithm_info",
    "Schedule", "Step", "Transfer", "Range", "REDUCE", "COPY",
]


NATIVE = "native"
"""The MPI library's own collective (``MPI_Allreduce``), not a schedule of ours."""
AUTO = "auto"
"""Let the chooser pick among :data:`ALGORITHMS` and :data:`NATIVE`."""
HALVES = ("allreduce", "reduce_scatter", "allgather")
"""``AlgorithmInfo.collectives`` of an algorithm whose reduce-scatter and all-gather halves run alone."""


@dataclass(frozen=True)
class AlgorithmInfo:
    """One registered algorithm: its builder, its restrictions and what it is for."""

    name: str
    target: str
    """``module:function`` of the builder ``(rank, dims, count, **options) -> Schedule``."""
    commutative_only: bool
    """If true, non-commutative ops fall back to ``recdoub`` (order-preserving)."""
    form: str
    """``bandwidth`` or ``latency`` optimal (or ``native``)."""
    summary: str
    """One line on what it does (``swing-mpi schedule`` prints it)."""
    options: tuple[tuple[str, object], ...] = ()
    uses_exact: bool = False
    """Whether the builder takes ``exact=`` (exactly associative op or not)."""
    collectives: tuple[str, ...] = ("allreduce",)
    """The collectives it runs: ``allreduce``, and for bandwidth-optimal ones also
    ``reduce_scatter`` and ``allgather`` (its halves, ``schedule/halves.py``)."""

    def builder(self) -> Callable[..., Schedule]:
        """Import and return the builder named by ``target``."""
        mod, fn = self.target.split(":")
        return getattr(importlib.import_module(mod, __name__), fn)


ALGORITHMS: dict[str, AlgorithmInfo] = {
    info.name: info
    for info in [
        AlgorithmInfo("swing-bw", ".swing:build_swing_bw", True, "bandwidth",
                      "Swing reduce-scatter + all-gather on all 2D ports (plain + mirrored)", collectives=HALVES),
        AlgorithmInfo("swing-bw-1port", ".swing:build_swing_bw", True, "bandwidth",
                      "Swing reduce-scatter + all-gather, one sub-collective (one port a step)",
                      (("ports", 1),), collectives=HALVES),
        AlgorithmInfo("swing-lat", ".swing:build_swing_lat", True, "latency",
                      "Swing, whole vector every step; sides folded to powers of two",
                      uses_exact=True),
        AlgorithmInfo("trivance-bw", ".trivance:build_trivance_bw", True, "bandwidth",
                      "Trivance reduce-scatter + all-gather, both peers at distance 3^k each step, "
                      "on all 2D ports (plain + mirrored)", collectives=HALVES),
        AlgorithmInfo("trivance-lat", ".trivance_lat:build_trivance_lat", True, "latency",
                      "Trivance, whole vector to both peers at distance 3^k each step; "
                      "other sides doubled or folded to powers of three", uses_exact=True),
        AlgorithmInfo("recdoub", ".recdoub:build_recdoub", False, "latency",
                      "recursive doubling (XOR peers), rank-order operands, MPICH fold"),
        AlgorithmInfo("rabenseifner", ".rabenseifner:build_rabenseifner", True, "bandwidth",
                      "recursive halving reduce-scatter + recursive doubling all-gather, one port; "
                      "torus-optimized on power-of-two tori, MPICH fold otherwise", collectives=HALVES),
        AlgorithmInfo("recdoub-mirrored", ".mirrored:build_recdoub_mirrored", True, "bandwidth",
                      "XOR reduce-scatter + all-gather on all 2D ports (plain + mirrored lanes)", collectives=HALVES),
        AlgorithmInfo("ring", ".ring:build_ring", True, "bandwidth",
                      "ring reduce-scatter + all-gather in rank order, 2(p-1) steps, one port", collectives=HALVES),
        AlgorithmInfo("bucket", ".bucket:build_bucket", True, "bandwidth",
                      "ring reduce-scatter along each dimension, all-gather back, on all 2D ports", collectives=HALVES),
        AlgorithmInfo("hamiltonian", ".hamiltonian:build_hamiltonian", True, "bandwidth",
                      "ring reduce-scatter + all-gather along D edge-disjoint Hamiltonian cycles, both ways, "
                      "on all 2D ports; 2(p-1) steps", collectives=HALVES),
    ]
}


def algorithm_info(name: str) -> AlgorithmInfo:
    """Return the registry entry of ``name``; a ``ValueError`` names the known ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        known = ", ".join(sorted(ALGORITHMS))
        raise ValueError(f"unknown algorithm {name!r}; known: {known}") from None


@lru_cache(maxsize=1024)
def build_schedule(algorithm: str, dims: tuple[int, ...], rank: int, count: int, *,
                   exact: bool = True) -> Schedule:
    """Build (or take from the cache) the schedule of ``rank`` for ``count`` elements."""
    info = algorithm_info(algorithm)
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    p = 1
    for d in dims:
        p *= d
    if not 0 <= rank < p:
        raise ValueError(f"rank {rank} is outside a torus of {p} ranks")
    kwargs = dict(info.options)
    if info.uses_exact:
        kwargs["exact"] = exact
    return info.builder()(rank, tuple(dims), count, algorithm=algorithm, **kwargs)


def build_sizes(algorithm: str, dims: tuple[int, ...], rank: int, count: int, *, exact: bool = True) -> Schedule:
    """Build the schedule of ``rank`` with sizes only: every transfer's ranges are one placeholder of its length.

    Peers, steps, actions and element counts are :func:`build_schedule`'s; the ranges are not
    (:mod:`.sizes`), so the result is for readers of message sizes and must never run. Not cached.
    """
    with sizes_only():
        return build_schedule.__wrapped__(algorithm, dims, rank, count, exact=exact)
