"""Cost model and congestion simulator, computed from the generated schedules.

:func:`analyze` gives Λ, Ψ and the congestion factor Ξ of any registered
algorithm on a torus, both as the paper's distance proxy and by routing every
message; :func:`predict_time` is ``T(n) = K·α + Σ_k β·m_k·c_k``.
"""

from __future__ import annotations

from .cost import (
    CONGESTION,
    DEFAULT_ALPHA,
    DEFAULT_LINK_BYTES_PER_S,
    PAPER_TABLE2,
    ModelResult,
    StepCost,
    analyze,
    analyze_schedules,
    crossovers,
    default_sizes,
    eq3_penalty,
    figure1,
    format_size,
    parse_size,
    predict_goodput,
    predict_time,
    rectangular_penalty,
)
from .routing import collect_traffic, default_count, route, step_loads

__all__ = [
    "ModelResult", "StepCost", "analyze", "analyze_schedules", "predict_time", "predict_goodput",
    "crossovers", "figure1", "rectangular_penalty", "eq3_penalty", "default_sizes", "parse_size",
    "format_size", "collect_traffic", "step_loads", "route", "default_count",
    "CONGESTION", "DEFAULT_ALPHA", "DEFAULT_LINK_BYTES_PER_S", "PAPER_TABLE2",
]
