"""``auto``: which algorithm runs, from measurements where there are some and the model elsewhere.

Algorithm:
    1. Candidates: every registered algorithm valid for the call (a
       commutative-only algorithm needs a commutative op; the algorithm must
       build a schedule on this torus; a reduce-scatter or all-gather needs an
       algorithm the registry marks for it), plus ``native`` (the MPI
       library's own collective) when its result is bit-identical on every
       rank for this op and datatype.
    2. Measured: if the tuning holds a decision table measured by
       ``swing-mpi calibrate`` for this ``p``, torus dims, op class (exact or
       not) and commutativity, every candidate in it is priced from it
       (interpolated log-log between measured sizes,
       :meth:`~swing_mpi.tuning.DecisionTable.time`) and the fastest wins;
       ``native`` unless ours is at least :data:`NATIVE_MARGIN` faster.
    3. Modelled: otherwise ``native`` below ``Tuning.native_below_bytes``,
       else the candidate with the least modelled time
       ``K·α + n·(moved·β + reduced·γ)`` (:mod:`swing_mpi.model.features`):
       with routed link sharing on a ``torus`` network, without on a ``flat``
       one. On a torus, candidates are routed cheapest lower bound first and
       the search stops when no bound beats the best routed cost by more than
       :data:`MODEL_RESOLUTION`.

    4. Tried (:mod:`swing_mpi.online`): where a measured table holds other
       candidates close to the fastest at the call's size (within
       :data:`TRIAL_FACTOR`, at most :data:`TRIAL_MAX` in all), ``auto``'s
       first blocking calls of that size run them in turn and keep the
       fastest on this launch; :func:`contenders` names them.

    Ties go to the candidate registered first. The same inputs give the same
    choice (no clock, no rank, no environment here), and
    :func:`swing_mpi.tuning.tuning_for_comm` gives every rank the same tuning.

Cost:
    A decision is cached per (p, dims, bytes, op class, tuning). A new torus
    costs reading a few schedules per candidate once (cached per algorithm
    and dims); every size after that is O(1) per candidate. The API's repeat
    cache skips the decision on repeated calls altogether.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .model.features import Coefficients, coefficients, lower_bound, probe_counts
from .schedule import ALGORITHMS, AUTO, NATIVE, algorithm_info
from .tuning import DEFAULT_TUNING, Tuning, TuningError, load_tuning, network_for, save_tuning, tuning_for_comm

__all__ = [
    "choose", "resolve", "candidates", "contenders", "explain", "Estimate", "Decision", "choose_collective",
    "algorithm_names", "COLLECTIVES", "NONCOMMUTATIVE",
    # the tuning it decides with (defined in swing_mpi.tuning)
    "Tuning", "TuningError", "DEFAULT_TUNING", "load_tuning", "save_tuning", "tuning_for_comm",
]

NONCOMMUTATIVE = "recdoub"
"""What a commutative-only algorithm asked for by name runs with a non-commutative op."""
COLLECTIVES = ("allreduce", "reduce_scatter", "allgather")
NATIVE_MARGIN = 0.05
"""In a measured table, ours must beat ``native`` by this fraction to be picked: within the noise of a
measurement, the MPI library's own path is the safer bet."""
TRIAL_FACTOR = 2.5
"""A measured candidate this many times the fastest one's time or less is close enough to try on a launch's
first calls: on a machine shared by more ranks than cores, MPICH with 4 ranks on 2 cores ran a 1 MiB
allreduce in one of several modes drawn per launch, in which the fastest of MPI_Allreduce and recdoub
differed by up to 2.2x either way, and a calibration sees the mode of its own launch only."""
TRIAL_MAX = 3
"""At most this many contenders (the table's pick among them) are tried per size."""
MODEL_RESOLUTION = 0.05
"""On a torus, a candidate whose lower bound leaves it less than this fraction to gain over the best
routed cost so far is not routed: the model is not that precise, and routing a large torus is slow."""


@dataclass(frozen=True)
class Estimate:
    """One candidate's price for a call and where it came from."""

    algorithm: str
    seconds: float | None
    """``None``: no number (not measured there, or ``native`` where nothing was measured)."""
    source: str
    """``measured``, ``model`` or ``rule``."""
    detail: str


@dataclass(frozen=True)
class Decision:
    """The pick and every candidate's :class:`Estimate`."""

    pick: str
    source: str
    estimates: tuple[Estimate, ...]
    tried: tuple[str, ...] = ()
    """What blocking allreduces of this size try on a launch's first calls (:func:`contenders`); empty: none."""


def _supports(algorithm: str, collective: str) -> bool:
    return collective in algorithm_info(algorithm).collectives


@lru_cache(maxsize=4096)
def _valid(algorithm: str, dims: tuple[int, ...], exact: bool, part: str) -> bool:
    """Tell whether ``algorithm`` builds a schedule on ``dims`` (some shapes may be outside its reach)."""
    try:
        probe_counts(algorithm, dims, exact, part)
    except (ValueError, NotImplementedError):
        return False
    return True


def _registered(commutative: bool, collective: str) -> list[str]:
    return [a for a, info in ALGORITHMS.items()
            if (commutative or not info.commutative_only) and _supports(a, collective)]


def candidates(dims: Sequence[int], *, exact: bool, commutative: bool, native_ok: bool = True,
               collective: str = "allreduce") -> tuple[str, ...]:
    """Every algorithm ``auto`` may run for such a call, in registry order, ``native`` last."""
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {collective!r}")
    dims_t = tuple(int(d) for d in dims)
    out = [a for a in _registered(commutative, collective) if _valid(a, dims_t, bool(exact), collective)]
    if native_ok:
        out.append(NATIVE)
    return tuple(out)


def _model_time(c: Coefficients, nbytes: int, tuning: Tuning) -> float:
    return c.time(nbytes, tuning.alpha, tuning.beta, tuning.gamma)


def _model_pick(ours: Sequence[str], dims: tuple[int, ...], nbytes: int, exact: bool, tuning: Tuning,
                collective: str) -> str:
    """Least modelled time; on a torus, routed only where a candidate's lower bound can still win."""
    part = collective  # the part of an allreduce schedule this collective is (model.features.PARTS)
    order = list(ours)
    best, best_t = order[0], math.inf
    if network_for(tuning, dims) == "torus":
        bounds = {a: _model_time(lower_bound(a, dims, exact=exact, part=part), nbytes, tuning) for a in order}
        for a in sorted(order, key=lambda a: (bounds[a], order.index(a))):
            if bounds[a] >= best_t * (1.0 - MODEL_RESOLUTION):
                break
            try:
                t = _model_time(coefficients(a, dims, exact=exact, network="torus", part=part), nbytes, tuning)
            except ValueError:  # too large to route (model.routing.FULL_BUILD_LIMIT): not a candidate here
                continue
            if t < best_t or (t == best_t and order.index(a) < order.index(best)):
                best, best_t = a, t
        return best
    for a in order:
        t = _model_time(coefficients(a, dims, exact=exact, network="flat", part=part), nbytes, tuning)
        if t < best_t:
            best, best_t = a, t
    return best


@lru_cache(maxsize=4096)
def _decide(p: int, dims: tuple[int, ...], nbytes: int, exact: bool, commutative: bool, native_ok: bool,
            tuning: Tuning, collective: str) -> tuple[str, str]:
    if math.prod(dims) != p:
        raise ValueError(f"dims {'x'.join(map(str, dims))} hold {math.prod(dims)} ranks, not {p}")
    registered = _registered(commutative, collective)
    table = tuning.table_for(p, dims, exact=exact, commutative=commutative, collective=collective)
    if table is not None:  # measured on these dims: every candidate in it built and ran there
        best, best_t = "", math.inf
        for a in registered:
            t, _ = table.time(a, nbytes)
            if t is not None and t < best_t:
                best, best_t = a, t
        t_native = table.time(NATIVE, nbytes)[0] if native_ok else None
        if t_native is not None and not best_t < (1.0 - NATIVE_MARGIN) * t_native:
            return NATIVE, "measured"
        if best:
            return best, "measured"
    if native_ok and tuning.native_below_bytes is not None and nbytes < tuning.native_below_bytes:
        return NATIVE, "rule"
    ours = [a for a in registered if _valid(a, dims, exact, collective)]
    if not ours:
        if native_ok:
            return NATIVE, "rule"
        raise ValueError(f"no algorithm can run this {collective} on dims {'x'.join(map(str, dims))}")
    return _model_pick(ours, dims, nbytes, exact, tuning, collective), "model"


@lru_cache(maxsize=4096)
def _contenders(p: int, dims: tuple[int, ...], nbytes: int, exact: bool, commutative: bool, native_ok: bool,
                tuning: Tuning, collective: str) -> tuple[tuple[str, float], ...]:
    pick, how = _decide(p, dims, nbytes, exact, commutative, native_ok, tuning, collective)
    table = tuning.table_for(p, dims, exact=exact, commutative=commutative, collective=collective)
    if how != "measured" or table is None:
        return ()
    allowed = set(_registered(commutative, collective)) | ({NATIVE} if native_ok else set())
    priced = [(a, t) for a in table.candidates if a in allowed for t in [table.time(a, nbytes)[0]] if t is not None]
    if not priced:
        return ()
    fastest = min(t for _, t in priced)
    close = sorted((x for x in priced if x[0] != pick and x[1] <= TRIAL_FACTOR * fastest),
                   key=lambda x: (x[1], table.candidates.index(x[0])))
    mine = [x for x in priced if x[0] == pick]
    if not mine:
        return ()
    tried = (mine + close)[:TRIAL_MAX]
    native = [x for x in close if x[0] == NATIVE]
    if native and native[0] not in tried and len(tried) > 1:  # MPI's own call is always tried when close
        tried[-1] = native[0]
    return tuple(tried)


def contenders(p: int, dims: Sequence[int], nbytes: int, *, exact: bool, commutative: bool = True,
               native_ok: bool = True, tuning: Tuning | None = None,
               collective: str = "allreduce") -> tuple[tuple[str, float], ...]:
    """Return what ``auto`` tries on a launch's first calls of this size: ``(algorithm, measured seconds)``.

    The pick of :func:`choose` first, then the other candidates of the
    measured table within :data:`TRIAL_FACTOR` of the fastest, fastest first,
    :data:`TRIAL_MAX` in all; ``native`` among them whenever it is that close
    (in the last place if it would not make the cut: ``auto`` must not lose
    to the MPI library's own call on a launch where that is fastest). Empty
    where the decision is not from a measured table (the model or a rule
    decides: nothing was measured to try against); a single entry where
    nothing else is close.
    """
    return _contenders(int(p), tuple(int(d) for d in dims), int(nbytes), bool(exact), bool(commutative),
                       bool(native_ok), tuning or DEFAULT_TUNING, collective)


def choose(p: int, dims: Sequence[int], count: int, itemsize: int, *, exact: bool, commutative: bool,
           native_ok: bool = True, tuning: Tuning | None = None) -> str:
    """Name the algorithm ``auto`` runs for an allreduce (the same on every rank for the same arguments).

    Args:
        p: communicator size (the product of ``dims``).
        dims: torus dims the schedules run on.
        count, itemsize: vector elements and bytes per element.
        exact: the op gives the same bits in any grouping (integer SUM, MAX, …).
        commutative: ``op.Is_commutative()``.
        native_ok: ``MPI_Allreduce``'s result is bit-identical on every rank for this op and datatype.
        tuning: equal on all ranks (:func:`swing_mpi.tuning.tuning_for_comm`); default
            :data:`~swing_mpi.tuning.DEFAULT_TUNING`.
    """
    return _decide(int(p), tuple(int(d) for d in dims), int(count) * int(itemsize), bool(exact),
                   bool(commutative), bool(native_ok), tuning or DEFAULT_TUNING, "allreduce")[0]


def choose_collective(collective: str, p: int, dims: Sequence[int], nbytes: int, *, exact: bool,
                      commutative: bool, native_ok: bool = True, tuning: Tuning | None = None) -> str:
    """Name the algorithm ``auto`` runs for ``collective`` on a vector of ``nbytes`` (the whole vector).

    For ``reduce_scatter`` and ``allgather`` the candidates are the algorithms
    the registry marks for that collective plus ``native``; a measured table
    for that collective decides where there is one, else the model prices
    the half of each allreduce schedule that the collective is.
    """
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {collective!r}")
    return _decide(int(p), tuple(int(d) for d in dims), int(nbytes), bool(exact), bool(commutative),
                   bool(native_ok), tuning or DEFAULT_TUNING, collective)[0]


def explain(p: int, dims: Sequence[int], nbytes: int, *, exact: bool, commutative: bool = True,
            native_ok: bool = True, tuning: Tuning | None = None, collective: str = "allreduce") -> Decision:
    """Return the pick and every candidate's measured or modelled time, with where each number comes from."""
    tuning = tuning or DEFAULT_TUNING
    dims_t = tuple(int(d) for d in dims)
    pick, how = _decide(int(p), dims_t, int(nbytes), bool(exact), bool(commutative), bool(native_ok), tuning,
                        collective)
    cands = candidates(dims_t, exact=exact, commutative=commutative, native_ok=native_ok, collective=collective)
    table = tuning.table_for(int(p), dims_t, exact=exact, commutative=commutative, collective=collective)
    out = []
    for a in cands:
        if table is not None and how == "measured":
            t, detail = table.time(a, nbytes)
            if t is not None or a in table.candidates:
                out.append(Estimate(a, t, "measured", f"table p={table.p} dims {'x'.join(map(str, table.dims))}"
                                                      f" {'exact' if table.exact else 'inexact'}: {detail}"))
                continue
            out.append(Estimate(a, None, "measured", "not in the measured table (registered after calibration)"))
            continue
        if a == NATIVE:
            nb = tuning.native_below_bytes
            out.append(Estimate(a, None, "rule", "no measured table for this call: the model hands "
                                + ("no vector" if nb is None else f"vectors below {nb} B")
                                + " to MPI_Allreduce (native_below_bytes)"))
            continue
        net = network_for(tuning, dims_t)
        try:
            c = coefficients(a, dims_t, exact=exact, network=net, part=collective)
        except ValueError as err:  # too large to route (model.routing.FULL_BUILD_LIMIT): auto skips it too
            out.append(Estimate(a, None, "model", f"not priced, not a candidate here: {err}"))
            continue
        how_net = "routed link loads" if net == "torus" else "no link sharing"
        out.append(Estimate(a, _model_time(c, nbytes, tuning), "model",
                            f"{net} model ({how_net}): {c.steps} steps x alpha + "
                            f"n x ({c.moved:.4g} x beta + {c.reduced:.4g} x gamma)"))
    tried: tuple[str, ...] = ()
    if collective == "allreduce":
        close = contenders(int(p), dims_t, int(nbytes), exact=exact, commutative=commutative, native_ok=native_ok,
                           tuning=tuning)
        tried = tuple(a for a, _ in close) if len(close) > 1 else ()
    return Decision(pick, how, tuple(out), tried)


def resolve(requested: str, p: int, dims: Sequence[int], count: int, itemsize: int, *, exact: bool,
            commutative: bool, native_ok: bool, tuning: Tuning | None = None) -> str:
    """Name the algorithm that really runs for a request (``auto``, ``native`` or a registered name).

    Args:
        requested: what the caller asked for (already defaulted from the environment).
        p, dims, count, itemsize: as for :func:`choose`.
        exact: the op gives the same bits in any grouping.
        commutative: ``op.Is_commutative()``.
        native_ok: the MPI library's result is bit-identical on every rank for
            this op and datatype (``auto`` considers ``native`` only then).
        tuning: as for :func:`choose`.

    A commutative-only algorithm asked for by name with a non-commutative op
    runs ``recdoub`` (order-preserving) instead; ``native`` runs as asked.
    """
    if requested == AUTO:
        return choose(p, dims, count, itemsize, exact=exact, commutative=commutative, native_ok=native_ok,
                      tuning=tuning)
    if requested == NATIVE:
        return NATIVE
    if algorithm_info(requested).commutative_only and not commutative:
        return NONCOMMUTATIVE
    return requested


def algorithm_names() -> tuple[str, ...]:
    """Every name a caller may ask for: ``auto``, ``native`` and the registered algorithms."""
    return (AUTO, NATIVE) + tuple(ALGORITHMS)
