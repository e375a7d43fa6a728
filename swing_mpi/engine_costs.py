"""The engine's measured software costs, as the simulator's ``engine`` preset reads them.

``swing-mpi probe`` (:mod:`swing_mpi.probe`) measures them and writes a small
JSON file; this module only reads it, so the simulator (:mod:`swing_mpi.netsim`)
gets its costs without importing the probe or the benchmark code.
:func:`load_engine_costs` reads ``$SWING_MPI_ENGINE_COSTS`` if set, else
``~/.config/swing_mpi/engine_costs.json`` if it exists, else the built-in
:data:`DEFAULT_ENGINE` (measured on the development machine; the file it came
from is in ``benchmarks/results/scale/engine-probe.json``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import rc

__all__ = ["EngineCosts", "DEFAULT_ENGINE", "default_engine_path", "load_engine_costs"]


@dataclass(frozen=True)
class EngineCosts:
    """Measured software costs: per lane and step (lanes in series), per reduced byte, and the parts."""

    alpha_s: float
    gamma_s_per_byte: float
    alpha_1lane_s: float | None = None
    alpha_lane_s: float | None = None
    c_gamma_s_per_byte: float | None = None
    mpi_step_s: float | None = None
    source: str = "built-in"
    info: dict[str, Any] = field(default_factory=dict, compare=False)


DEFAULT_ENGINE = EngineCosts(alpha_s=27.8e-6, gamma_s_per_byte=0.262e-9, alpha_1lane_s=18.0e-6, alpha_lane_s=31.0e-6,
                             c_gamma_s_per_byte=0.180e-9, mpi_step_s=4.0e-6,
                             source="built-in (benchmarks/results/scale/engine-probe.json)")
"""The development machine's numbers (2 cores, MPICH over shared memory); see :mod:`swing_mpi.probe`."""


def default_engine_path() -> Path:
    """``$XDG_CONFIG_HOME/swing_mpi/engine_costs.json`` (``~/.config/swing_mpi/engine_costs.json``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "swing_mpi" / "engine_costs.json"


def _from_dict(data: dict[str, Any], source: str) -> EngineCosts:
    try:
        alpha = float(data["alpha_s"])
        gamma = float(data["gamma_s_per_byte"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{source}: needs numbers alpha_s and gamma_s_per_byte ({e})") from None
    if not (alpha >= 0 and gamma >= 0):
        raise ValueError(f"{source}: alpha_s and gamma_s_per_byte must be >= 0")

    def opt(key: str) -> float | None:
        v = data.get(key)
        return None if v is None else float(v)

    return EngineCosts(alpha_s=alpha, gamma_s_per_byte=gamma, alpha_1lane_s=opt("alpha_1lane_s"),
                       alpha_lane_s=opt("alpha_lane_s"), c_gamma_s_per_byte=opt("c_gamma_s_per_byte"),
                       mpi_step_s=opt("mpi_step_s"),
                       source=source, info=dict(data.get("info") or {}))


def load_engine_costs(path: str | os.PathLike[str] | None = None) -> EngineCosts:
    """Return the engine's costs: ``path``, ``$SWING_MPI_ENGINE_COSTS``, the default file, or :data:`DEFAULT_ENGINE`.

    An explicit path or the environment variable must name a readable file;
    the default file is used only if it exists.
    """
    named = path if path is not None else rc.engine_costs
    p = Path(named) if named is not None else default_engine_path()
    if named is None and not p.exists():
        return DEFAULT_ENGINE
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read engine costs {p}: {e}") from None
    return _from_dict(data, str(p))
