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
from typing import Dict, Tuple

from .base import COPY, REDUCE, Range, Schedule, Step, Transfer

__all__ = [
    "AlgorithmInfo", "ALGORITHMS", "NATIVE", "AUTO", "build_schedule", "algorithm_info",
    "Schedule", "Step", "Transfer", "Range", "REDUCE", "COPY",
]


NATIVE = "native"
"""The MPI library's own collective (``MPI_Allreduce``), not a schedule of ours."""
AUTO = "auto"
"""Let the chooser pick among :data:`ALGORITHMS` and :data:`NATIVE`."""


@dataclass(frozen=True)
class AlgorithmInfo:
    name: str
    target: str
    """``module:function`` of the builder ``(rank, dims, count, **options) -> Schedule``."""
    commutative_only: bool
    """If true, non-commutative ops fall back to ``recdoub`` (order-preserving)."""
    form: str
    """``bandwidth`` or ``latency`` optimal (or ``native``)."""
    summary: str
    options: tuple[tuple[str, object], ...] = ()
    uses_exact: bool = False
    """Whether the builder takes ``exact=`` (exactly associative op or not)."""

    def builder(self) -> Callable[..., Schedule]:
        mod, fn = self.target.split(":")
        return getattr(importlib.import_module(mod, __name__), fn)


ALGORITHMS: dict[str, AlgorithmInfo] = {
    info.name: info
    for info in [
        AlgorithmInfo("swing-bw", ".swing:build_swing_bw", True, "bandwidth",
                      "Swing reduce-scatter + all-gather on all 2D ports (plain + mirrored)"),
        AlgorithmInfo("swing-bw-1port", ".swing:build_swing_bw", True, "bandwidth",
                      "Swing reduce-scatter + all-gather, one sub-collective (one port a step)",
                      (("ports", 1),)),
        AlgorithmInfo("swing-lat", ".swing:build_swing_lat", True, "latency",
                      "Swing, whole vector every step; sides folded to powers of two",
                      uses_exact=True),
        AlgorithmInfo("recdoub", ".recdoub:build_recdoub", False, "latency",
                      "recursive doubling (XOR peers), rank-order operands, MPICH fold"),
        AlgorithmInfo("rabenseifner", ".rabenseifner:build_rabenseifner", True, "bandwidth",
                      "recursive halving reduce-scatter + recursive doubling all-gather, one port; "
                      "torus-optimized on power-of-two tori, MPICH fold otherwise"),
        AlgorithmInfo("recdoub-mirrored", ".mirrored:build_recdoub_mirrored", True, "bandwidth",
                      "XOR reduce-scatter + all-gather on all 2D ports (plain + mirrored lanes)"),
        AlgorithmInfo("ring", ".ring:build_ring", True, "bandwidth",
                      "ring reduce-scatter + all-gather in rank order, 2(p-1) steps, one port"),
        AlgorithmInfo("bucket", ".bucket:build_bucket", True, "bandwidth",
                      "ring reduce-scatter along each dimension, all-gather back, on all 2D ports"),
    ]
}


def algorithm_info(name: str) -> AlgorithmInfo:
    try:
        return ALGORITHMS[name]
    except KeyError:
        known = ", ".join(sorted(ALGORITHMS))
        raise ValueError(f"unknown algorithm {name!r}; known: {known}") from None


@lru_cache(maxsize=1024)
def build_schedule(algorithm: str, dims: tuple[int, ...], rank: int, count: int, *,
                   exact: bool = True) -> Schedule:
    """The schedule of ``rank`` for ``count`` elements (cached)."""
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
