"""The decision: which algorithm runs for a call, and why (the one place that decides).

:func:`decide` takes what a call asks for (a name, ``native`` or ``auto``), the
op's facts (commutative, exact, whether MPI's result is bit-identical on every
rank), the tuning (a measured table and the model's constants) and, for
``auto``'s first calls of a size, the run-time trial (:mod:`swing_mpi.online`),
and returns one :class:`Decision`: the algorithm, why, the price of every
candidate and the contenders a trial may try. Everything that picks an
algorithm (the API, ``explain``/``swing-mpi choose``, ``calibrate``'s report, the
trial) reads it and the constants below; nothing else decides.

``auto`` prices every candidate from a measured table where one matches the
call (``native`` unless ours is :data:`NATIVE_MARGIN` faster), else hands small
vectors to MPI (``Tuning.native_below_bytes``), else takes the least modelled
time (:mod:`swing_mpi.model.features`). A non-commutative op runs only what
keeps rank order (:func:`keeps_order`), for every collective alike. The same
inputs give the same decision on every rank (no clock, no rank, no environment
here); the pure part is cached per (request, p, dims, bytes, op facts, tuning).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from statistics import median  # not numpy's: its first call in a process costs 14 ms (a trial's verdict)
from typing import Any

import numpy as np

from .model.features import Coefficients, coefficients, lower_bound, probe_counts
from .schedule import ALGORITHMS, AUTO, NATIVE, algorithm_info
from .tuning import (
    DEFAULT_TUNING,
    Tuning,
    TuningError,
    load_tuning,
    native_below,
    network_for,
    save_tuning,
    tuning_for_comm,
)

__all__ = [
    "decide", "Decision", "Estimate", "explain", "choose", "resolve", "choose_collective", "candidates",
    "contenders", "keeps_order", "supports", "check_name", "cache_clear", "algorithm_names", "clearly_faster",
    "trial_verdict", "node_form", "node_lanes", "NODE_FORMS", "NODE_FORM_FACTOR",
    "COLLECTIVES", "NONCOMMUTATIVE", "NATIVE_MARGIN", "CLOSE_FACTOR", "MODEL_CLOSE_FACTOR", "TRIAL_MAX",
    "SWITCH_MARGIN", "SWITCH_Z",
    "MODEL_RESOLUTION", "NATIVE_BELOW_MARGIN",
    # the tuning it decides with (defined in swing_mpi.tuning)
    "Tuning", "TuningError", "DEFAULT_TUNING", "load_tuning", "save_tuning", "tuning_for_comm",
]

NONCOMMUTATIVE = "recdoub"
"""What an allreduce asked for by a name that needs a commutative op runs with a non-commutative one."""
COLLECTIVES = ("allreduce", "reduce_scatter", "allgather")

# -- the decision's constants: each margin and factor is defined here, and only here --------------
NATIVE_MARGIN = 0.05
"""In a measured table, ours must beat ``native`` by this fraction to be picked: within the noise of a
measurement, the MPI library's own path is the safer bet."""
CLOSE_FACTOR = 1.25
"""Candidates within this factor of the fastest in a table are ones a table cannot tell apart: calibrate
gives them rounds of their own, and ``auto`` tries those within it of its pick on a launch's first calls.
Farther ones are not tried: a user's first calls are part of their run (docs/auto.md)."""
MODEL_CLOSE_FACTOR = 2.0
"""Without a measured table, ``auto`` tries on a launch's first calls the fastest candidate of each other form
(latency, bandwidth) whose modelled time is within this factor of the model's pick: the model knows steps
and bytes, not an MPI library's protocol switches (MPICH's shared memory sends 8-16 KiB messages at half
the speed of 4 KiB ones, which makes ``swing-bw`` 1.6x faster than the modelled pick there)."""
TRIAL_MAX = 3
"""At most this many contenders (the table's pick among them) are tried per size."""
SWITCH_MARGIN = 0.05
"""A tried contender replaces the table's pick only if its median is at least this fraction less."""
SWITCH_Z = 2.33
"""How sure a switch must be: one-sided, about 1 % that a contender no faster than the pick looks it."""
MODEL_RESOLUTION = 0.05
"""On a torus, a candidate whose lower bound leaves it less than this fraction to gain over the best
routed cost so far is not routed: the model is not that precise, and routing a large torus is slow."""
NATIVE_BELOW_MARGIN = 0.10
"""Calibrate sets ``native_below_bytes`` where ``native`` was at least this fraction faster than all of ours."""
NODE_FORMS = ("nodes", "flat")
"""How an allreduce on a torus of nodes runs: the node phases around the torus algorithm among nodes
(:mod:`swing_mpi.nodes`), or the torus algorithm over all ranks on ``dims + (K,)``."""
NODE_FORM_FACTOR = 3.0
"""On a torus of nodes, ``auto`` tries every form whose modelled time is within this factor of the least:
the model knows neither the network nor what a node phase costs in this library's Python (on the 2-core
VM, 30 us a call where it models 0.2 us: benchmarks/results/nodes-auto), so the first calls measure."""


@dataclass(frozen=True)
class Estimate:
    """One candidate's price for a call and where it came from."""

    algorithm: str
    seconds: float | None
    """``None``: no number (not measured there, or ``native`` where nothing was measured)."""
    source: str
    """``measured``, ``model`` or ``rule``."""
    detail: str
    bound: float | None = None
    """Seconds: a lower bound on the time of a candidate the model did not route (``seconds`` is ``None``)."""


@dataclass(frozen=True)
class Decision:
    """What runs for a call, why, and every candidate's price."""

    algorithm: str
    why: str
    """``requested``, ``order`` (a non-commutative op: see :func:`keeps_order`), ``measured``, ``rule``,
    ``model``, ``trial`` (a trial call) or ``tried`` (a finished trial's result)."""
    estimates: tuple[Estimate, ...] = ()
    contenders: tuple[tuple[str, float], ...] = ()
    """What ``auto``'s first blocking calls of this size try: ``(algorithm, measured seconds)``, the table's
    pick first; empty where nothing is tried."""

    @property
    def pick(self) -> str:
        """The algorithm (an older name)."""
        return self.algorithm

    @property
    def source(self) -> str:
        """Why (an older name)."""
        return self.why

    @property
    def tried(self) -> tuple[str, ...]:
        """The contenders' names."""
        return tuple(a for a, _ in self.contenders)


def algorithm_names() -> tuple[str, ...]:
    """Every name a caller may ask for: ``auto``, ``native`` and the registered algorithms."""
    return (AUTO, NATIVE) + tuple(ALGORITHMS)


def check_name(name: str) -> str:
    """Return ``name`` if a caller may ask for it, else raise ``ValueError`` naming the known ones."""
    if name not in _NAMES:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(algorithm_names())}")
    return name


_NAMES = frozenset(algorithm_names())


def supports(algorithm: str | None, collective: str) -> bool:
    """Tell whether a named algorithm runs ``collective`` (``auto``/``native``/``None``/unknown: yes, let it decide)."""
    if algorithm is None or algorithm in (AUTO, NATIVE) or algorithm not in ALGORITHMS:
        return True
    return collective in algorithm_info(algorithm).collectives


def keeps_order(algorithm: str, collective: str) -> bool:
    """Tell whether ``algorithm`` reduces in rank order for ``collective`` (what a non-commutative op needs).

    The one rule for non-commutative ops: an allreduce schedule keeps order unless the registry marks it
    commutative-only; our reduce-scatter halves reduce each block in their schedule's order, so none does
    (the MPI library's own collective runs); an all-gather reduces nothing. ``native`` always does.
    """
    if algorithm == NATIVE or collective == "allgather":
        return True
    if collective == "reduce_scatter":
        return False
    return not algorithm_info(algorithm).commutative_only


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
            if collective in info.collectives and (commutative or keeps_order(a, collective))]


def candidates(dims: Sequence[int], *, exact: bool, commutative: bool, native_ok: bool = True,
               collective: str = "allreduce") -> tuple[str, ...]:
    """Every algorithm ``auto`` may run for such a call, in registry order, ``native`` last."""
    _check_collective(collective)
    dims_t = tuple(int(d) for d in dims)
    out = [a for a in _registered(commutative, collective) if _valid(a, dims_t, bool(exact), collective)]
    if native_ok:
        out.append(NATIVE)
    return tuple(out)


def _check_collective(collective: str) -> None:
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {collective!r}")


def _model_time(c: Coefficients, nbytes: int, tuning: Tuning) -> float:
    return c.time(nbytes, tuning.alpha, tuning.beta, tuning.gamma)


def _model(ours: Sequence[str], dims: tuple[int, ...], nbytes: int, exact: bool, tuning: Tuning,
           collective: str) -> tuple[str, list[Estimate]]:
    """Least modelled time and every candidate's price; on a torus, routed only where a lower bound can still win."""
    order = list(ours)
    best, best_t = order[0], math.inf
    out: dict[str, Estimate] = {}
    net = network_for(tuning, dims)
    how = "routed link loads" if net == "torus" else "no link sharing"

    def price(c: Coefficients) -> Estimate:
        return Estimate(c.algorithm, _model_time(c, nbytes, tuning), "model",
                        f"{net} model ({how}): {c.steps} steps x alpha + "
                        f"n x ({c.moved:.4g} x beta + {c.reduced:.4g} x gamma)")

    if net == "torus":
        bounds = {a: lower_bound(a, dims, exact=exact, part=collective) for a in order}
        times = {a: _model_time(b, nbytes, tuning) for a, b in bounds.items()}
        for a in sorted(order, key=lambda a: (times[a], order.index(a))):
            if times[a] >= best_t * (1.0 - MODEL_RESOLUTION):
                out[a] = Estimate(a, None, "model", f"not routed: its lower bound (>= in the time column) cannot "
                                                    f"beat {best} by {MODEL_RESOLUTION:.0%}", bound=times[a])
                continue
            try:
                e = price(coefficients(a, dims, exact=exact, network="torus", part=collective))
            except ValueError as err:  # too large to route (model.routing.FULL_BUILD_LIMIT): not a candidate here
                out[a] = Estimate(a, None, "model", f"not priced, not a candidate here: {err}")
                continue
            out[a] = e
            assert e.seconds is not None
            if e.seconds < best_t or (e.seconds == best_t and order.index(a) < order.index(best)):
                best, best_t = a, e.seconds
    else:
        for a in order:
            e = out[a] = price(coefficients(a, dims, exact=exact, network="flat", part=collective))
            assert e.seconds is not None
            if e.seconds < best_t:
                best, best_t = a, e.seconds
    return best, [out[a] for a in order]


def _model_tried(pick: str, est: Sequence[Estimate]) -> tuple[tuple[str, float], ...]:
    """Return the model's pick, then the fastest of each other form within :data:`MODEL_CLOSE_FACTOR` of it."""
    priced = {e.algorithm: e.seconds for e in est if e.seconds is not None}
    mine = priced.get(pick)
    if mine is None:
        return ()
    out, forms = [(pick, mine)], {algorithm_info(pick).form}
    for a, t in sorted(priced.items(), key=lambda x: x[1]):
        form = algorithm_info(a).form
        if form not in forms and t <= MODEL_CLOSE_FACTOR * mine:
            out.append((a, t))
            forms.add(form)
    return tuple(out) if len(out) > 1 else ()


def _tried(table: Any, pick: str, allowed: set[str], nbytes: int) -> tuple[tuple[str, float], ...]:
    """Return the table's pick, then the others within :data:`CLOSE_FACTOR` of it, fastest first, ``native`` kept."""
    priced = [(a, t) for a in table.candidates if a in allowed for t in [table.time(a, nbytes)[0]] if t is not None]
    mine = [x for x in priced if x[0] == pick]
    if not mine:
        return ()
    close = sorted((x for x in priced if x[0] != pick and x[1] <= CLOSE_FACTOR * mine[0][1]),
                   key=lambda x: (x[1], table.candidates.index(x[0])))
    tried = (mine + close)[:TRIAL_MAX]
    native = [x for x in close if x[0] == NATIVE]
    if native and native[0] not in tried and len(tried) > 1:  # MPI's own call is always tried when close
        tried[-1] = native[0]
    return tuple(tried) if len(tried) > 1 else ()


@lru_cache(maxsize=4096)
def _auto(p: int, dims: tuple[int, ...], nbytes: int, exact: bool, commutative: bool, native_ok: bool,
          tuning: Tuning, collective: str) -> Decision:
    """``auto``'s decision without a trial (cached: pure in its arguments)."""
    if math.prod(dims) != p:
        raise ValueError(f"dims {'x'.join(map(str, dims))} hold {math.prod(dims)} ranks, not {p}")
    registered = _registered(commutative, collective)
    table = tuning.table_for(p, dims, exact=exact, commutative=commutative, collective=collective)
    if table is not None:  # measured on these dims: every candidate in it built and ran there
        where = f"table p={table.p} dims {'x'.join(map(str, table.dims))} {'exact' if table.exact else 'inexact'}"
        est, best, best_t = [], "", math.inf
        for a in [*registered, *([NATIVE] if native_ok else [])]:
            t, detail = table.time(a, nbytes)
            if t is None and a not in table.candidates:
                detail = "not in the measured table (registered after calibration)"
            est.append(Estimate(a, t, "measured", f"{where}: {detail}"))
            if a != NATIVE and t is not None and t < best_t:
                best, best_t = a, t
        t_native = table.time(NATIVE, nbytes)[0] if native_ok else None
        pick = NATIVE if t_native is not None and not best_t < (1.0 - NATIVE_MARGIN) * t_native else best
        if pick:
            allowed = set(registered) | ({NATIVE} if native_ok else set())
            tried = _tried(table, pick, allowed, nbytes) if collective == "allreduce" else ()
            return Decision(pick, "measured", tuple(est), tried)
    ours = [a for a in registered if _valid(a, dims, exact, collective)]
    nb = native_below(tuning)
    rule = Estimate(NATIVE, None, "rule", "no measured table for this call: the model hands "
                    + ("no vector" if nb is None else f"vectors below {nb} B") + " to MPI (native_below_bytes)"
                    + (", and one rank's (a copy)" if p == 1 else ""))
    to_mpi = native_ok and (nb is not None and nbytes < nb or p == 1) or not ours
    if to_mpi:
        if not native_ok:
            raise ValueError(f"no algorithm can run this {collective} on dims {'x'.join(map(str, dims))}")
        if p == 1 or not ours or tuning is not DEFAULT_TUNING or collective != "allreduce":
            return Decision(NATIVE, "rule", (rule,))
    best, est = _model(ours, dims, nbytes, exact, tuning, collective)
    if to_mpi:
        # the built-in threshold is a guess about an MPI library measured elsewhere: MPI's call first, the
        # model's pick tried against it on the launch's first calls (kept only where clearly faster)
        mine = next((e.seconds for e in est if e.algorithm == best), None)
        tried = () if mine is None else ((NATIVE, mine), (best, mine))
        return Decision(NATIVE, "rule", tuple(est) + (rule,), tried)
    tried = _model_tried(best, est) if collective == "allreduce" else ()
    return Decision(best, "model", tuple(est) + ((rule,) if native_ok else ()), tried)


def node_lanes(nbytes: int, count: int, k: int, chunk: int) -> int:
    """Return how many of a node's ``k`` ranks run the torus phase for ``nbytes`` (``count`` elements).

    ``chunk``: the bytes a lane gets at least (``$SWING_MPI_NODE_CHUNK``; 0: all ``k``).
    """
    want = k if chunk == 0 else max(1, nbytes // max(1, chunk))
    return max(1, min(k, want, count))


@lru_cache(maxsize=1024)
def node_form(nodes: tuple[int, ...], k: int, nbytes: int, itemsize: int, lanes: int, *, exact: bool,
              commutative: bool = True, native_ok: bool = True, tuning: Tuning | None = None) -> Decision:
    """Return ``auto``'s form (:data:`NODE_FORMS`) for an allreduce of ``nbytes`` on a torus of nodes (no trial).

    ``nodes``: the torus of nodes; ``k`` ranks a node; ``lanes``: the node's ranks the node form runs the
    torus phase on (:func:`swing_mpi.nodes.lanes_for`). Where ``auto`` over all ranks hands the vector to
    MPI by rule (``native_below_bytes``), ``flat`` (MPI's call) without a trial. Otherwise both forms
    are priced by :func:`swing_mpi.model.node_phases.model_forms` with the tuning's ``alpha`` (a step and
    a barrier round), ``1/beta`` (a link) and ``gamma`` (a core's reduction), each with ``auto``'s pick on
    its dims (``recdoub`` standing for MPI's call); contenders: the forms within
    :data:`NODE_FORM_FACTOR` of the least, ``flat`` first. A trial keeps its first contender unless
    another is clearly faster (:func:`trial_verdict`), and ``flat`` is the one a trial underrates: once
    settled it runs on the repeat path (the arrays' record), which no trial call takes (on the 2-core
    VM, 64 KiB: 30 us a trial call, 13 us settled, against 40 us for ``nodes`` either way).
    """
    from .model.node_phases import NodeCosts, model_forms

    tuning = tuning or DEFAULT_TUNING
    m = math.prod(nodes)
    flat = (*nodes, k)
    nb = native_below(tuning)
    rule = Decision("flat", "rule", (Estimate("flat", None, "rule", f"auto over all ranks hands {nbytes} B to "
                                              "MPI (native_below_bytes): MPI's call over all ranks"),))
    if native_ok and nb is not None and nbytes < nb and tuning.table_for(
            m * k, flat, exact=exact, commutative=commutative) is None:
        return rule  # (before pricing anything: a large torus's model takes seconds to build)
    fd = decide(AUTO, m * k, flat, nbytes, exact=exact, commutative=commutative, native_ok=native_ok,
                tuning=tuning)
    if fd.algorithm == NATIVE and fd.why == "rule":
        return rule
    nd = decide(AUTO, m, nodes, -(-nbytes // max(1, lanes)), exact=exact, commutative=commutative,
                native_ok=native_ok, tuning=tuning)
    nc = NodeCosts(k, gamma_s_per_byte=tuning.gamma, c_gamma_s_per_byte=tuning.gamma, sync_s=tuning.alpha,
                   itemsize=max(1, itemsize))
    kw: dict[str, Any] = dict(alpha=tuning.alpha, link_bytes_per_s=1.0 / max(tuning.beta, 1e-30))
    est: list[Estimate] = []
    for form, d, key in (("nodes", nd, "multi_leader_s"), ("flat", fd, "flat_s")):
        alg = d.algorithm if d.algorithm in ALGORITHMS else "recdoub"
        t: Any
        try:
            t = model_forms(alg, nodes, nbytes, nc, **kw)[key]
        except ValueError:  # no schedule of it on these dims
            t = None
        where = f"among the nodes on {'x'.join(map(str, nodes))}" if form == "nodes" else \
            f"over all ranks on {'x'.join(map(str, flat))}"
        est.append(Estimate(form, None if t is None else float(t), "model",
                            f"node-phase model of {alg} ({d.algorithm} by auto) {where}"))
    priced = sorted((e for e in est if e.seconds is not None),
                    key=lambda e: (e.seconds, NODE_FORMS.index(e.algorithm)))
    if not priced:
        return Decision("nodes", "model", tuple(est))
    best = priced[0]
    assert best.seconds is not None
    close = sorted(((e.algorithm, float(e.seconds)) for e in priced
                    if e.seconds is not None and e.seconds <= NODE_FORM_FACTOR * best.seconds),
                   key=lambda c: c[0] != "flat")  # flat first: the reference a trial keeps unless clearly beaten
    return Decision(best.algorithm, "model", tuple(est), tuple(close) if len(close) > 1 else ())


_SEEN: dict[tuple, tuple[Tuning, Decision]] = {}
"""``auto``'s decisions by the tuning's identity (a dict lookup; the tuning itself is kept, so its id stays its)."""
_SEEN_MAX = 4096


def cache_clear() -> None:
    """Forget every cached decision (after the registry or the model changed, as tests do)."""
    _SEEN.clear()
    _auto.cache_clear()
    _named.cache_clear()
    node_form.cache_clear()


@lru_cache(maxsize=1024)
def _named(requested: str, collective: str, commutative: bool) -> Decision:
    """Decide for a name asked for: itself, or what keeps rank order for a non-commutative op (cached)."""
    if requested == NATIVE:
        return Decision(NATIVE, "requested")
    if not supports(requested, collective):
        ok = [a for a in algorithm_names() if supports(a, collective)]
        raise ValueError(f"{requested} has no {collective}; use one of {', '.join(ok)}")
    if commutative or keeps_order(requested, collective):
        return Decision(requested, "requested")
    if collective == "allreduce":
        return Decision(NONCOMMUTATIVE, "order")
    return Decision(NATIVE, "order")


def decide(requested: str, p: int, dims: Sequence[int], nbytes: int, *, exact: bool, commutative: bool = True,
           native_ok: bool = True, tuning: Tuning | None = None, collective: str = "allreduce",
           trial: Any = None, timed: bool = True) -> Decision:
    """Return the :class:`Decision` for a call: the one function that picks an algorithm.

    Args:
        requested: ``auto``, ``native`` or a registered name (already defaulted from the environment).
        p, dims: communicator size and the torus dims the schedules run on.
        nbytes: the whole vector's bytes (a reduce-scatter's input, an all-gather's output).
        exact: the op gives the same bits in any grouping (integer SUM, MAX, ...).
        commutative: ``op.Is_commutative()`` (``True`` for an all-gather).
        native_ok: the MPI library's result is bit-identical on every rank for this op and datatype.
        tuning: equal on all ranks (:func:`swing_mpi.tuning.tuning_for_comm`); default the built-in one.
        collective: ``allreduce``, ``reduce_scatter`` or ``allgather``.
        trial: ``auto``'s trial of this size (:class:`swing_mpi.online.Trial`), if any: its result once in;
            while it runs, a ``timed`` (blocking) call runs the contender whose turn it is, others the table's pick.
    """
    _check_collective(collective)
    check_name(requested)
    if requested != AUTO:
        return _named(requested, collective, bool(commutative))
    tuning = tuning or DEFAULT_TUNING
    dims_t = dims if type(dims) is tuple else tuple(int(x) for x in dims)
    key = (id(tuning), p, dims_t, nbytes, exact, commutative, native_ok, collective)
    hit = _SEEN.get(key)
    if hit is not None and hit[0] is tuning:  # the usual case: no hash of the tuning's tables
        d = hit[1]
    else:
        d = _auto(int(p), tuple(int(x) for x in dims_t), int(nbytes), bool(exact), bool(commutative),
                  bool(native_ok), tuning, collective)
        if len(_SEEN) >= _SEEN_MAX:
            _SEEN.clear()
        _SEEN[key] = (tuning, d)
    if trial is None:
        return d
    if trial.pick is not None:
        return d if trial.pick == d.algorithm else replace(d, algorithm=trial.pick, why="tried")
    return replace(d, algorithm=trial.algorithm, why="trial") if timed else d


def explain(p: int, dims: Sequence[int], nbytes: int, *, exact: bool, commutative: bool = True,
            native_ok: bool = True, tuning: Tuning | None = None, collective: str = "allreduce") -> Decision:
    """Return ``auto``'s :class:`Decision` for such a call (``swing-mpi choose`` prints it)."""
    return decide(AUTO, p, dims, nbytes, exact=exact, commutative=commutative, native_ok=native_ok, tuning=tuning,
                  collective=collective)


def contenders(p: int, dims: Sequence[int], nbytes: int, *, exact: bool, commutative: bool = True,
               native_ok: bool = True, tuning: Tuning | None = None,
               collective: str = "allreduce") -> tuple[tuple[str, float], ...]:
    """Return what ``auto`` tries on a launch's first calls of this size (:attr:`Decision.contenders`)."""
    return explain(p, dims, nbytes, exact=exact, commutative=commutative, native_ok=native_ok, tuning=tuning,
                   collective=collective).contenders


def choose(p: int, dims: Sequence[int], count: int, itemsize: int, *, exact: bool, commutative: bool,
           native_ok: bool = True, tuning: Tuning | None = None) -> str:
    """Name the algorithm ``auto`` runs for an allreduce of ``count`` elements of ``itemsize`` bytes (no trial)."""
    return explain(p, dims, int(count) * int(itemsize), exact=exact, commutative=commutative, native_ok=native_ok,
                   tuning=tuning).algorithm


def choose_collective(collective: str, p: int, dims: Sequence[int], nbytes: int, *, exact: bool,
                      commutative: bool, native_ok: bool = True, tuning: Tuning | None = None) -> str:
    """Name the algorithm ``auto`` runs for ``collective`` on a vector of ``nbytes`` (the whole vector)."""
    return explain(p, dims, nbytes, exact=exact, commutative=commutative, native_ok=native_ok, tuning=tuning,
                   collective=collective).algorithm


def resolve(requested: str, p: int, dims: Sequence[int], count: int, itemsize: int, *, exact: bool,
            commutative: bool, native_ok: bool, tuning: Tuning | None = None) -> str:
    """Name the algorithm an allreduce asking for ``requested`` runs (:func:`decide`, no trial)."""
    return decide(requested, p, dims, int(count) * int(itemsize), exact=exact, commutative=commutative,
                  native_ok=native_ok, tuning=tuning).algorithm


def clearly_faster(a: Sequence[float], b: Sequence[float]) -> bool:
    """Tell whether calls ``a`` beat calls ``b``: a median :data:`SWITCH_MARGIN` less, and not by chance.

    Not by chance: a one-sided Mann-Whitney test, ``a`` faster than ``b`` at the
    :data:`SWITCH_Z` level (normal approximation of U, ties counted half): calls on
    a busy machine spread, and a few medians can put either side ahead.
    """
    ma, mb = float(median(a)), float(median(b))
    if not ma < (1.0 - SWITCH_MARGIN) * mb:
        return False
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    n1, n2 = len(x), len(y)
    u = float(np.sum(x[:, None] < y[None, :]) + 0.5 * np.sum(x[:, None] == y[None, :]))
    sd = math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12.0)
    return (u - n1 * n2 / 2.0) / sd >= SWITCH_Z


def trial_verdict(contenders: Sequence[str], samples: Sequence[Sequence[float]]) -> str:
    """Return a trial's result: the contender with the least median if :func:`clearly_faster` than the pick.

    ``samples[i]`` are the counted calls of ``contenders[i]``; ``contenders[0]`` is the table's pick.
    """
    medians = [float(median(s)) for s in samples]
    best = min(range(len(contenders)), key=lambda i: (medians[i], i))
    return contenders[best] if best and clearly_faster(samples[best], samples[0]) else contenders[0]
