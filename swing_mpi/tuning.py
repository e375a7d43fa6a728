"""The tuning ``auto`` decides with: model constants, the network kind and measured decision tables.

A tuning file is JSON written by ``swing-mpi calibrate``::

    {"version": 2, "alpha": 9.1e-05, "beta": 1.72e-09, "gamma": 5.8e-11,
     "native_below_bytes": 2048, "network": "flat",
     "tables": [{"p": 16, "dims": [4, 4], "dtype": "float64", "op": "sum", "exact": false,
                 "commutative": true, "collective": "allreduce",
                 "sizes": [8, 64, ...], "times_s": {"swing-bw": [...], "native": [...], ...}}],
     ...where and how it was measured...}

``times_s`` holds the median seconds of every candidate at every measured
size (``null`` where calibrate stopped measuring a candidate that was clearly
beaten). A table is used only for calls with the same ``p``, dims, op class
(``exact``: the op gives the same bits in any grouping, e.g. integer SUM;
inexact: floating-point SUM) and commutativity; every other call is priced by
the model (:mod:`swing_mpi.model.features`) with ``alpha``, ``beta``,
``gamma`` on the ``network`` kind.

Where the tuning comes from: ``$SWING_MPI_TUNING`` (a file, or ``default``
for the built-in constants), else ``~/.config/swing_mpi/tuning.json`` if it
exists, else :data:`DEFAULT_TUNING`. ``$SWING_MPI_NETWORK`` (``torus`` or
``flat``) overrides the network kind. :func:`tuning_for_comm` reads it on
rank 0 and broadcasts it, so every rank decides alike. This module imports
MPI only inside :func:`tuning_for_comm`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .config import rc
from .model.features import NETWORKS

NETWORK_AUTO = "auto"
"""A tuning's network kind when nothing measured it: :func:`network_for` decides per call."""

__all__ = [
    "Tuning", "TuningError", "DecisionTable", "DEFAULT_TUNING", "NATIVE_BELOW_BY_MPI", "native_below", "TUNING_ENV",
    "NETWORK_ENV", "TUNING_VERSION",
    "load_tuning", "save_tuning", "tuning_from_dict", "tuning_for_comm", "default_tuning_path", "network_override",
    "network_for", "NETWORK_AUTO", "tuning_path",
]

TUNING_ENV = "SWING_MPI_TUNING"
NETWORK_ENV = "SWING_MPI_NETWORK"
TUNING_VERSION = 2
_READABLE_VERSIONS = (1, 2)


class TuningError(ValueError):
    """A tuning file that cannot be used (unreadable, not JSON, bad values)."""


def _bad(v: Any) -> bool:
    return isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0


@dataclass(frozen=True)
class DecisionTable:
    """Measured median seconds of every candidate at a grid of sizes, for one kind of call."""

    p: int
    dims: tuple[int, ...]
    exact: bool
    sizes: tuple[int, ...]
    times: tuple[tuple[str, tuple[float | None, ...]], ...]
    """``(candidate, seconds per size)``; ``None`` where it was not measured."""
    commutative: bool = True
    collective: str = "allreduce"
    dtype: str = ""
    op: str = ""

    def __post_init__(self) -> None:
        """Reject values that cannot price anything."""
        if not self.sizes or list(self.sizes) != sorted(set(self.sizes)) or self.sizes[0] < 1:
            raise TuningError(f"table sizes must be increasing positive byte counts, got {list(self.sizes)}")
        if math.prod(self.dims) != self.p:
            raise TuningError(f"table dims {list(self.dims)} do not hold p={self.p} ranks")
        for name, ts in self.times:
            if len(ts) != len(self.sizes):
                raise TuningError(f"table times of {name!r}: {len(ts)} values for {len(self.sizes)} sizes")
            if any(t is not None and (_bad(t) or t == 0) for t in ts):
                raise TuningError(f"table times of {name!r} must be positive seconds or null")

    @property
    def candidates(self) -> tuple[str, ...]:
        """Candidates measured in this table."""
        return tuple(name for name, _ in self.times)

    def matches(self, p: int, dims: tuple[int, ...], exact: bool, commutative: bool, collective: str) -> bool:
        """Tell whether this table was measured for calls like this one."""
        return (self.p == p and self.dims == dims and self.exact == exact and self.commutative == commutative
                and self.collective == collective)

    def time(self, candidate: str, nbytes: int) -> tuple[float | None, str]:
        """Interpolated seconds of ``candidate`` for ``nbytes`` and how they were obtained.

        Between two measured sizes: linear in log(time) over log(size).
        Below the smallest: the smallest size's time (latency dominates).
        Above the largest: extended along the last segment's log-log slope,
        clamped to [0, 1] (time grows at most in proportion to the size).
        ``None`` where the candidate was not measured at a bracketing size
        (calibrate stopped measuring it there because it was clearly beaten).
        """
        ts = dict(self.times).get(candidate)
        if ts is None:
            return None, "not in the table"
        sizes = self.sizes
        n = max(1, int(nbytes))
        if n <= sizes[0]:
            t0 = ts[0]
            return (t0, f"measured at {sizes[0]} B") if t0 is not None else (None, "not measured")
        for i in range(1, len(sizes)):
            if n <= sizes[i]:
                a, b = ts[i - 1], ts[i]
                if n == sizes[i]:
                    return (b, f"measured at {sizes[i]} B") if b is not None else (None, "not measured (beaten)")
                if a is None or b is None:
                    return None, "not measured (beaten)"
                f = math.log(n / sizes[i - 1]) / math.log(sizes[i] / sizes[i - 1])
                return (math.exp(math.log(a) + f * (math.log(b) - math.log(a))),
                        f"interpolated between {sizes[i - 1]} B and {sizes[i]} B")
        last = ts[-1]
        if last is None:
            return None, "not measured (beaten)"
        slope = 1.0
        if len(sizes) > 1 and ts[-2] is not None:
            slope = math.log(last / ts[-2]) / math.log(sizes[-1] / sizes[-2])
            slope = min(1.0, max(0.0, slope))
        return last * (n / sizes[-1]) ** slope, f"extrapolated from {sizes[-1]} B (slope {slope:.2f})"

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"p": self.p, "dims": list(self.dims), "dtype": self.dtype, "op": self.op, "exact": self.exact,
                "commutative": self.commutative, "collective": self.collective, "sizes": list(self.sizes),
                "times_s": {name: list(ts) for name, ts in self.times}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DecisionTable:
        """Read the JSON form; anything malformed raises :class:`TuningError`."""
        if not isinstance(d, Mapping):
            raise TuningError(f"a table must be a JSON object, got {type(d).__name__}")
        try:
            times = d["times_s"]
            if not isinstance(times, Mapping):
                raise TuningError("table times_s must be an object of lists")
            return cls(p=int(d["p"]), dims=tuple(int(x) for x in d["dims"]), exact=bool(d["exact"]),
                       sizes=tuple(int(x) for x in d["sizes"]),
                       times=tuple((str(k), tuple(None if v is None else float(v) for v in vs))
                                   for k, vs in times.items()),
                       commutative=bool(d.get("commutative", True)),
                       collective=str(d.get("collective", "allreduce")),
                       dtype=str(d.get("dtype", "")), op=str(d.get("op", "")))
        except KeyError as e:
            raise TuningError(f"table misses {e.args[0]!r}") from None
        except (TypeError, ValueError) as e:
            if isinstance(e, TuningError):
                raise
            raise TuningError(f"bad table: {e}") from None


@dataclass(frozen=True)
class Tuning:
    """Model constants (seconds), the network kind and measured tables.

    Attributes:
        alpha: seconds per step (latency plus our per-step Python work).
        beta: seconds per byte on the bottleneck (a link on a torus, a rank's
            own traffic on a flat network).
        gamma: seconds per byte reduced.
        native_below_bytes: where no table applies, vectors of fewer bytes
            go to ``MPI_Allreduce``; ``None``: never.
        network: ``torus`` (routed link sharing), ``flat``, or ``auto`` (not
            measured: :func:`network_for` decides from the call's dims).
        tables: measured decision tables (:class:`DecisionTable`).
        source: where it came from; not part of equality.
    """

    alpha: float
    beta: float
    gamma: float
    native_below_bytes: int | None = None
    network: str = NETWORK_AUTO
    tables: tuple[DecisionTable, ...] = ()
    source: str = field(default="defaults", compare=False)

    def __post_init__(self) -> None:
        """Reject values that cannot price anything."""
        for name in ("alpha", "beta", "gamma"):
            if _bad(getattr(self, name)):
                raise TuningError(f"tuning {name} must be a finite number >= 0, got {getattr(self, name)!r}")
        nb = self.native_below_bytes
        if nb is not None and (isinstance(nb, bool) or not isinstance(nb, int) or nb < 0):
            raise TuningError(f"tuning native_below_bytes must be null or an integer >= 0, got {nb!r}")
        if self.network not in (*NETWORKS, NETWORK_AUTO):
            raise TuningError(f"tuning network must be one of {', '.join(NETWORKS)} or {NETWORK_AUTO}, "
                              f"got {self.network!r}")

    def table_for(self, p: int, dims: tuple[int, ...], *, exact: bool, commutative: bool,
                  collective: str = "allreduce") -> DecisionTable | None:
        """Return the measured table for calls like this one, or ``None``."""
        for t in self.tables:
            if t.matches(p, dims, exact, commutative, collective):
                return t
        return None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (what :func:`save_tuning` writes)."""
        return {"version": TUNING_VERSION, "alpha": self.alpha, "beta": self.beta, "gamma": self.gamma,
                "native_below_bytes": self.native_below_bytes, "network": self.network, "source": self.source,
                "tables": [t.to_dict() for t in self.tables]}


DEFAULT_TUNING = Tuning(
    alpha=91e-6,
    beta=1.72e-9,
    gamma=0.058e-9,
    native_below_bytes=2048,
    network=NETWORK_AUTO,
    source="defaults (2-core VM, shared-memory MPICH 5.0.2 from PyPI, p=4)",
)
"""Constants measured with ``swing-mpi calibrate`` on a 2-core VM, 4 ranks over
shared-memory MPICH from PyPI (α is large because four ranks share two cores:
a step waits until its peer is scheduled). No tables: without a calibration on
the machine itself, ``auto`` prices our schedules with the torus model where the
call names a torus of two or more dimensions (dims, a Cartesian communicator,
``coords``) and the flat model otherwise (:func:`network_for`), and hands
vectors below 2 KiB to ``MPI_Allreduce``, where every algorithm is pure
latency and MPICH's call costs less than ours."""


NATIVE_BELOW_BY_MPI = {"mpich": 0, "openmpi": 8192}
"""The built-in ``native_below_bytes`` by MPI library, for the compiled engine: where ``comm.Allreduce`` of
MPICH 5.0.2 and Open MPI 5 from PyPI stops beating our schedules over shared memory
(benchmarks/results/engine/: with the compiled core's repeat records MPICH's own is slower at every size,
0.35-0.66x ours from 8 B to 2 KiB at p = 2 and 4; Open MPI's is even with ours at p = 2 up to 2 KiB and
faster at p = 4 up to 8 KiB). Other libraries, and the Python engine, keep :data:`DEFAULT_TUNING`'s."""


def native_below(tuning: Tuning) -> int | None:
    """Return ``tuning.native_below_bytes``; for the built-in defaults, the value of the MPI library in use."""
    if tuning is not DEFAULT_TUNING:  # (tuning_for_comm gives the object itself back for the defaults)
        return tuning.native_below_bytes
    import sys

    mpi = sys.modules.get("mpi4py.MPI")  # never initialise MPI here (the command line's choose has none)
    if mpi is None or not mpi.Is_initialized():
        return tuning.native_below_bytes
    from . import native

    if native.load() is None:
        return tuning.native_below_bytes
    lib = mpi.Get_library_version()
    family = "openmpi" if "Open MPI" in lib else "mpich" if "MPICH" in lib else None
    return NATIVE_BELOW_BY_MPI.get(family or "", tuning.native_below_bytes)


def network_for(tuning: Tuning, dims: Sequence[int]) -> str:
    """Return the network kind to price a call on ``dims`` with.

    A measured (or forced) kind wins. Unmeasured (``auto``): a torus of two
    or more dimensions longer than 1 is priced as a torus, with link sharing;
    a ring of all ranks, which is what a call without dims runs on, as flat.
    """
    if tuning.network != NETWORK_AUTO:
        return tuning.network
    return "torus" if sum(1 for d in dims if d > 1) >= 2 else "flat"


def network_override() -> str | None:
    """``$SWING_MPI_NETWORK`` if set (``torus`` or ``flat``; :data:`swing_mpi.config.rc`); a bad one raises."""
    net: str | None = rc.checked("network")
    assert net is None or net in NETWORKS
    return net


def default_tuning_path() -> Path:
    """``$XDG_CONFIG_HOME/swing_mpi/tuning.json`` (``~/.config/swing_mpi/tuning.json``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "swing_mpi" / "tuning.json"


def tuning_from_dict(data: Mapping[str, Any], *, source: str = "dict") -> Tuning:
    """Build a :class:`Tuning` from parsed JSON; unknown keys (measurements, notes) are ignored."""
    if not isinstance(data, Mapping):
        raise TuningError(f"{source}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version", TUNING_VERSION)
    if version not in _READABLE_VERSIONS:
        raise TuningError(f"{source}: tuning version {version!r}; this swing_mpi reads versions "
                          f"{', '.join(map(str, _READABLE_VERSIONS))}")
    missing = [k for k in ("alpha", "beta", "gamma") if k not in data]
    if missing:
        raise TuningError(f"{source}: missing {', '.join(missing)}")
    if version == 1:  # lanes on separate ports (concurrent) priced like a torus, serial like a flat network
        network = "torus" if data.get("concurrent_lanes", True) else "flat"
    else:
        network = data.get("network", "flat")
    try:
        raw_tables = data.get("tables") or []
        if not isinstance(raw_tables, Sequence) or isinstance(raw_tables, str):
            raise TuningError("tables must be a list")
        tables = tuple(DecisionTable.from_dict(t) for t in raw_tables)
        return Tuning(alpha=data["alpha"], beta=data["beta"], gamma=data["gamma"],
                      native_below_bytes=data.get("native_below_bytes"), network=network, tables=tables,
                      source=str(source))
    except TuningError as e:
        raise TuningError(f"{source}: {e}") from None


def _read(path: Path) -> Tuning:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise TuningError(f"cannot read tuning file {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TuningError(f"tuning file {path} is not UTF-8 text: {e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise TuningError(f"tuning file {path} is not valid JSON: {e}") from None
    return tuning_from_dict(data, source=str(path))


def _with_override(t: Tuning) -> Tuning:
    net = network_override()
    if net is None or net == t.network:
        return t
    return replace(t, network=net, source=f"{t.source}; network {net} from ${NETWORK_ENV}")


def tuning_path() -> Path | None:
    """Return the tuning file of this process, there or not: ``$SWING_MPI_TUNING``, else the config file.

    ``None`` where ``$SWING_MPI_TUNING`` is ``default`` or ``defaults`` (the built-in constants).
    :func:`load_tuning` reads it; ``swing-mpi calibrate`` writes it.
    """
    env = (rc.tuning or "").strip()
    if env.lower() in ("default", "defaults"):
        return None
    return Path(env).expanduser() if env else default_tuning_path()


def load_tuning(path: str | os.PathLike[str] | None = None) -> Tuning:
    """Return the tuning of this process (not collective; see :func:`tuning_for_comm`).

    Args:
        path: a JSON file to read. Errors in it raise :class:`TuningError`.

    Without ``path``: ``$SWING_MPI_TUNING`` (``default`` or ``defaults``
    selects the built-in constants), else the config file
    (:func:`default_tuning_path`) if it exists, else :data:`DEFAULT_TUNING`.
    A file found this way that cannot be used gives a ``RuntimeWarning``
    naming the file and the problem, and the defaults: a broken config file
    must not stop a program's allreduce. ``$SWING_MPI_NETWORK`` then
    overrides the network kind (an unknown value raises ``ValueError``).
    """
    if path is not None:
        return _with_override(_read(Path(path)))
    candidate = tuning_path()
    where = f"${TUNING_ENV}" if rc.tuning else "config file"
    if candidate is None or not rc.tuning and not candidate.is_file():
        return _with_override(DEFAULT_TUNING)
    try:
        t = _read(candidate)
    except TuningError as e:
        warnings.warn(f"swing_mpi: ignoring the tuning from {where}: {e}; using the built-in defaults",
                      RuntimeWarning, stacklevel=2)
        t = DEFAULT_TUNING
    return _with_override(t)


def save_tuning(tuning: Tuning, path: str | os.PathLike[str], *, extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``tuning`` (and ``extra`` keys, e.g. measurements) as JSON, creating the folder."""
    path = Path(path)
    data = dict(extra or {})
    data.update(tuning.to_dict())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def tuning_for_comm(comm: Any, *, timeout: float | None = None) -> Tuning:
    """Return the tuning for a communicator, equal on all its ranks (collective).

    Rank 0 runs :func:`load_tuning` and broadcasts the result, so ranks on
    hosts with different files (or none) still choose the same algorithm. A
    bad ``$SWING_MPI_NETWORK`` on rank 0 raises ``ValueError`` on every rank;
    any other failure gives a warning and the defaults. ``timeout``: seconds
    the broadcast may take (:func:`swing_mpi.waiting.bounded_bcast`; None: forever).
    """
    if comm.Get_size() == 1:
        got = _load_never_raising()
    else:
        from .waiting import bounded_bcast

        got = bounded_bcast(comm, _load_never_raising() if comm.Get_rank() == 0 else None,
                            "the tuning's agreement", timeout)
    if isinstance(got, str):
        raise ValueError(got)
    if got == DEFAULT_TUNING and got.source == DEFAULT_TUNING.source:
        return DEFAULT_TUNING  # the broadcast's copy of the defaults is the defaults (see native_below)
    return got


def _load_never_raising() -> Tuning | str:
    """Run :func:`load_tuning`; a bad network override comes back as its message, anything else as the defaults.

    The other ranks wait in the broadcast, so rank 0 must always reach it.
    """
    try:
        return load_tuning()
    except TuningError as e:
        warnings.warn(f"swing_mpi: cannot load the tuning ({e}); using the built-in defaults",
                      RuntimeWarning, stacklevel=3)
        return DEFAULT_TUNING
    except ValueError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001  (rank 0 must reach the broadcast)
        warnings.warn(f"swing_mpi: cannot load the tuning ({type(e).__name__}: {e}); using the built-in defaults",
                      RuntimeWarning, stacklevel=3)
        return DEFAULT_TUNING
