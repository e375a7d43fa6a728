"""The engine's measured software costs, as the simulator's ``engine`` preset reads them.

``swing-mpi probe`` (:mod:`swing_mpi.probe`) measures them and writes a small
JSON file; this module only reads it, so the simulator (:mod:`swing_mpi.netsim`)
gets its costs without importing the probe or the benchmark code.
:func:`load_engine_costs` reads ``$SWING_MPI_ENGINE_COSTS`` if set, else
``~/.config/swing_mpi/engine_costs.json`` if it exists, else the built-in
:data:`DEFAULT_ENGINE` (measured with the compiled engine; the file it came from
is ``benchmarks/results/engine/probe.json``; the interpreted executor's older
numbers stay in ``benchmarks/results/scale/engine-probe.json``).

The file keeps its first keys with their meaning (``alpha_s``: a lane's share of
a 4-lane step, ``alpha_1lane_s``, ``alpha_lane_s``, ``mpi_step_s``,
``gamma_s_per_byte``: our kernel on 1 thread, one rank alone,
``c_gamma_s_per_byte``: numpy's ``add``, one rank alone) and may add: ``step_s``
(a whole step of ``lanes`` lanes), ``lanes``, ``lanes_together`` (the lanes of a
step are posted at once and the rank advances in lockstep),
``gamma_threads_s_per_byte`` (``{"k": s/B}``: our kernel on ``k`` threads, one
rank alone), ``gamma_pair_s_per_byte`` and ``c_gamma_pair_s_per_byte`` (both
ranks reducing at once), ``overlap`` (0..1, the measured fraction of a segmented
step's reduction hidden behind its transfer), ``segment_bytes`` and ``engine``
(``"c"`` or ``"python"``). Every one is optional; a file without them reads as
before.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import rc

__all__ = ["EngineCosts", "DEFAULT_ENGINE", "default_engine_path", "load_engine_costs", "parse_engine_costs"]


@dataclass(frozen=True)
class EngineCosts:
    """Measured software costs: per lane and step, per reduced byte, and the parts (see the module's docstring)."""

    alpha_s: float
    gamma_s_per_byte: float
    alpha_1lane_s: float | None = None
    alpha_lane_s: float | None = None
    c_gamma_s_per_byte: float | None = None
    mpi_step_s: float | None = None
    source: str = "built-in"
    info: dict[str, Any] = field(default_factory=dict, compare=False)
    step_s: float | None = None
    """A whole step of :attr:`lanes` lanes."""
    lanes: int | None = None
    lanes_together: bool = False
    """Whether a step's lanes are posted together and the rank advances in lockstep (the compiled engine)."""
    gamma_threads_s_per_byte: tuple[tuple[int, float], ...] = ()
    """``((threads, s/B), ...)`` by thread count: our kernel on that many threads, one rank alone."""
    gamma_pair_s_per_byte: float | None = None
    c_gamma_pair_s_per_byte: float | None = None
    overlap: float | None = None
    """Measured fraction (0..1) of a segmented step's reduction hidden behind its transfer; None: not measured."""
    segment_bytes: int | None = None
    engine: str | None = None
    """``"c"`` (the compiled core) or ``"python"``; None: not recorded."""


DEFAULT_ENGINE = EngineCosts(alpha_s=0.340e-6, gamma_s_per_byte=0.0582e-9, alpha_1lane_s=0.731e-6,
                             alpha_lane_s=0.209e-6, c_gamma_s_per_byte=0.0517e-9, mpi_step_s=1.93e-6,
                             source="built-in (benchmarks/results/engine/probe.json)",
                             step_s=1.36e-6, lanes=4, lanes_together=True,
                             gamma_threads_s_per_byte=((1, 0.0592e-9), (2, 0.0398e-9)),
                             gamma_pair_s_per_byte=0.0847e-9, c_gamma_pair_s_per_byte=0.0937e-9, overlap=0.0,
                             segment_bytes=1 << 20, engine="c")
"""Measured with ``swing-mpi probe`` (the compiled engine, 2 ranks, MPICH over shared memory, 2026-12-07, the
2-core development machine); see :mod:`swing_mpi.probe`. Its ``overlap`` is 0: there both cores copy and reduce,
so nothing is left to hide a reduction behind; the simulator's overlap is the network's (:mod:`.netsim.software`)."""


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

    def num(key: str, v: Any) -> float:
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{source}: {key} must be a number, got {v!r}") from None
        if not (math.isfinite(x) and x >= 0):
            raise ValueError(f"{source}: {key} must be a finite number >= 0, got {v!r}")
        return x

    def opt(key: str) -> float | None:
        v = data.get(key)
        return None if v is None else num(key, v)

    def whole(key: str, low: int) -> int | None:
        v = data.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"{source}: {key} must be a whole number >= {low}, got {v!r}")
        return v

    together = data.get("lanes_together", False)
    if not isinstance(together, bool):
        raise ValueError(f"{source}: lanes_together must be true or false, got {together!r}")
    threads = data.get("gamma_threads_s_per_byte") or {}
    if not isinstance(threads, dict):
        raise ValueError(f"{source}: gamma_threads_s_per_byte must map thread counts to seconds per byte")
    by_threads: dict[int, float] = {}
    for k, v in threads.items():
        try:
            t = int(k)
        except (TypeError, ValueError):
            t = 0
        if t < 1 or str(t) != str(k).strip():
            raise ValueError(f"{source}: gamma_threads_s_per_byte: {k!r} is not a thread count >= 1")
        by_threads[t] = num(f"gamma_threads_s_per_byte[{k}]", v)
    overlap = opt("overlap")
    if overlap is not None and overlap > 1:
        raise ValueError(f"{source}: overlap is a fraction, 0 to 1, got {overlap}")
    engine = data.get("engine")
    if engine is not None and engine not in ("c", "python"):
        raise ValueError(f"{source}: engine must be \"c\" or \"python\", got {engine!r}")
    return EngineCosts(alpha_s=alpha, gamma_s_per_byte=gamma, alpha_1lane_s=opt("alpha_1lane_s"),
                       alpha_lane_s=opt("alpha_lane_s"), c_gamma_s_per_byte=opt("c_gamma_s_per_byte"),
                       mpi_step_s=opt("mpi_step_s"),
                       source=source, info=dict(data.get("info") or {}),
                       step_s=opt("step_s"), lanes=whole("lanes", 1), lanes_together=together,
                       gamma_threads_s_per_byte=tuple(sorted(by_threads.items())),
                       gamma_pair_s_per_byte=opt("gamma_pair_s_per_byte"),
                       c_gamma_pair_s_per_byte=opt("c_gamma_pair_s_per_byte"), overlap=overlap,
                       segment_bytes=whole("segment_bytes", 0), engine=engine)


def parse_engine_costs(data: dict[str, Any], source: str = "dict") -> EngineCosts:
    """Return the costs in ``data`` (a probe file's JSON object); ``ValueError`` names ``source`` and the bad key."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a JSON object")
    return _from_dict(data, source)


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
    return parse_engine_costs(data, str(p))
