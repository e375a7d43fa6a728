"""What one simulation returns: the time, goodput and step-by-step times and link loads."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .params import SimParams

__all__ = ["SimResult"]


@dataclass(frozen=True)
class SimResult:
    """One simulated collective of ``nbytes`` on a network.

    ``step_times[i]`` is global step ``steps[i]``'s share of the time: from the
    moment the last lane finished the step before to the moment the last lane
    finished this one (they add up to ``time_s``). ``busiest_link[i]`` is that
    step's most loaded link (name in our coordinates, bytes, messages).
    """

    algorithm: str
    collective: str
    dims: tuple[int, ...]
    nbytes: int
    params: SimParams
    time_s: float
    steps: tuple[int, ...]
    """Global step indices that move anything."""
    phases: tuple[str, ...]
    step_ends: tuple[float, ...]
    """When the last lane finished each step (seconds from the start)."""
    step_times: tuple[float, ...]
    busiest_link: tuple[dict[str, object], ...]
    lane_step_ends: tuple[tuple[float, ...], ...] = ()
    """``[lane][step]``: when the last rank finished that step of that lane (0 if none has it)."""
    messages: int = 0
    exact: bool = True
    """Whether message sizes are exact (schedules built for the vector's own count, or a multiple scaled)."""
    build_count: int = 0
    symmetry: str = ""
    wall_s: float = 0.0
    """Wall-clock seconds of the whole call (schedules, platform, simulation)."""
    sim_wall_s: float = 0.0
    """Wall-clock seconds inside SimGrid's process."""
    extra: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def network(self) -> str:
        """The network kind."""
        return self.params.network

    @property
    def p(self) -> int:
        """Number of ranks."""
        return math.prod(self.dims)

    @property
    def D(self) -> int:  # noqa: N802 (the paper's symbol)
        """Dimensions with a side longer than 1 (at least 1)."""
        return max(1, sum(1 for d in self.dims if d > 1))

    @property
    def goodput_bytes_per_s(self) -> float:
        """Vector bytes over time."""
        return self.nbytes / self.time_s if self.time_s > 0 else math.inf

    @property
    def peak_bytes_per_s(self) -> float:
        """The paper's peak: ``D`` x link rate (torus, HyperX); one link for the fat tree."""
        links = 1 if self.network == "fattree" else self.D
        return links * self.params.link_bytes_per_s

    @property
    def peak_fraction(self) -> float:
        """Goodput over the peak."""
        return self.goodput_bytes_per_s / self.peak_bytes_per_s

    def to_dict(self, *, steps: bool = False) -> dict[str, object]:
        """Return the result as a flat dict (for JSON); ``steps`` adds the per-step lists."""
        out: dict[str, object] = {
            "algorithm": self.algorithm,
            "collective": self.collective,
            "bytes": self.nbytes,
            "time_s": self.time_s,
            "goodput_bytes_per_s": self.goodput_bytes_per_s,
            "peak_bytes_per_s": self.peak_bytes_per_s,
            "peak_fraction": self.peak_fraction,
            "network": self.network,
            "dims": "x".join(map(str, self.dims)),
            "p": self.p,
            "link_bps": self.params.link_bps,
            "latency_s": self.params.latency_s,
            "hop_s": self.params.hop_s,
            "alpha_s": self.params.alpha_s,
            "gamma_s_per_byte": self.params.gamma_s_per_byte,
            "cpu": self.params.cpu,
            "threads": self.params.threads,
            "segment_bytes": self.params.segment_bytes,
            "itemsize": self.params.itemsize,
            "nsteps": len(self.steps),
            "messages": self.messages,
            "exact": self.exact,
            "wall_s": round(self.wall_s, 3),
            "sim_wall_s": round(self.sim_wall_s, 3),
        }
        if steps:
            out["steps"] = [{"step": k, "phase": ph, "end_s": e, "time_s": t, "busiest_link": b}
                            for k, ph, e, t, b in zip(self.steps, self.phases, self.step_ends, self.step_times,
                                                      self.busiest_link)]
        return out
