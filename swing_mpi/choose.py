"""``auto``: which algorithm runs, from a cost model over our own schedules.

Algorithm:
    Non-commutative ops run ``recdoub`` (the only order-preserving schedule).
    Otherwise every candidate (``swing-lat``, ``swing-bw``) is priced from its
    generated schedule for this torus, vector and op::

        T = Σ_k (α + β·m_k) + γ·r

        k    a step in which any rank moves data (a step costs one α: the
             message latency plus our Python per-step work)
        m_k  bytes moved in step k (the larger of sent and received) on the
             busiest lane, the maximum over rank 0 and rank p−1 (p−1 is the
             rank that folds on non-power-of-two sides and the extra rank of
             an odd ring)
        r    bytes reduced, summed over steps (the worst of the two ranks per
             step) and lanes (one thread reduces them one after the other);
             swing-lat's final rank-order combine counts here

    That is the paper's view, where the ``2D`` lanes (plain and mirrored
    sub-collectives) run concurrently on separate torus ports
    (``Tuning.concurrent_lanes = True``). With ``concurrent_lanes = False``
    the lanes are priced as if they ran one after the other: every step of
    every lane costs its own ``α`` and its own bytes. That is what one Python
    process over shared memory does (it posts, polls and copies lane by lane
    through one memory system), and what ``swing-mpi calibrate`` measured on
    the machine the built-in defaults come from.

    The cheapest wins; ties go to ``swing-lat`` (the first candidate). For
    inexact ops (floating-point SUM/PROD, user ops) ``swing-lat`` runs its
    contributions form, which moves ``count·(p−1)`` elements instead of
    ``count·log2 p`` and combines ``p`` vectors at the end: the model sees
    those bytes, so ``swing-lat`` stops paying off at smaller sizes, the more
    so the larger ``p``. ``native`` (the MPI library's own ``MPI_Allreduce``)
    is picked only below ``Tuning.native_below_bytes``, which
    ``swing-mpi calibrate`` sets when it measured the library beating both of
    ours there; the built-in defaults leave it unset.

Determinism:
    :func:`choose` depends only on its arguments (no clock, no rank, no
    environment) and is cached; :func:`tuning_for_comm` makes the tuning the
    same on every rank (read on rank 0, broadcast). Every rank therefore picks
    the same algorithm, as it must.

Tuning:
    ``$SWING_MPI_TUNING`` (a JSON file, or ``default`` for the built-in
    constants), else ``~/.config/swing_mpi/tuning.json`` if it exists
    (``swing-mpi calibrate`` writes it), else :data:`DEFAULT_TUNING`, measured
    on a 2-core VM with shared-memory MPICH 5.0.2 from PyPI (see
    :data:`DEFAULT_TUNING`).

This module imports MPI only inside :func:`tuning_for_comm`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from .schedule import ALGORITHMS, AUTO, NATIVE, algorithm_info, build_schedule
from .schedule.base import REDUCE
from .units import format_size

__all__ = [
    "Tuning", "TuningError", "DEFAULT_TUNING", "CANDIDATES", "TUNING_ENV", "TUNING_VERSION",
    "choose", "estimate", "estimates", "features", "Features",
    "load_tuning", "save_tuning", "tuning_from_dict", "tuning_for_comm", "default_tuning_path",
    "auto_table", "resolve", "algorithm_names",
]

CANDIDATES = ("swing-lat", "swing-bw")
"""Our schedules ``auto`` chooses between (commutative ops), in tie-break order."""
NONCOMMUTATIVE = "recdoub"
TUNING_ENV = "SWING_MPI_TUNING"
TUNING_VERSION = 1


class TuningError(ValueError):
    """A tuning file that cannot be used (unreadable, not JSON, bad values)."""


@dataclass(frozen=True)
class Tuning:
    """Constants of the cost model ``T = Σ_k (α + β·m_k) + γ·r`` (seconds).

    Attributes:
        alpha: seconds per step (latency plus our per-step Python work).
        beta: seconds per byte moved on the busiest lane in a step.
        gamma: seconds per byte reduced.
        native_below_bytes: vectors of fewer bytes go to ``MPI_Allreduce``
            (commutative ops only); ``None``: never.
        source: where the constants come from (a path, ``defaults``, …);
            not part of equality (two tunings with the same constants choose
            alike and share cached decisions).
        concurrent_lanes: ``True``: lanes move data at the same time (one
            torus port each), a step costs its busiest lane's bytes;
            ``False``: a step costs the bytes of all its lanes (shared memory).
    """

    alpha: float
    beta: float
    gamma: float
    native_below_bytes: int | None = None
    source: str = field(default="defaults", compare=False)
    concurrent_lanes: bool = True

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "gamma"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise TuningError(f"tuning {name} must be a finite number >= 0, got {v!r}")
        nb = self.native_below_bytes
        if nb is not None and (isinstance(nb, bool) or not isinstance(nb, int) or nb < 0):
            raise TuningError(f"tuning native_below_bytes must be null or an integer >= 0, got {nb!r}")
        if not isinstance(self.concurrent_lanes, bool):
            raise TuningError(f"tuning concurrent_lanes must be true or false, got {self.concurrent_lanes!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["version"] = TUNING_VERSION
        return d


DEFAULT_TUNING = Tuning(
    alpha=91e-6,
    beta=1.72e-9,
    gamma=0.058e-9,
    native_below_bytes=2048,
    source="defaults (2-core VM, shared-memory MPICH 5.0.2 from PyPI, p=4; see swing_mpi/choose.py)",
    concurrent_lanes=False,
)
"""Measured with ``swing-mpi calibrate``'s code on the development machine: a
2-core VM, 4 ranks (2 per core), MPICH 5.0.2 from PyPI over shared memory,
Python 3.11, numpy 2.4. 21 runs (rings of 4 and 2x2 tori, 8 B … 4 MiB,
swing-lat on int64 and float64 SUM, swing-bw on float64 SUM, 20 rounds each),
the medians pooled over runs, then α, β and a per-call constant (316 µs,
the same for every algorithm, so no part of the choice) fitted by
non-negative least squares on relative errors, with γ measured apart (the
reduction kernel on 4 MiB, all ranks at once: 0.058 ns/B, median of 6 runs).
Serial lanes fit better (30.6 % against 38.6 % rms error) and choose better
(2.6 % of time lost against 9 % on the measured points): one Python process
per rank handles its lanes one after the other. α is large because four
ranks share two cores: a step waits until its peer is scheduled. Single runs
gave α 90…370 µs and β 0.9…1.9 ns/B depending on the machine's load.
``native_below_bytes`` is 2 KiB (vectors up to 1 KiB go to ``MPI_Allreduce``):
there every algorithm is pure latency, Swing's shorter paths buy nothing, and
our per-call floor (a Python call, two posted messages and a Python-level
wait: about 10 µs for swing-lat at p = 2, measured) is more than twice MPICH's
whole call there (about 4 µs). MPICH also beat ours on that machine
up to about 32–512 KiB (by up to 2×), but how the MPI library compares with
our schedules there differs from machine to machine (on the emulated torus
Swing wins from 256 KiB): only a calibration on the machine itself raises it."""


# -- the model -------------------------------------------------------------------------

@dataclass(frozen=True)
class Features:
    """What the model prices for one schedule (bytes, not yet times)."""

    steps: int
    """Steps in which any rank moves data (one α each)."""
    lane_bytes: int
    """``Σ_k m_k``: the busiest lane's bytes per step, summed."""
    reduced_bytes: int
    """Bytes reduced, summed over steps and lanes."""
    lane_steps: int = 0
    """Steps of every lane in which it moves data, summed over lanes (serial lanes)."""
    all_lanes_bytes: int = 0
    """Bytes of every lane, summed over steps and lanes (serial lanes)."""

    def counts(self, concurrent_lanes: bool) -> tuple[int, int]:
        """``(α count, bytes moved)`` under one lane mode."""
        if concurrent_lanes:
            return self.steps, self.lane_bytes
        return self.lane_steps, self.all_lanes_bytes

    def time(self, tuning: Tuning) -> float:
        k, m = self.counts(tuning.concurrent_lanes)
        return k * tuning.alpha + m * tuning.beta + self.reduced_bytes * tuning.gamma


def _probe_ranks(p: int) -> tuple[int, ...]:
    return (0,) if p <= 1 else (0, p - 1)


@lru_cache(maxsize=4096)
def features(algorithm: str, dims: tuple[int, ...], count: int, itemsize: int, exact: bool) -> Features:
    """Steps, busiest-lane bytes and reduced bytes of ``algorithm`` (cached)."""
    dims = tuple(int(d) for d in dims)
    p = math.prod(dims)
    if p <= 1 or count <= 0:
        return Features(0, 0, 0, 0, 0)
    scheds = [build_schedule(algorithm, dims, r, count, exact=exact) for r in _probe_ranks(p)]
    nsteps = max(s.nsteps for s in scheds)
    steps = lane_bytes = all_lanes = lane_steps = reduced = 0
    for k in range(nsteps):
        m_k = a_k = r_k = n_k = 0
        for s in scheds:
            red = tot = busy = 0
            for lane in s.lanes:
                if k >= len(lane):
                    continue
                st = lane[k]
                moved = max(sum(t.send_count for t in st.transfers), sum(t.recv_count for t in st.transfers))
                busy += moved > 0
                m_k = max(m_k, moved)
                tot += moved
                red += sum(t.recv_count for t in st.transfers if t.action == REDUCE)
                if st.combine:
                    red += (s.slots - 1) * s.count
            a_k = max(a_k, tot)
            r_k = max(r_k, red)
            n_k = max(n_k, busy)
        steps += n_k > 0
        lane_steps += n_k
        lane_bytes += m_k
        all_lanes += a_k
        reduced += r_k
    return Features(steps, lane_bytes * itemsize, reduced * itemsize, lane_steps, all_lanes * itemsize)


def estimate(algorithm: str, dims: Sequence[int], count: int, itemsize: int, *, exact: bool,
             tuning: Tuning | None = None) -> float:
    """Modelled seconds of one allreduce of ``count`` elements with ``algorithm``."""
    return features(algorithm, tuple(dims), int(count), int(itemsize), bool(exact)).time(
        tuning or DEFAULT_TUNING)


def estimates(dims: Sequence[int], count: int, itemsize: int, *, exact: bool,
              tuning: Tuning | None = None,
              algorithms: Iterable[str] = CANDIDATES) -> dict[str, float]:
    """:func:`estimate` of every candidate, by name."""
    return {a: estimate(a, dims, count, itemsize, exact=exact, tuning=tuning) for a in algorithms}


def choose(p: int, dims: Sequence[int], count: int, itemsize: int, *, exact: bool, commutative: bool,
           tuning: Tuning | None = None) -> str:
    """The algorithm ``auto`` runs (the same on every rank for the same arguments).

    Args:
        p: communicator size (the product of ``dims``).
        dims: torus dims the schedules run on.
        count, itemsize: vector elements and bytes per element.
        exact: the op gives the same bits in any grouping (integer SUM, MAX, …).
        commutative: ``op.Is_commutative()``.
        tuning: model constants, equal on all ranks (:func:`tuning_for_comm`);
            default :data:`DEFAULT_TUNING`.

    Returns:
        ``"recdoub"`` for non-commutative ops, ``"native"`` below
        ``tuning.native_below_bytes``, else the cheaper of ``swing-lat`` and
        ``swing-bw`` under the model.
    """
    return _choose(int(p), tuple(int(d) for d in dims), int(count), int(itemsize), bool(exact),
                   bool(commutative), tuning or DEFAULT_TUNING)


@lru_cache(maxsize=4096)
def _choose(p: int, dims: tuple[int, ...], count: int, itemsize: int, exact: bool, commutative: bool,
            tuning: Tuning) -> str:
    if not commutative:
        return NONCOMMUTATIVE
    if math.prod(dims) != p:
        raise ValueError(f"dims {'x'.join(map(str, dims))} hold {math.prod(dims)} ranks, not {p}")
    nbytes = count * itemsize
    if tuning.native_below_bytes is not None and nbytes < tuning.native_below_bytes:
        return NATIVE
    if p == 1 or count == 0:
        return CANDIDATES[0]
    best, best_t = CANDIDATES[0], math.inf
    for alg in CANDIDATES:
        t = features(alg, dims, count, itemsize, exact).time(tuning)
        if t < best_t:
            best, best_t = alg, t
    return best


def resolve(requested: str, p: int, dims: Sequence[int], count: int, itemsize: int, *, exact: bool,
            commutative: bool, native_ok: bool, tuning: Tuning | None = None) -> str:
    """Name the algorithm that really runs for a request (``auto``, ``native`` or a registered name).

    Args:
        requested: what the caller asked for (already defaulted from the environment).
        p, dims, count, itemsize: as for :func:`choose`.
        exact: the op gives the same bits in any grouping.
        commutative: ``op.Is_commutative()``.
        native_ok: the MPI library's result is bit-identical on every rank for this
            op and datatype (``auto`` hands tiny vectors to it only then).
        tuning: as for :func:`choose`.

    Non-commutative ops on an algorithm that needs commutativity run ``recdoub``
    (order-preserving) instead; ``native`` and ``recdoub`` run as asked.
    """
    if requested == AUTO:
        tuning = tuning or DEFAULT_TUNING
        if not native_ok and tuning.native_below_bytes is not None:
            tuning = replace(tuning, native_below_bytes=None)
        return choose(p, dims, count, itemsize, exact=exact, commutative=commutative, tuning=tuning)
    if requested == NATIVE:
        return NATIVE
    if algorithm_info(requested).commutative_only and not commutative:
        return NONCOMMUTATIVE
    return requested


def algorithm_names() -> tuple[str, ...]:
    """Every name a caller may ask for: ``auto``, ``native`` and the registered algorithms."""
    return (AUTO, NATIVE) + tuple(ALGORITHMS)


# -- tuning files ----------------------------------------------------------------------

def default_tuning_path() -> Path:
    """``$XDG_CONFIG_HOME/swing_mpi/tuning.json`` (``~/.config/swing_mpi/tuning.json``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "swing_mpi" / "tuning.json"


def tuning_from_dict(data: Mapping[str, Any], *, source: str = "dict") -> Tuning:
    """A :class:`Tuning` from parsed JSON; unknown keys (measurements, notes) are ignored."""
    if not isinstance(data, Mapping):
        raise TuningError(f"{source}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version", TUNING_VERSION)
    if version != TUNING_VERSION:
        raise TuningError(f"{source}: tuning version {version!r}, this swing_mpi reads version {TUNING_VERSION}")
    missing = [k for k in ("alpha", "beta", "gamma") if k not in data]
    if missing:
        raise TuningError(f"{source}: missing {', '.join(missing)}")
    try:
        return Tuning(alpha=data["alpha"], beta=data["beta"], gamma=data["gamma"],
                      native_below_bytes=data.get("native_below_bytes"), source=str(source),
                      concurrent_lanes=data.get("concurrent_lanes", True))
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


def load_tuning(path: str | os.PathLike[str] | None = None) -> Tuning:
    """The tuning of this process (not collective; see :func:`tuning_for_comm`).

    Args:
        path: a JSON file to read. Errors in it raise :class:`TuningError`.

    Without ``path``: ``$SWING_MPI_TUNING`` (``default`` or ``defaults``
    selects the built-in constants), else the config file
    (:func:`default_tuning_path`) if it exists, else :data:`DEFAULT_TUNING`.
    A file found this way that cannot be used (unreadable, not JSON, a missing
    or negative constant) gives a ``RuntimeWarning`` naming the file and the
    problem, and the defaults: a broken config file must not stop a program's
    allreduce.
    """
    if path is not None:
        return _read(Path(path))
    env = os.environ.get(TUNING_ENV, "").strip()
    if env.lower() in ("default", "defaults"):
        return DEFAULT_TUNING
    if env:
        candidate, where = Path(env).expanduser(), f"${TUNING_ENV}"
    else:
        candidate, where = default_tuning_path(), "config file"
        if not candidate.is_file():
            return DEFAULT_TUNING
    try:
        return _read(candidate)
    except TuningError as e:
        warnings.warn(f"swing_mpi: ignoring the tuning from {where}: {e}; using the built-in defaults",
                      RuntimeWarning, stacklevel=2)
        return DEFAULT_TUNING


def save_tuning(tuning: Tuning, path: str | os.PathLike[str], *, extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``tuning`` (and ``extra`` keys, e.g. measurements) as JSON, creating the folder."""
    path = Path(path)
    data = dict(extra or {})
    data.update(tuning.to_dict())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path


def tuning_for_comm(comm: Any) -> Tuning:
    """The tuning for a communicator, equal on all its ranks (collective).

    Rank 0 runs :func:`load_tuning` and broadcasts the result, so ranks on
    hosts with different files (or none) still choose the same algorithm.
    Call it once per communicator (on first use) and keep the result.
    """
    if comm.Get_size() == 1:
        return _load_never_raising()
    tuning = _load_never_raising() if comm.Get_rank() == 0 else None
    return comm.bcast(tuning, root=0)


def _load_never_raising() -> Tuning:
    """:func:`load_tuning`, but the defaults (with a warning) on any error: the other
    ranks wait in the broadcast, so rank 0 must always reach it.
    """
    try:
        return load_tuning()
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"swing_mpi: cannot load the tuning ({type(e).__name__}: {e}); using the built-in defaults",
                      RuntimeWarning, stacklevel=3)
        return DEFAULT_TUNING


# -- the table ----------------------------------------------------------------------

def _dims_of(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int):
        return (shape,)
    if isinstance(shape, str):
        return tuple(int(x) for x in shape.lower().replace("*", "x").split("x"))
    return tuple(int(x) for x in shape)


def auto_table(shapes: Iterable[Any], sizes: Iterable[int], *, dtype_itemsize: int = 8, exact: bool = False,
               tuning: Tuning | None = None, commutative: bool = True) -> str:
    """A markdown table: what ``auto`` picks, one row per size, one column per torus shape.

    Args:
        shapes: torus shapes: ``16`` (a ring), ``(4, 4)`` or ``"2x2x4"``.
        sizes: vector bytes (rounded down to whole elements, at least one).
        dtype_itemsize: bytes per element (8: float64 / int64).
        exact: ``False`` for floating-point SUM (swing-lat's contributions
            form), ``True`` for integer SUM and other exact ops.
        tuning: default :data:`DEFAULT_TUNING`.
    """
    tuning = tuning or DEFAULT_TUNING
    dims_list = [_dims_of(s) for s in shapes]
    sizes = list(sizes)
    heads = ["size"] + ["x".join(map(str, d)) + (" (ring)" if len(d) == 1 else "") for d in dims_list]
    rows = []
    for n in sizes:
        count = max(1, int(n) // dtype_itemsize)
        row = [format_size(count * dtype_itemsize)]
        for d in dims_list:
            row.append(choose(math.prod(d), d, count, dtype_itemsize, exact=exact, commutative=commutative,
                              tuning=tuning))
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(heads)]
    line = lambda cells: "| " + " | ".join(c.rjust(w) if i == 0 else c.ljust(w)  # noqa: E731
                                           for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    out = [line(heads), "|" + "|".join("-" * (w + 1) + (":" if i == 0 else "-") for i, w in enumerate(widths)) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)
