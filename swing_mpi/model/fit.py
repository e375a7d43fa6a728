"""Fit the model's constants (α, β and a per-call constant) to measured allreduce times.

Algorithm:
    Given γ (measured apart) and each measured point's algorithm, op class,
    size and median seconds, ``T − γ·n·reduced = c₀ + α·K + β·n·moved`` is
    linear in ``(c₀, α, β)`` with the coefficients of
    :mod:`swing_mpi.model.features`. It is solved by non-negative least
    squares on relative errors (every size weighs the same) once per network
    kind. The kind kept (unless one is forced) is the one whose model picks
    best among the measured algorithms at the measured sizes
    (:func:`pick_regret`), the smaller root-mean-square relative error
    breaking ties. ``c₀`` is the same for every algorithm, so it plays
    no part in a choice; it is fitted so that it does not bias α.

Restrictions:
    A handful of unknowns: :func:`nnls` tries every support set.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from .features import NETWORKS, coefficients

__all__ = ["nnls", "Fit", "fit_constants", "pick_regret"]


def nnls(rows: Sequence[Sequence[float]], y: Sequence[float]) -> tuple[list[float], float]:
    """Solve non-negative least squares for a handful of unknowns (every support set is tried).

    Returns the coefficients and the residual sum of squares.
    """
    import numpy as np

    a = np.asarray(rows, dtype=float)
    b = np.asarray(y, dtype=float)
    n = a.shape[1]
    best, best_rss = [0.0] * n, float(b @ b)
    for k in range(1, n + 1):
        for support in itertools.combinations(range(n), k):
            sub = a[:, support]
            coef, *_ = np.linalg.lstsq(sub, b, rcond=None)
            if np.any(coef < 0):
                continue
            rss = float(np.sum((sub @ coef - b) ** 2))
            if rss < best_rss - 1e-15 * max(1.0, best_rss):
                best_rss = rss
                best = [0.0] * n
                for i, c in zip(support, coef):
                    best[i] = float(c)
    return best, best_rss


@dataclass
class Fit:
    """Fitted constants per network kind, and the kind kept."""

    gamma: float
    constants: dict[str, tuple[float, float, float]]
    """``network -> (alpha, beta, per-call constant)``."""
    rms: dict[str, float]
    """Root-mean-square relative error per network kind."""
    network: str
    forced: bool = False
    regret: dict[str, float] = field(default_factory=dict)
    """Mean log(measured time of the model's pick / measured fastest) per network kind."""

    @property
    def alpha(self) -> float:
        """Seconds per step of the kept network kind."""
        return self.constants[self.network][0]

    @property
    def beta(self) -> float:
        """Seconds per bottleneck byte of the kept network kind."""
        return self.constants[self.network][1]

    @property
    def overhead(self) -> float:
        """Seconds per call, the same for every algorithm: fitted so it does not bias α; no part of the choice."""
        return self.constants[self.network][2]

    def model_s(self, algorithm: str, dims: tuple[int, ...], nbytes: int, exact: bool) -> float:
        """Modelled seconds (with the per-call constant) under the kept network kind."""
        c = coefficients(algorithm, dims, exact=exact, network=self.network)
        return self.overhead + c.time(nbytes, self.alpha, self.beta, self.gamma)


def fit_constants(points: Sequence[tuple[str, bool, int, float]], dims: tuple[int, ...], *, gamma: float,
                  network: str | None = None) -> Fit:
    """Fit α, β and a per-call constant to ``(algorithm, exact, nbytes, seconds)`` points, per network kind."""
    pts = [pt for pt in points if pt[3] > 0]
    if not pts:
        raise ValueError("nothing to fit: no measurements of our algorithms")
    constants, rms = {}, {}
    for net in NETWORKS:
        rows, y = [], []
        for alg, exact, n, t in pts:
            c = coefficients(alg, dims, exact=exact, network=net)
            w = 1.0 / t
            rows.append([c.steps * w, n * c.moved * w, w])
            y.append((t - gamma * n * c.reduced) * w)
        coef, rss = nnls(rows, y)
        constants[net] = (coef[0], coef[1], coef[2])
        rms[net] = math.sqrt(rss / len(rows))
    regret = {net: pick_regret(pts, dims, constants[net], gamma, net) for net in NETWORKS}
    kept = network or min(NETWORKS, key=lambda k: (round(regret[k], 3), rms[k], k))
    return Fit(gamma, constants, rms, kept, forced=network is not None, regret=regret)


def pick_regret(points: Sequence[tuple[str, bool, int, float]], dims: tuple[int, ...],
                constants: tuple[float, float, float], gamma: float, network: str) -> float:
    """Return the mean log of (measured time of the model's pick / measured fastest) over the measured sizes.

    What a network kind is for is choosing: the kind whose model picks the
    measured fastest algorithm (or one close to it) at more sizes is the better
    one, whatever its absolute error (a model can be off by a constant factor
    everywhere and still rank the algorithms right).
    """
    alpha, beta, c0 = constants
    groups: dict[tuple[bool, int], list[tuple[str, float]]] = {}
    for alg, exact, n, t in points:
        groups.setdefault((exact, n), []).append((alg, t))
    logs = []
    for (exact, n), rows in groups.items():
        if len(rows) < 2:
            continue

        def modelled(alg: str, exact: bool = exact, n: int = n) -> float:
            c = coefficients(alg, dims, exact=exact, network=network)
            return c0 + alpha * c.steps + beta * n * c.moved + gamma * n * c.reduced

        pick = min(rows, key=lambda r: (modelled(r[0]), r[0]))
        logs.append(math.log(pick[1] / min(t for _, t in rows)))
    return sum(logs) / len(logs) if logs else 0.0
