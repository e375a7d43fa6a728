"""Per-algorithm cost coefficients for choosing an algorithm: ``T(n) = K·α + n·(moved·β + reduced·γ)``.

Algorithm:
    An algorithm's cost on a torus is read from its generated schedules once
    per (algorithm, dims, exact, network, part) and kept as three numbers, so
    that pricing any vector size afterwards is O(1)::

        T(n) = K·α + n·(moved·β + reduced·γ)

        K        α count: steps that move data
        moved    bytes on the bottleneck, summed over steps, per vector byte
        reduced  bytes reduced by the busiest rank, summed over steps, per vector byte

    The bottleneck depends on the network:

    ``flat`` (shared memory, one switch): no link is shared, each rank's own
        messages are the bottleneck and one process works its lanes one after
        the other. ``K`` counts every busy lane in every step, ``moved`` every
        lane's bytes (the larger of sent and received), both the worst of
        rank 0 and rank ``p−1`` (the rank that folds on non-power-of-two sides).
    ``torus``: messages share links. Every message of every rank is routed
        (:mod:`.routing`: minimal, dimension order) and ``moved`` is the
        busiest directed link's bytes per step, summed; ``K`` counts the steps
        in which anyone sends (lanes run at once, on their own ports).

    ``part`` prices a half of the allreduce: ``reduce_scatter`` keeps the
    transfers whose received data is reduced, ``allgather`` those that copy.

    The schedules are built once with ``p·lcm(1…2D)`` elements (whole lanes
    and blocks) and scaled linearly; a tiny vector's real schedule may have
    fewer busy steps, so ``K·α`` is an upper bound there.

Lower bound:
    Routing every message of a large torus takes longer than reading two
    ranks' schedules. :func:`lower_bound` is the torus cost with ``moved`` =
    the largest single message per step (that message alone occupies its
    first link for the step) and ``K`` from the two probed ranks: never more
    than the routed cost, so a chooser can route only the candidates whose
    bound beats the best routed cost found so far.

Cache:
    Reading the schedules of every candidate on a large torus takes seconds
    (the builders' cost, ``p``-sized work per rank built), once per process.
    The numbers are also kept on disk, in
    ``$XDG_CACHE_HOME/swing_mpi/model-<fingerprint>.json`` (``~/.cache``), the
    fingerprint hashing the sources of the schedules, the routing and this
    module, so a changed schedule never reuses old numbers. Later processes
    (a job's next run, the other ranks of a machine) read them instead.
    ``$SWING_MPI_MODEL_CACHE`` names another folder, or ``off``. Warm it
    before a large job with ``swing-mpi choose --dims 64x64 --size 1M``. A
    cache that cannot be read or written is ignored.

Restrictions:
    Pure data: no MPI. Every result is cached per process.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..config import rc
from ..schedule import ALGORITHMS, build_schedule
from ..schedule.base import REDUCE, Schedule, ranges_len
from .cost import PARTS, analyze_schedules, part_of
from .routing import default_count

__all__ = ["NETWORKS", "PARTS", "Coefficients", "coefficients", "lower_bound", "probe_counts", "ProbeCounts",
           "CACHE_ENV", "cache_file", "clear_caches"]

CACHE_ENV = "SWING_MPI_MODEL_CACHE"

NETWORKS = ("torus", "flat")
"""Network kinds the model knows: links shared between messages (``torus``) or not (``flat``)."""

@dataclass(frozen=True)
class Coefficients:
    """``T(n) = steps·α + n·(moved·β + reduced·γ)`` for one algorithm on one torus and network."""

    algorithm: str
    dims: tuple[int, ...]
    network: str
    steps: int
    """α count."""
    moved: float
    """Bytes on the bottleneck per vector byte, summed over steps."""
    reduced: float
    """Bytes reduced per vector byte, summed over steps (the busiest probed rank)."""
    bound: bool = False
    """A lower bound (:func:`lower_bound`), not the cost."""

    def time(self, nbytes: float, alpha: float, beta: float, gamma: float) -> float:
        """Modelled seconds for a vector of ``nbytes``."""
        return self.steps * alpha + nbytes * (self.moved * beta + self.reduced * gamma)


@dataclass(frozen=True)
class ProbeCounts:
    """What rank 0 and rank ``p−1`` do (the worst of the two per step), per vector element."""

    steps: int
    """Steps in which a probed rank moves data."""
    lane_steps: int
    """Busy lanes summed over steps."""
    all_lanes: float
    """Elements moved by all lanes (larger of sent and received), summed over steps."""
    largest_message: float
    """Per step, the larger of its largest single message and a probed rank's bytes out (or in) over its links
    (a side of 2 is one link: both ports lead to the one neighbour), summed over steps: what the step's busiest
    link carries at least."""
    reduced: float
    """Elements reduced, summed over steps and lanes (a final combine counts ``slots − 1`` vectors)."""


def _check(algorithm: str, dims: tuple[int, ...], network: str, part: str) -> None:
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {', '.join(NETWORKS)}, got {network!r}")
    if part not in PARTS:
        raise ValueError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    if not dims or any(int(d) < 1 for d in dims):
        raise ValueError(f"bad torus dims {dims!r}")


def _reference_count(dims: tuple[int, ...]) -> int:
    return default_count(dims)


@lru_cache(maxsize=1)
def _fingerprint() -> str:
    """Hash the sources that determine the numbers (schedules, blocks, topology, routing, this module)."""
    pkg = Path(__file__).resolve().parent.parent
    files = sorted((pkg / "schedule").glob("*.py")) + [pkg / "blocks.py", pkg / "topology.py",
                                                       pkg / "model" / "routing.py", pkg / "model" / "cost.py",
                                                       Path(__file__).resolve()]
    h = hashlib.sha1()
    for f in files:
        h.update(f.name.encode())
        try:
            h.update(f.read_bytes())
        except OSError:
            h.update(b"?")
    return h.hexdigest()[:16]


def cache_file() -> Path | None:
    """Return the disk cache of this code's coefficients, or ``None`` when ``$SWING_MPI_MODEL_CACHE=off``."""
    v = rc.model_cache
    if v == "off":
        return None
    if v:
        folder = Path(v).expanduser()
    else:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")) / "swing_mpi"
    return folder / f"model-{_fingerprint()}.json"


_loaded: dict[Path, dict[str, list[float]]] = {}


def _read(path: Path) -> dict[str, list[float]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _key(kind: str, algorithm: str, dims: tuple[int, ...], exact: bool, part: str) -> str:
    info = ALGORITHMS.get(algorithm)
    entry = (info.target, info.options, info.uses_exact) if info is not None else None
    return json.dumps([kind, algorithm, repr(entry), list(dims), exact, part])


def _cached(key: str, n: int) -> list[float] | None:
    path = cache_file()
    if path is None:
        return None
    if path not in _loaded:
        _loaded[path] = _read(path)
    got = _loaded[path].get(key)
    if isinstance(got, list) and len(got) == n and all(isinstance(x, (int, float)) for x in got):
        return got
    return None


def _store(key: str, values: list[float]) -> None:
    path = cache_file()
    if path is None:
        return
    data = _read(path)  # merge with what other processes wrote meanwhile
    data[key] = values
    _loaded[path] = data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def clear_caches() -> None:
    """Forget every coefficient this process holds (the disk cache is re-read on next use)."""
    _loaded.clear()
    for f in (probe_counts, _routed, coefficients, lower_bound):
        f.cache_clear()


@lru_cache(maxsize=1024)
def probe_counts(algorithm: str, dims: tuple[int, ...], exact: bool, part: str = "allreduce") -> ProbeCounts:
    """Per-element step, byte and reduction counts of rank 0 and rank ``p−1`` (cached)."""
    dims = tuple(int(d) for d in dims)
    _check(algorithm, dims, "flat", part)
    p = math.prod(dims)
    if p <= 1:
        return ProbeCounts(0, 0, 0.0, 0.0, 0.0)
    key = _key("probe", algorithm, dims, exact, part)
    got = _cached(key, 5)
    if got is not None:
        return ProbeCounts(int(got[0]), int(got[1]), float(got[2]), float(got[3]), float(got[4]))
    count = _reference_count(dims)
    links = sum(1 if d == 2 else 2 for d in dims if d > 1)  # a rank's outgoing (and incoming) links
    scheds = [part_of(build_schedule(algorithm, dims, r, count, exact=exact), part) for r in (0, p - 1)]
    steps = lane_steps = 0
    all_lanes = largest = reduced = 0
    for k in range(max(s.nsteps for s in scheds)):
        busy_k = moved_k = big_k = red_k = 0
        for s in scheds:
            busy = moved = red = out_k = in_k = 0
            for lane in s.lanes:
                if k >= len(lane):
                    continue
                st = lane[k]
                sent = recv = 0
                for t in st.transfers:
                    sc, rc = t.send_count, t.recv_count
                    sent += sc
                    recv += rc
                    big_k = max(big_k, sc, rc)
                    if t.action == REDUCE:
                        red += rc
                if st.combine:
                    red += (s.slots - 1) * s.count
                m = max(sent, recv)
                busy += m > 0
                moved += m
                out_k += sent
                in_k += recv
            big_k = max(big_k, -(-max(out_k, in_k) // links))  # every byte crosses one of the rank's links
            busy_k = max(busy_k, busy)
            moved_k = max(moved_k, moved)
            red_k = max(red_k, red)
        steps += busy_k > 0
        lane_steps += busy_k
        all_lanes += moved_k
        largest += big_k
        reduced += red_k
    out = ProbeCounts(steps, lane_steps, all_lanes / count, largest / count, reduced / count)
    _store(key, [out.steps, out.lane_steps, out.all_lanes, out.largest_message, out.reduced])
    return out


@lru_cache(maxsize=1024)
def _routed(algorithm: str, dims: tuple[int, ...], exact: bool, part: str) -> tuple[int, float]:
    """Route every message: return (steps with any message, Σ busiest-link elements per vector element)."""
    key = _key("routed", algorithm, dims, exact, part)
    got = _cached(key, 2)
    if got is not None:
        return int(got[0]), float(got[1])
    count = _reference_count(dims)

    first = part_of(build_schedule(algorithm, dims, 0, count, exact=exact), part)

    def get(rank: int) -> Schedule:  # rank 0's schedule, built once: the shortcut reads it, routing starts from it
        return first if rank == 0 else part_of(build_schedule(algorithm, dims, rank, count, exact=exact), part)

    one_hop = _one_hop_disjoint(first, dims, count)
    if one_hop is not None:
        _store(key, [one_hop[0], one_hop[1]])
        return one_hop
    res = analyze_schedules(get, dims, name=algorithm, count=count)
    _store(key, [res.K, res.load("routed")])
    return res.K, res.load("routed")


def _one_hop_disjoint(s: Schedule, dims: tuple[int, ...], count: int) -> tuple[int, float] | None:
    """Routed ``(K, load)`` of a schedule whose lanes own their links, from rank 0's schedule alone.

    A schedule with ``meta["one_hop_disjoint"]`` (the Hamiltonian rings) sends every message
    one hop to a torus neighbour, and in any step no directed link carries two messages of all
    ranks' lanes; with the reference count every rank's message of a lane and step has the same
    size. The busiest link of a step then carries the step's largest message: no routing, no
    symmetry search (which finds none for these cycles: their order is global, so a 64x64 torus
    would mean building all 4096 ranks' schedules). The router sends a one-hop message over a
    side of 2 by the ``+`` port whatever the schedule's port, so such shapes are routed instead
    (``None``); the unit tests compare both ways on the shapes small enough to route.
    """
    if not s.meta.get("one_hop_disjoint") or any(d == 2 for d in dims):
        return None
    k = load = 0
    for i in range(max((len(lane) for lane in s.lanes), default=0)):
        big = max((ranges_len(t.send) for lane in s.lanes if i < len(lane) for t in lane[i].transfers
                   if t.send and t.peer != s.rank), default=0)
        if big:
            k += 1
            load += big
    return k, load / count


@lru_cache(maxsize=1024)
def coefficients(algorithm: str, dims: tuple[int, ...], *, exact: bool, network: str,
                 part: str = "allreduce") -> Coefficients:
    """Return the cost coefficients of ``algorithm`` on ``dims`` (cached; see the module docstring)."""
    dims = tuple(int(d) for d in dims)
    _check(algorithm, dims, network, part)
    pc = probe_counts(algorithm, dims, exact, part)
    if math.prod(dims) <= 1:
        return Coefficients(algorithm, dims, network, 0, 0.0, 0.0)
    if network == "flat":
        return Coefficients(algorithm, dims, network, pc.lane_steps, pc.all_lanes, pc.reduced)
    k, link = _routed(algorithm, dims, exact, part)
    return Coefficients(algorithm, dims, network, k, link, pc.reduced)


@lru_cache(maxsize=1024)
def lower_bound(algorithm: str, dims: tuple[int, ...], *, exact: bool, part: str = "allreduce") -> Coefficients:
    """Return a torus cost never above :func:`coefficients` ``(network="torus")``, from two ranks' schedules."""
    dims = tuple(int(d) for d in dims)
    pc = probe_counts(algorithm, dims, exact, part)
    return Coefficients(algorithm, dims, "torus", pc.steps, pc.largest_message, pc.reduced, bound=True)
