"""The paper's cost model, computed step by step from our own schedules.

Algorithm:
    For an algorithm on a torus with ``p`` ranks and ``D`` dimensions (sides
    of length 1 do not count), :func:`analyze` reads every global step ``k``
    of the generated schedules (:mod:`.routing`) and keeps, per byte of the
    vector: ``m_k`` (bytes on the busiest port), the distance-proxy cost and
    the routed busiest-link load. Then, exactly as the paper's Eq. 1::

        T(n) = K·α + β·Σ_k load_k·n  =  log2(p)·α·Λ + (n/D)·β·Ψ·Ξ

        K  = steps that send anything        Λ = K / log2 p
        Ψ  = Σ_k m_k / ((n/D)·(p−1)/p)         (1: 2n(p−1)/p bytes spread over all 2D ports)
        Ξ  = Σ_k load_k / ((n/D)·Ψ)            (load_k = m_k·c_k, or routed)

    With this normalisation bandwidth-optimal Swing on a power-of-two torus
    has ``Ψ = 1`` and ``Ξ = Σ_s δ(⌊s/D⌋)/2^{s+1}`` exactly (the paper's equation,
    which includes the ``(p−1)/p`` of the last block), and torus-optimized
    Rabenseifner ``Ψ = 2D``, ``Ξ = Σ_s 2^{⌊s/D⌋}/2^{s+1}``: each reduce-scatter
    step ``s`` of Swing puts ``n/(2D·2^{s+1})`` bytes on each of the ``2D``
    ports for ``δ`` hops, the all-gather repeats it, so
    ``Σ_k m_k·c_k = 2·Σ_s n·δ/(2D·2^{s+1}) = (n/D)·Ξ``.

    ``congestion="distance"`` is the paper's proxy (``c_k`` = peer distance,
    assumed to be the number of messages on the busiest link);
    ``congestion="routed"`` routes every message (minimal, dimension-order,
    ties at ``d/2`` the ``+`` way) and takes the true busiest-link bytes,
    which is never more for Swing and can be less (Figure 1).
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from ..schedule import ALGORITHMS, HALVES, build_sizes
from ..schedule.base import COPY, REDUCE, Schedule
from ..topology import Torus, parse_dims
from ..units import format_size, parse_size
from .routing import StepLoad, collect_traffic, default_count, step_loads

__all__ = [
    "ModelResult", "StepCost", "analyze", "analyze_schedules", "predict_time", "predict_goodput",
    "default_sizes", "parse_size", "format_size", "crossovers", "figure1", "rectangular_penalty",
    "eq3_penalty", "CONGESTION", "PAPER_TABLE2", "DEFAULT_ALPHA", "DEFAULT_LINK_BYTES_PER_S", "PARTS", "part_of",
]

CONGESTION = ("routed", "distance")
DEFAULT_ALPHA = 1.5e-6
"""Seconds per step (the value the Trivance paper uses when it reruns Swing's simulator)."""
DEFAULT_LINK_BYTES_PER_S = 400e9 / 8
"""400 Gb/s, the paper's simulated links."""

PAPER_TABLE2 = {
    # Ξ, bandwidth-optimal rows of the paper's Table 2 (large p), by D
    "swing-bw": {2: 1.19, 3: 1.03, 4: 1.008},
    "rabenseifner": {2: 1.5, 3: 1.17, 4: 1.07},
}


PARTS = HALVES
"""Which transfers of an allreduce schedule are priced: all, or one half (its own collective)."""


def _keep(action: str, part: str) -> bool:
    if part == "reduce_scatter":
        return action == REDUCE
    if part == "allgather":
        return action == COPY
    return True


def part_of(s: Schedule, part: str) -> Schedule:
    """Keep only the transfers of ``part`` of an allreduce schedule (steps kept, so indices still match).

    The reduce-scatter half is the transfers that reduce, the all-gather half
    those that copy: for the bandwidth-optimal schedules these are the two
    collectives on their own (:mod:`swing_mpi.schedule.halves`).
    """
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if part == "allreduce":
        return s
    lanes = tuple(tuple(replace(st, transfers=tuple(t for t in st.transfers if _keep(t.action, part)),
                                combine=st.combine and part == "reduce_scatter")
                        for st in lane) for lane in s.lanes)
    return replace(s, lanes=lanes)


StepCost = StepLoad
"""A global step's loads; in a :class:`ModelResult` they are per element of the vector
(multiply by the vector's bytes for bytes): ``port`` is ``m_k/n``, ``distance`` the
proxy ``m_k·c_k/n``, ``link`` the routed busiest-link load ``/n``."""


@dataclass(frozen=True)
class ModelResult:
    """Λ, Ψ, Ξ and the step-by-step loads of one algorithm on one torus."""

    algorithm: str
    dims: tuple[int, ...]
    steps: tuple[StepCost, ...]
    symmetry: str
    """How the ranks were covered: ``parity``, ``periodic`` or ``full`` (see :mod:`.routing`)."""
    built: int
    """Schedules built (out of ``p``)."""
    count: int
    seconds: float
    meta: dict[str, object] = field(default_factory=dict, compare=False)
    part: str = "allreduce"
    """``allreduce``, or the half priced alone (``reduce_scatter``, ``allgather``): a half's
    minimum is half an allreduce's bytes, so Ψ, Ξ and the ceiling are taken against that."""

    @property
    def _share(self) -> float:
        return 1.0 if self.part == "allreduce" else 0.5

    # -- sizes -------------------------------------------------------------
    @property
    def p(self) -> int:
        """Number of ranks."""
        return math.prod(self.dims)

    @property
    def D(self) -> int:  # noqa: N802 (the paper's symbol)
        """Dimensions with a side longer than 1 (at least 1)."""
        return max(1, sum(1 for d in self.dims if d > 1))

    @property
    def K(self) -> int:  # noqa: N802 (the paper's symbol)
        """Steps that send anything (each costs one α)."""
        return len(self.steps)

    @property
    def log2p(self) -> float:
        """``log2 p`` (0 for one rank)."""
        return math.log2(self.p) if self.p > 1 else 0.0

    # -- the paper's factors ----------------------------------------------
    @property
    def Lambda(self) -> float:  # noqa: N802 (the paper's symbol)
        """``Λ = K / log2 p``."""
        return self.K / self.log2p if self.p > 1 else 0.0

    @property
    def port_bytes(self) -> float:
        """``Σ_k m_k / n``: bytes through the busiest port, summed over steps."""
        return sum(s.port for s in self.steps)

    @property
    def Psi(self) -> float:  # noqa: N802 (the paper's symbol)
        """``Ψ``: bytes through the busiest port over ``(n/D)·(p−1)/p``."""
        if self.p <= 1:
            return 0.0
        return self.port_bytes / self._share / ((1.0 / self.D) * (self.p - 1) / self.p)

    def load(self, congestion: str = "routed") -> float:
        """``Σ_k load_k / n``: the bandwidth term is ``β·n·load``."""
        _check_congestion(congestion)
        return sum(s.load(congestion) for s in self.steps)

    def Xi(self, congestion: str = "routed") -> float:  # noqa: N802 (the paper's symbol)
        """``Ξ``: the bandwidth term over ``(n/D)·Ψ``, routed or by the distance proxy."""
        if self.Psi == 0:
            return 0.0
        return self.load(congestion) / self._share / (self.Psi / self.D)

    @property
    def Xi_distance(self) -> float:  # noqa: N802 (the paper's symbol)
        """``Ξ`` by the paper's distance proxy."""
        return self.Xi("distance")

    @property
    def Xi_routed(self) -> float:  # noqa: N802 (the paper's symbol)
        """``Ξ`` with every message routed on the torus."""
        return self.Xi("routed")

    def ceiling(self, congestion: str = "routed") -> float:
        """Large-vector goodput as a fraction of the peak (``D × link rate`` for allreduce, twice that for a half).

        That is ``1/(Ψ·Ξ)``.
        """
        ld = self.load(congestion) / self._share
        return 1.0 / (self.D * ld) if ld else float("inf")

    # -- time -----------------------------------------------------------------
    def time(self, nbytes: float, *, alpha: float = DEFAULT_ALPHA,
             link_bytes_per_s: float = DEFAULT_LINK_BYTES_PER_S, congestion: str = "routed") -> float:
        """``T(n) = K·α + Σ_k β·load_k·n`` in seconds."""
        return self.K * alpha + self.load(congestion) * nbytes / link_bytes_per_s

    def goodput(self, nbytes: float, **kw) -> float:
        """Vector bytes per second, ``n / T(n)``."""
        t = self.time(nbytes, **kw)
        return nbytes / t if t > 0 else float("inf")

    def first_steps(self, k: int, congestion: str = "routed") -> float:
        """Bandwidth cost of the first ``k`` steps in units of ``n·β``."""
        return sum(s.load(congestion) for s in self.steps[:k])

    def to_dict(self) -> dict[str, object]:
        """Return the factors and ceilings as a flat dict (for JSON)."""
        return {
            "algorithm": self.algorithm,
            "collective": self.part,
            "dims": "x".join(map(str, self.dims)),
            "p": self.p,
            "D": self.D,
            "steps": self.K,
            "Lambda": self.Lambda,
            "Psi": self.Psi,
            "Xi_distance": self.Xi_distance,
            "Xi_routed": self.Xi_routed,
            "ceiling_distance": self.ceiling("distance"),
            "ceiling_routed": self.ceiling("routed"),
            "symmetry": self.symmetry,
            "schedules_built": self.built,
            "model_seconds": round(self.seconds, 3),
        }


def _check_congestion(c: str) -> None:
    if c not in CONGESTION:
        raise ValueError(f"congestion must be 'routed' or 'distance', got {c!r}")


def analyze_schedules(
    get_schedule: Callable[[int], Schedule],
    dims,
    *,
    name: str = "custom",
    count: int | None = None,
    symmetry: str = "auto",
    verify: int = 8,
) -> ModelResult:
    """:class:`ModelResult` of any schedule family: ``get_schedule(rank)`` built for ``count`` elements.

    ``count`` must be what ``get_schedule`` builds with (default
    :func:`~.routing.default_count`); loads are divided by it.
    """
    torus = Torus(parse_dims(dims))
    if count is None:
        count = default_count(torus.dims)
    t0 = _time.perf_counter()
    traffic = collect_traffic(get_schedule, torus.dims, count, symmetry=symmetry, verify=verify)
    loads = step_loads(traffic)
    steps = tuple(_scale(s, count) for s in loads)
    return ModelResult(name, torus.dims, steps, traffic.symmetry, traffic.built, count,
                       _time.perf_counter() - t0, dict(traffic.meta))


def _scale(s: StepLoad, count: int) -> StepLoad:
    return s.scaled(1.0 / count)


@lru_cache(maxsize=256)
def _analyze(algorithm: str, dims: tuple[int, ...], symmetry: str, count: int | None, part: str) -> ModelResult:
    if algorithm not in ALGORITHMS:
        known = ", ".join(sorted(ALGORITHMS))
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {known}")
    c = default_count(dims) if count is None else count

    if part != "allreduce" and part not in ALGORITHMS[algorithm].collectives:
        raise ValueError(f"{algorithm} has no {part} half")

    def get(rank: int) -> Schedule:
        return part_of(build_sizes(algorithm, dims, rank, c), part)

    res = analyze_schedules(get, dims, name=algorithm, count=c, symmetry=symmetry)
    return replace(res, part=part)


def analyze(algorithm: str, dims, *, symmetry: str = "auto", count: int | None = None,
            part: str = "allreduce") -> ModelResult:
    """Λ, Ψ, Ξ (both ways) and step loads of a registered algorithm on ``dims`` (cached).

    ``part``: the whole allreduce, or one of its halves priced as its own collective
    (``reduce_scatter``, ``allgather``; :data:`PARTS`).
    """
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    return _analyze(algorithm, parse_dims(dims), symmetry, count, part)


def predict_time(algorithm: str, dims, nbytes: float, *, alpha: float = DEFAULT_ALPHA,
                 link_bytes_per_s: float = DEFAULT_LINK_BYTES_PER_S, congestion: str = "routed") -> float:
    """Model time in seconds of one allreduce of ``nbytes`` (what benchmarks draw as the model line)."""
    return analyze(algorithm, dims).time(nbytes, alpha=alpha, link_bytes_per_s=link_bytes_per_s,
                                         congestion=congestion)


def predict_goodput(algorithm: str, dims, nbytes: float, **kw) -> float:
    """Model goodput ``n / T(n)`` in bytes per second."""
    return nbytes / predict_time(algorithm, dims, nbytes, **kw)


# -- sizes ---------------------------------------------------------------------

def default_sizes() -> list[int]:
    """32 B … 2 GiB, powers of two (the paper's range)."""
    return [1 << e for e in range(5, 32)]


# -- crossovers (the paper's Panel 1) ---------------------------------------------


def _cross(a: ModelResult, b: ModelResult, alpha: float, rate: float, congestion: str) -> float | None:
    """Size from which ``b`` is faster than ``a`` (when ``b`` has more steps and fewer bytes)."""
    ka, kb = a.K * alpha, b.K * alpha
    la, lb = a.load(congestion) / rate, b.load(congestion) / rate
    if la <= lb:
        return None if kb >= ka else 0.0
    return max(0.0, (kb - ka) / (la - lb))


def crossovers(results: Sequence[ModelResult], *, alpha: float = DEFAULT_ALPHA,
               link_bytes_per_s: float = DEFAULT_LINK_BYTES_PER_S, congestion: str = "routed",
               sizes: Sequence[int] | None = None) -> dict[str, object]:
    """Compute what the paper's Panel 1 reports, for the algorithms given.

    ``fastest``: ``[(size, algorithm), …]`` over ``sizes``; ``fastest_ranges``:
    the same as runs ``(from, to, algorithm)``; ``swing_bw``: Ξ and ceiling;
    ``lat_to_bw``: size where swing-lat hands over to swing-bw (exact, bytes);
    ``passes_swing_bw``: per bucket/ring, the size from which it beats swing-bw;
    ``swing_passes_trivance``: per form (``bw``, ``lat``), the size from which Swing's form beats
    Trivance's (fewer bytes on the busiest link against more steps; 0: everywhere, None: nowhere).
    Keys are ``None`` or absent where an algorithm is missing.
    """
    sizes = list(sizes) if sizes is not None else default_sizes()
    kw: dict[str, Any] = dict(alpha=alpha, link_bytes_per_s=link_bytes_per_s, congestion=congestion)
    by = {r.algorithm: r for r in results}
    fastest = []
    for n in sizes:
        best = min(results, key=lambda r: r.time(n, **kw))
        fastest.append((n, best.algorithm))
    ranges: list[tuple[int, int, str]] = []
    for n, a in fastest:
        if ranges and ranges[-1][2] == a:
            ranges[-1] = (ranges[-1][0], n, a)
        else:
            ranges.append((n, n, a))
    out: dict[str, object] = {"congestion": congestion, "alpha": alpha, "link_bytes_per_s": link_bytes_per_s,
                              "fastest": fastest, "fastest_ranges": ranges}
    bw = by.get("swing-bw")
    out["swing_bw"] = None if bw is None else {
        "Xi": bw.Xi(congestion), "Psi": bw.Psi, "ceiling": bw.ceiling(congestion)}
    lat = by.get("swing-lat")
    out["lat_to_bw"] = _cross(lat, bw, alpha, link_bytes_per_s, congestion) if lat and bw else None
    passes: dict[str, float | None] = {}
    if bw is not None:
        for name in ("bucket", "ring"):
            if name in by:
                passes[name] = _cross(bw, by[name], alpha, link_bytes_per_s, congestion)
    out["passes_swing_bw"] = passes
    trivance: dict[str, float | None] = {}
    for form in ("bw", "lat"):
        sw, tv = by.get(f"swing-{form}"), by.get(f"trivance-{form}")
        if sw is not None and tv is not None:
            trivance[form] = _cross(tv, sw, alpha, link_bytes_per_s, congestion)
    out["swing_passes_trivance"] = trivance
    return out


# -- the paper's worked examples ----------------------------------------------------


def figure1(ring: int = 16, steps: int = 3,
            algorithms: Sequence[str] = ("rabenseifner", "swing-bw-1port"),
            congestion: str = "routed") -> dict[str, dict[str, object]]:
    """Figure 1: first ``steps`` reduce-scatter steps on a ``ring``-node ring, in units of ``nβ``.

    Per algorithm: ``link_messages`` (messages on the busiest link per step),
    ``loads`` (busiest-link bytes / n per step) and ``total`` (their sum).
    """
    out = {}
    for alg in algorithms:
        r = analyze(alg, (ring,))
        st = r.steps[:steps]
        out[alg] = {"link_messages": [s.link_messages for s in st],
                    "loads": [s.load(congestion) for s in st],
                    "total": sum(s.load(congestion) for s in st)}
    return out


def eq3_penalty(dims: Sequence[int]) -> float:
    """Return the paper's Eq. 3 approximation ``log2(dmax/dmin) / (6·dmin^(D−1))`` (for comparison only)."""
    d = [x for x in dims if x > 1]
    return math.log2(max(d) / min(d)) / (6 * min(d) ** (len(d) - 1))


def rectangular_penalty(shapes: Iterable[Sequence[int]] = ((64, 16), (128, 8), (256, 4)),
                        algorithm: str = "swing-bw", congestion: str = "distance") -> list[dict[str, object]]:
    """Measure what our schedules give for rectangular tori, beside the paper's Eq. 3.

    Per shape: ``Xi`` and ``Psi`` of the rectangle; ``PsiXi`` their product (the
    bandwidth term in units of ``(n/D)·β``); ``shared_ports``: the part of
    ``PsiXi`` that comes from lanes sharing a port once the short dimensions
    are exhausted (the distance proxy with and without summing lanes per
    port), the effect Eq. 3 approximates; ``extra_vs_square``: ``PsiXi`` minus
    that of the square torus with the same ``p`` (also counts the longer
    in-dimension distances of the long side); ``eq3``: the paper's Eq. 3.
    """
    rows = []
    for dims in shapes:
        dims = tuple(dims)
        p = math.prod(dims)
        D = len(dims)
        side = round(p ** (1 / D))
        square = (side,) * D if side ** D == p else None
        r = analyze(algorithm, dims)
        unshared = sum(s.lane_distance for s in r.steps)
        row: dict[str, object] = {
            "dims": "x".join(map(str, dims)), "Xi": r.Xi(congestion), "Psi": r.Psi,
            "PsiXi": r.Psi * r.Xi(congestion),
            "shared_ports": (r.load("distance") - unshared) * r.D,
            "eq3": eq3_penalty(dims)}
        if square:
            sq = analyze(algorithm, square)
            row["square"] = "x".join(map(str, square))
            row["Xi_square"] = sq.Xi(congestion)
            row["extra_vs_square"] = r.Psi * r.Xi(congestion) - sq.Psi * sq.Xi(congestion)
        rows.append(row)
    return rows
