"""Simulate our schedules on SimGrid: time, goodput and per-step loads at any scale, with no data moved.

The per-rank schedules (the very objects the executor runs) become host-to-host
transfers on a SimGrid platform (a torus, a HyperX or a non-blocking fat tree)
whose links route and share them; each lane starts a step when its previous
step's receives are in, plus a software cost per step and per byte reduced.
See ``docs/netsim.md``.
"""

from __future__ import annotations

from .params import CPU_MODELS, NETWORKS, PRESETS, PresetError, SimParams, engine_costs, engine_costs_path
from .result import SimResult
from .run import simulate
from .sgload import INSTALL_HINT, SimGridMissingError, simgrid_available

__all__ = ["simulate", "SimParams", "SimResult", "simgrid_available", "PRESETS", "NETWORKS", "CPU_MODELS",
           "PresetError", "SimGridMissingError", "INSTALL_HINT", "engine_costs", "engine_costs_path"]
