"""Simulation parameters: the network's rates and delays and the software costs per step and per byte.

Defaults are the paper's simulated network (400 Gb/s links, 100 ns per link,
300 ns per router hop) with the ``c`` software preset (1.5 µs per step, the
value the Trivance paper uses when it reruns Swing's simulator; no reduction
cost, as the paper's model has no ``γ`` term). The ``engine`` preset is this
library's own per-step and per-byte cost, measured on the machine at hand and
read from a small JSON file (:func:`engine_costs`); with the compiled engine's
costs it also has threads, segments and overlap (:mod:`.software`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

__all__ = ["SimParams", "PRESETS", "NETWORKS", "CPU_MODELS", "MESSAGE_SIZES", "engine_costs_path",
           "engine_costs", "PresetError"]

NETWORKS = ("torus", "hyperx", "fattree")
CPU_MODELS = ("lane", "rank", "lockstep")
"""``lane``: each lane of a rank pays its own α and γ, in parallel with the others (a C library
posting each port's step as it is ready). ``rank``: the lanes of one rank share one CPU, so their
α and γ serialize. ``lockstep``: as ``rank``, and the lanes of a rank also advance together: step
``k+1`` of any lane is posted only when every lane has finished step ``k`` (this library's
executor)."""
MESSAGE_SIZES = ("auto", "exact", "scaled")
"""How :func:`~swing_mpi.netsim.simulate` reads message sizes: ``auto`` (see :mod:`.run`), ``exact`` (the
count's own schedules; ``ValueError`` where they admit no symmetry and are too large to read),
``scaled`` (the build count's, scaled)."""

ALPHA_C = 1.5e-6
GAMMA_C = 0.0

class PresetError(LookupError):
    """A preset that cannot be used (unknown name, or the engine's costs were never measured here)."""


def engine_costs_path() -> Path:
    """Return where the ``engine`` preset is read from.

    ``$SWING_MPI_ENGINE_COSTS`` (``swing_mpi.rc.engine_costs``), else
    ``$XDG_CONFIG_HOME/swing_mpi/engine_costs.json`` (``~/.config/swing_mpi/engine_costs.json``), as
    ``swing-mpi probe`` writes it.
    """
    from ..config import rc
    from ..engine_costs import default_engine_path

    return Path(rc.engine_costs) if rc.engine_costs else default_engine_path()


def engine_costs() -> tuple[float, float]:
    """Return the engine preset ``(alpha_s, gamma_s_per_byte)``: :func:`swing_mpi.engine_costs.load_engine_costs`.

    The file at :func:`engine_costs_path` if there is one (``swing-mpi probe``
    writes it), else the costs measured on the development machine and built
    in (:data:`swing_mpi.engine_costs.DEFAULT_ENGINE`). A named file that is missing
    or malformed raises :class:`PresetError`.
    """
    from ..engine_costs import load_engine_costs

    try:
        c = load_engine_costs()
    except ValueError as e:
        raise PresetError(str(e)) from None
    if not (math.isfinite(c.alpha_s) and math.isfinite(c.gamma_s_per_byte)):
        raise PresetError(f"engine preset from {c.source} must be finite, got {c.alpha_s}, {c.gamma_s_per_byte}")
    return c.alpha_s, c.gamma_s_per_byte


class _Presets(Mapping[str, tuple[float, float]]):
    """``name -> (alpha_s, gamma_s_per_byte)``; ``engine`` is read when asked for."""

    _fixed = {"c": (ALPHA_C, GAMMA_C)}

    def __getitem__(self, name: str) -> tuple[float, float]:
        if name == "engine":
            return engine_costs()
        try:
            return self._fixed[name]
        except KeyError:
            raise PresetError(f"unknown preset {name!r}; known: c, engine") from None

    def __iter__(self) -> Iterator[str]:
        return iter(("c", "engine"))

    def __len__(self) -> int:
        return 2


PRESETS: Mapping[str, tuple[float, float]] = _Presets()
"""Software costs ``(alpha_s, gamma_s_per_byte)`` by name: ``c`` and ``engine``."""


@dataclass(frozen=True)
class SimParams:
    """The network and the software costs of one simulation (seconds, bytes per second)."""

    link_bps: float = 400e9
    """Link rate in bits per second, each direction of each link."""
    latency_s: float = 100e-9
    """Latency of one link (the wire)."""
    hop_s: float = 300e-9
    """Latency of one router hop; a route of ``h`` links costs ``h·(latency_s + hop_s)``."""
    alpha_s: float = ALPHA_C
    """Software cost of one step of one lane (posting it), before its sends leave."""
    gamma_s_per_byte: float = GAMMA_C
    """Software cost per byte received and reduced (only for receives that reduce)."""
    network: str = "torus"
    """``torus``, ``hyperx`` or ``fattree`` (see :mod:`.network`)."""
    cpu: str = "lane"
    """Whether the α and γ of one rank's lanes overlap (``lane``) or serialize (``rank``), and whether its lanes
    also advance together (``lockstep``): :data:`CPU_MODELS`."""
    itemsize: int = 4
    """Bytes per element (the vector's datatype); sizes must be a whole number of elements."""
    wait_sends: bool = True
    """A step ends when its receives are in and its own sends delivered (the executor's wait for every
    request of the step); ``False``: when its receives are in (sends left in flight, eager)."""
    threads: int = 1
    """Threads each rank reduces with (:mod:`.software`); with 2 or more and ``segment_bytes``, a step's reduction
    overlaps its transfer."""
    segment_bytes: int = 0
    """Bytes of a segment: a longer lane step arrives, and is reduced, segment by segment (0: whole)."""
    gamma_threads: tuple[float, ...] = ()
    """Seconds per byte reduced on 1, 2, ..., ``threads`` threads (a block uses at most one thread per
    :data:`.software.SPLIT_BYTES`); empty: ``gamma_s_per_byte`` for every block, whatever ``threads``."""

    def __post_init__(self) -> None:
        """Check every field."""
        for name in ("link_bps", "latency_s", "hop_s", "alpha_s", "gamma_s_per_byte"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.link_bps <= 0:
            raise ValueError(f"link_bps must be > 0, got {self.link_bps}")
        if self.network not in NETWORKS:
            raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {self.network!r}")
        if self.cpu not in CPU_MODELS:
            raise ValueError(f"cpu must be one of {', '.join(CPU_MODELS)}, got {self.cpu!r}")
        if not isinstance(self.itemsize, int) or self.itemsize < 1:
            raise ValueError(f"itemsize must be an int >= 1, got {self.itemsize!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be an int >= 1, got {self.threads!r}")
        if isinstance(self.segment_bytes, bool) or not isinstance(self.segment_bytes, int) or self.segment_bytes < 0:
            raise ValueError(f"segment_bytes must be an int >= 0, got {self.segment_bytes!r}")
        g = tuple(self.gamma_threads)
        if g and len(g) != self.threads:
            raise ValueError(f"gamma_threads must hold {self.threads} costs (1 to threads threads), got {len(g)}")
        if any(not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 for v in g):
            raise ValueError(f"gamma_threads must be finite numbers >= 0, got {g!r}")
        object.__setattr__(self, "gamma_threads", tuple(float(v) for v in g))

    @property
    def link_bytes_per_s(self) -> float:
        """Link rate in bytes per second."""
        return self.link_bps / 8

    @property
    def per_link_s(self) -> float:
        """Delay of one link of a route: wire plus router."""
        return self.latency_s + self.hop_s

    @classmethod
    def preset(cls, name: str, cores: int = 1, **changes: object) -> SimParams:
        """Parameters with the software costs of preset ``name``.

        ``engine``: the measured costs as the engine runs them (:func:`.software.engine_preset`): the compiled
        engine's lanes in lockstep, reducing on ``cores`` threads (a one-rank node's cores), segments overlapped;
        the interpreted executor's (a costs file without ``lanes_together``) lanes in series. ``c``: ``cores``
        must be 1 (C's reduction runs on one thread).
        """
        if name == "engine":
            from ..engine_costs import load_engine_costs
            from .software import engine_preset

            try:
                costs = load_engine_costs()
            except ValueError as e:
                raise PresetError(str(e)) from None
            base = engine_preset(costs, cores)
        else:
            alpha, gamma = PRESETS[name]
            if cores != 1:
                raise ValueError(f"cores applies to the engine preset, not {name!r}")
            base = {"alpha_s": alpha, "gamma_s_per_byte": gamma, "cpu": "lane"}
        base.update(changes)
        return replace(cls(), **base)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        """Return the fields as a dict (for JSON)."""
        return asdict(self)

    @property
    def gammas(self) -> tuple[float, ...]:
        """Seconds per byte on 1..``threads`` threads: ``gamma_threads``, or ``gamma_s_per_byte`` for each."""
        return self.gamma_threads or (self.gamma_s_per_byte,) * self.threads
