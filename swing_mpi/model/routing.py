"""Messages of every step, taken from the schedules, and their load on the torus links.

Algorithm:
    Every rank's :class:`~swing_mpi.schedule.base.Schedule` is read as
    messages ``(lane, step, src, dst, elements)``; lanes advance in lockstep,
    so global step ``k`` is step ``k`` of every lane. A message is routed on
    the torus the way :meth:`Torus.port_towards` says: minimal,
    dimension-order (first differing coordinate first), the shorter way round,
    a tie at exactly ``d/2`` going the ``+`` way. Per step we accumulate

    - bytes leaving every ``(rank, port)`` (the first hop of each route):
      ``m_k`` is the maximum, the busiest port;
    - ``Σ bytes·hops`` per ``(rank, port)``: the paper's distance proxy, where a
      message ``h`` hops long is taken to share its link with ``h`` messages
      of that size (for the paper's schedules, one size and one distance per
      step, this is exactly ``m_k·c_k`` with ``c_k`` the peer distance);
    - bytes and messages on every directed link ``(node, port)`` after routing:
      the true busiest-link load.

Symmetry (what makes 64×64 take a second and 128×128 feasible):
    A rank's messages are described relative to itself (peer offset, size),
    its *pattern*. If the pattern of lane ``ℓ`` at step ``k`` depends only on
    ``x mod P`` (``P`` a vector of divisors of the sides), the translates of
    the ranks in the box ``∏[0, P_j)`` are all ranks, dimension-order routing
    is translation-invariant, and the load of link ``(y, port)`` is the sum of
    the box's route links ``z`` with ``z ≡ y (mod P)``: loads live on a
    ``P``-periodic array. Two hypotheses are tried, both verified on extra
    ranks (far corner, middle, random) before use, else the next one:

    1. ``parity``: ``P = 2`` in every even side (Swing on even sides: a rank's
       offsets depend on the parity of its coordinates only); ``2^D`` ranks.
    2. ``periodic``: per (lane, step) the smallest period along each axis line
       through rank 0 (XOR peers: ``2^{t+1}`` in the dimension that step moves);
       about ``Σ d_j`` ranks.
    3. ``full``: every rank's schedule.

    Schedules are built with a small ``count`` (``p·lcm(1…2D)`` elements, so
    every lane and block of the usual splits is whole) and bytes are scaled
    linearly to the vector size.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np

from ..schedule.base import Schedule
from ..topology import Torus

__all__ = [
    "Pattern", "Traffic", "StepLoad", "StepArrays", "collect_traffic", "step_loads", "step_arrays", "route",
    "default_count", "SYMMETRIES",
]

Pattern = tuple[tuple[tuple[int, ...], int], ...]
"""Sorted ``((offset, elements), …)`` of one rank in one (lane, step); offset is
``coords(peer) − coords(rank) mod dims``."""

SYMMETRIES = ("auto", "parity", "periodic", "full")

FULL_BUILD_LIMIT = 1 << 19
"""Most rank-steps (ranks × steps) read when no symmetry holds and every rank's schedule
must be built: beyond it :func:`collect_traffic` raises ``ValueError`` instead of running
for minutes (e.g. ``hamiltonian``, 2(p−1) steps with no translation symmetry, on 32x32)."""


def default_count(dims: Sequence[int]) -> int:
    """Elements to build the schedules with: ``p·lcm(1 … 2D)`` (whole lanes and blocks)."""
    p = math.prod(dims)
    D = max(1, sum(1 for d in dims if d > 1))
    return p * math.lcm(*range(1, 2 * D + 1))


@cache
def route(delta: tuple[int, ...], dims: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Links of a minimal dimension-order route over ``delta`` (relative to the source).

    Returns ``(offsets, ports)``: row ``i`` is the link leaving node
    ``source + offsets[i]`` by port ``ports[i]`` (``2j``: +1 along ``j``,
    ``2j+1``: −1), in the order travelled. Ties (``d/2``) go the ``+`` way,
    as :meth:`Torus.port_towards`.
    """
    D = len(dims)
    offs: list[list[int]] = []
    ports: list[int] = []
    pos = [0] * D
    for j, (x, d) in enumerate(zip(delta, dims)):
        fwd = x % d
        if fwd == 0:
            continue
        if fwd <= d - fwd:
            step, hops, port = 1, fwd, 2 * j
        else:
            step, hops, port = -1, d - fwd, 2 * j + 1
        for _ in range(hops):
            offs.append(list(pos))
            ports.append(port)
            pos[j] += step
    o = np.array(offs, dtype=np.int64).reshape(len(offs), D)
    pr = np.array(ports, dtype=np.int64)
    o.setflags(write=False)
    pr.setflags(write=False)
    return o, pr


# -- traffic: patterns of representative ranks ------------------------------------


@dataclass
class Traffic:
    """Per (lane, step): a period ``P`` and the pattern id of every rank of ``box(P)``."""

    torus: Torus
    count: int
    """Elements the schedules were built with (bytes scale by ``n / count``)."""
    patterns: list[Pattern]
    """Pattern table; id 0 is the empty pattern."""
    periods: np.ndarray
    """``[lane, step, dim]`` period (divides the side)."""
    rep_ids: dict[tuple[int, int], np.ndarray]
    """``(lane, step)`` → pattern ids over ``box(P)`` in row-major order."""
    phases: list[str]
    symmetry: str
    built: int
    """How many ranks' schedules were built."""
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def nlanes(self) -> int:
        """Number of lanes."""
        return int(self.periods.shape[0])

    @property
    def nsteps(self) -> int:
        """Number of steps of the longest lane."""
        return int(self.periods.shape[1])


class _Sampler:
    """Builds schedules of chosen ranks and turns them into pattern-id arrays."""

    def __init__(self, get_schedule: Callable[[int], Schedule], torus: Torus) -> None:
        self.get = get_schedule
        self.torus = torus
        self.dims = torus.dims
        self.table: list[Pattern] = [()]
        self.index: dict[Pattern, int] = {(): 0}
        self.rows: dict[int, list[list[int]]] = {}
        self.phases: list[str] = []
        self.meta: dict[str, object] = {}
        self._ct: list[tuple[int, ...]] | None = None
        if torus.size <= 1 << 21:
            cols = np.unravel_index(np.arange(torus.size), torus.dims)
            self._ct = list(zip(*(c.tolist() for c in cols)))

    def coords(self, r: int) -> tuple[int, ...]:
        return self._ct[r] if self._ct is not None else self.torus.coords(r)

    def add(self, rank: int) -> None:
        if rank in self.rows:
            return
        sched = self.get(rank)
        if sched.meta and not self.meta:
            self.meta = dict(sched.meta)
        rc = self.coords(rank)
        dims = self.dims
        index, table = self.index, self.table
        deltas: dict[int, tuple[int, ...]] = {}
        rows: list[list[int]] = []
        for lane_i, lane in enumerate(sched.lanes):
            row = []
            for k, st in enumerate(lane):
                msgs = []
                for t in st.transfers:
                    sr = t.send
                    if not sr:
                        continue
                    n = sr[0][1] - sr[0][0] if len(sr) == 1 else sum(b - a for a, b in sr)
                    q = t.peer
                    if n <= 0 or q == rank:
                        continue
                    dl = deltas.get(q)
                    if dl is None:
                        dl = deltas[q] = tuple((a - b) % d for a, b, d in zip(self.coords(q), rc, dims))
                    msgs.append((dl, n))
                pat: Pattern = tuple(msgs) if len(msgs) < 2 else tuple(sorted(msgs))
                pid = index.get(pat)
                if pid is None:
                    pid = index[pat] = len(table)
                    table.append(pat)
                row.append(pid)
                if lane_i == 0 and len(self.phases) <= k:
                    self.phases.append(st.phase)
            rows.append(row)
        self.rows[rank] = rows

    def array(self, ranks: Sequence[int]) -> np.ndarray:
        """``[rank, lane, step]`` ids, padded with the empty pattern."""
        nl = max((len(self.rows[r]) for r in self.rows), default=0)
        ns = max((len(row) for r in self.rows for row in self.rows[r]), default=0)
        out = np.zeros((len(ranks), nl, ns), dtype=np.int64)
        for i, r in enumerate(ranks):
            for li, row in enumerate(self.rows[r]):
                out[i, li, :len(row)] = row
        return out


def _box(P: Sequence[int]) -> np.ndarray:
    """All coordinate vectors of ``∏[0, P_j)``, row-major, shape ``(∏P, D)``."""
    return np.array(np.unravel_index(np.arange(math.prod(P)), tuple(P))).T.reshape(-1, len(P))


def _rank_of(c: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    return np.ravel_multi_index(tuple(np.asarray(c).T), dims)


def _check_ranks(torus: Torus, reps: set, verify: int, seed: int) -> list[int]:
    """``verify`` ranks to check a symmetry hypothesis on: far corner, middle, then random."""
    if verify <= 0:
        return []
    p = torus.size
    dims = torus.dims
    fixed = [torus.rank([d - 1 for d in dims]), torus.rank([d // 2 for d in dims]),
             torus.rank([(d // 2 + 1) % d for d in dims]), torus.rank([max(d - 2, 0) for d in dims])]
    out = [r for r in dict.fromkeys(fixed) if r not in reps][:verify]
    rng = random.Random(seed)
    left = p - len(reps) - len(out)
    tries = 0
    while len(out) < verify and left > 0 and tries < 100 * verify:
        tries += 1
        r = rng.randrange(p)
        if r not in reps and r not in out:
            out.append(r)
            left -= 1
    return out


def collect_traffic(
    get_schedule: Callable[[int], Schedule],
    dims: Sequence[int],
    count: int,
    *,
    symmetry: str = "auto",
    verify: int = 8,
    seed: int = 0,
) -> Traffic:
    """Read the schedules of representative ranks (or all) into a :class:`Traffic`.

    ``symmetry``: ``auto`` tries parity, then periodic, then full; a named
    hypothesis is used as is when ``verify=0`` and raises ``ValueError`` if it
    fails its check; ``full`` builds every rank.
    """
    if symmetry not in SYMMETRIES:
        raise ValueError(f"symmetry must be one of {', '.join(SYMMETRIES)}, got {symmetry!r}")
    torus = Torus(tuple(dims))
    dims_t = torus.dims
    p = torus.size
    D = torus.ndims
    S = _Sampler(get_schedule, torus)

    def finish(periods_fn, name: str) -> Traffic:
        allr = list(S.rows)
        arr = S.array(allr)
        pos = {r: i for i, r in enumerate(allr)}
        nl, ns = arr.shape[1], arr.shape[2]
        periods = np.zeros((nl, ns, D), dtype=np.int64)
        rep_ids: dict[tuple[int, int], np.ndarray] = {}
        rows_of: dict[tuple[int, ...], np.ndarray] = {}
        for li in range(nl):
            for k in range(ns):
                P = tuple(int(v) for v in periods_fn(li, k))
                periods[li, k] = P
                idx = rows_of.get(P)
                if idx is None:
                    idx = rows_of[P] = np.array([pos[r] for r in _rank_of(_box(P), dims_t).tolist()])
                rep_ids[(li, k)] = arr[idx, li, k]
        return Traffic(torus, count, S.table, periods, rep_ids, S.phases, name, len(S.rows), S.meta)

    def check(checks: list[int], rep_of) -> bool:
        """Whether every check rank's ids equal its representative's, lane by lane, step by step."""
        for x in checks:
            S.add(x)
        allr = list(S.rows)
        arr = S.array(allr)
        pos = {r: i for i, r in enumerate(allr)}
        for x in checks:
            xi = arr[pos[x]]
            for li in range(arr.shape[1]):
                for k in range(arr.shape[2]):
                    r = rep_of(x, li, k)
                    if arr[pos[r], li, k] != xi[li, k]:
                        return False
        return True

    def reduce(x: int, P: Sequence[int]) -> int:
        return torus.rank([c % q for c, q in zip(S.coords(x), P)])

    # 1. parity
    if symmetry in ("auto", "parity"):
        Q = tuple(2 if d % 2 == 0 else d for d in dims_t)
        if symmetry == "parity" or math.prod(Q) * 4 <= p:
            reps = _rank_of(_box(Q), dims_t).tolist()
            for r in reps:
                S.add(r)
            checks = _check_ranks(torus, set(reps), verify, seed)
            if check(checks, lambda x, li, k: reduce(x, Q)):
                return finish(lambda li, k: Q, "parity")
            if symmetry == "parity":
                raise ValueError(f"parity symmetry does not hold for this schedule on {torus}")

    # 2. periodic per (lane, step), periods from the axis lines through rank 0; not tried for schedules that
    # follow one global cycle (the Hamiltonian rings: a rank's blocks depend on its place in the cycle, so the
    # only period is the whole torus, found after building every line's schedules, 44 s on 64x64)
    if symmetry == "auto":
        S.add(0)  # (its meta says whether it is such a schedule)
    if symmetry == "periodic" or symmetry == "auto" and not S.meta.get("one_hop_disjoint"):
        lines: list[list[int]] = []
        for j, d in enumerate(dims_t):
            line = []
            for c in range(d):
                v = [0] * D
                v[j] = c
                line.append(torus.rank(v))
            lines.append(line)
        need_line = sum(len(line) for line in lines)
        if symmetry == "periodic" or need_line * 4 <= p:
            for line in lines:
                for r in line:
                    S.add(r)
            allr = list(S.rows)
            arr = S.array(allr)
            pos = {r: i for i, r in enumerate(allr)}
            nl, ns = arr.shape[1], arr.shape[2]
            periods = np.ones((nl, ns, D), dtype=np.int64)
            for j, (d, line) in enumerate(zip(dims_t, lines)):
                seq = arr[[pos[r] for r in line]]  # [c, lane, step]
                found = np.zeros((nl, ns), dtype=bool)
                for q in sorted(x for x in range(1, d + 1) if d % x == 0):
                    ok = np.all(seq == seq[np.arange(d) % q], axis=0) & ~found
                    periods[ok, j] = q
                    found |= ok
            boxes = {tuple(int(v) for v in periods[li, k]) for li in range(nl) for k in range(ns)}
            need = set()
            for P in boxes:
                need.update(_rank_of(_box(P), dims_t).tolist())
            if symmetry == "periodic" or len(need) * 2 <= p:
                for r in need:
                    S.add(r)
                checks = _check_ranks(torus, need, verify, seed + 1)
                if check(checks, lambda x, li, k: reduce(x, periods[min(li, nl - 1), min(k, ns - 1)])):
                    return finish(lambda li, k: tuple(int(v) for v in periods[li, k]), "periodic")
                if symmetry == "periodic":
                    raise ValueError(f"periodic symmetry does not hold for this schedule on {torus}")

    # 3. every rank
    nsteps = max((len(lane) for rows in S.rows.values() for lane in rows), default=0)
    if p * nsteps > FULL_BUILD_LIMIT:
        raise ValueError(f"no symmetry found on {torus}: routing it means building all {p} ranks' schedules of "
                         f"{nsteps} steps ({p * nsteps} rank-steps, limit {FULL_BUILD_LIMIT}); model a smaller torus")
    for r in range(p):
        S.add(r)
    return finish(lambda li, k: dims_t, "full")


# -- loads ---------------------------------------------------------------------


@dataclass(frozen=True)
class StepLoad:
    """Loads of one global step, in elements of a vector of ``Traffic.count``."""

    index: int
    phase: str
    port: float
    """``m_k``: most elements leaving any one port of any rank."""
    distance: float
    """Distance proxy: most ``Σ elements·hops`` over the messages leaving one port."""
    link: float
    """Most elements on any directed link after routing."""
    hops: int
    """``c_k``: the longest peer distance of the step."""
    link_messages: int
    """Most messages on any directed link after routing."""
    messages: int
    """Messages in the step, all ranks."""
    lane_port: float = 0.0
    """Like ``port`` but lane by lane (as if no two lanes shared a port)."""
    lane_distance: float = 0.0
    """Like ``distance`` but lane by lane (as if no two lanes shared a port)."""

    def scaled(self, factor: float) -> StepLoad:
        """Return the same step with every load (not the counts) multiplied by ``factor``."""
        return replace(self, port=self.port * factor, distance=self.distance * factor,
                       link=self.link * factor, lane_port=self.lane_port * factor,
                       lane_distance=self.lane_distance * factor)

    def load(self, congestion: str = "routed") -> float:
        """Return the step's cost per ``β``: routed busiest link or the distance proxy."""
        return self.link if congestion == "routed" else self.distance


class _Acc:
    """Per-step accumulators on a ``P``-periodic array of shape ``P + (2D,)``."""

    __slots__ = ("src", "dist", "link", "nmsg", "hops", "msgs")

    def __init__(self, src, dist, link, nmsg, hops, msgs):
        self.src, self.dist, self.link, self.nmsg, self.hops, self.msgs = src, dist, link, nmsg, hops, msgs


def _lane_step_loads(traffic: Traffic, P: tuple[int, ...], ids: np.ndarray, cache: dict) -> _Acc:
    key = (P, ids.tobytes())
    got = cache.get(key)
    if got is not None:
        return got
    dims = traffic.torus.dims
    D = len(dims)
    nP = 2 * D
    size = math.prod(P) * nP
    Parr = np.array(P, dtype=np.int64)
    reps = _box(P)
    src = np.zeros(size)
    dist = np.zeros(size)
    link = np.zeros(size)
    nmsg = np.zeros(size)
    hops = 0
    msgs = 0
    for pid in np.unique(ids):
        if pid == 0:
            continue
        where = reps[ids == pid]  # (m, D)
        for delta, cnt in traffic.patterns[int(pid)]:
            offs, ports = route(delta, dims)
            h = len(ports)
            if h == 0:
                continue
            hops = max(hops, h)
            msgs += len(where)
            first = np.ravel_multi_index(tuple(where.T), P) * nP + ports[0]
            np.add.at(src, first, cnt)
            np.add.at(dist, first, cnt * h)
            pos = (where[:, None, :] + offs[None, :, :]) % Parr  # (m, h, D)
            flat = np.ravel_multi_index(tuple(pos.reshape(-1, D).T), P) * nP + np.tile(ports, len(where))
            bc = np.bincount(flat, minlength=size)
            link += bc * cnt
            nmsg += bc
    shape = tuple(P) + (nP,)
    acc = _Acc(src.reshape(shape), dist.reshape(shape), link.reshape(shape), nmsg.reshape(shape),
               hops, msgs * (math.prod(dims) // math.prod(P)))
    cache[key] = acc
    return acc


def _tile(a: np.ndarray, P: tuple[int, ...], L: tuple[int, ...]) -> np.ndarray:
    if P == L:
        return a
    return np.tile(a, [n // q for n, q in zip(L, P)] + [1])


@dataclass(frozen=True)
class StepArrays:
    """One global step's loads, every lane's summed, on the ``period``-periodic array of shape ``period + (2D,)``."""

    index: int
    period: tuple[int, ...]
    src: np.ndarray
    """Elements leaving each ``(rank, port)`` (first hops)."""
    dist: np.ndarray
    link: np.ndarray
    """Elements on each directed link ``(node, port)`` after routing."""
    nmsg: np.ndarray
    lanes: int
    """Lanes that move anything in the step."""
    hops: int
    messages: int
    lane_port: float
    lane_distance: float


def step_arrays(traffic: Traffic) -> list[StepArrays]:
    """Return every global step's load arrays (steps without any message are left out)."""
    out: list[StepArrays] = []
    cache: dict = {}
    for k in range(traffic.nsteps):
        accs = []
        for li in range(traffic.nlanes):
            ids = traffic.rep_ids[(li, k)]
            if not ids.any():
                continue
            P = tuple(int(v) for v in traffic.periods[li, k])
            accs.append((P, _lane_step_loads(traffic, P, ids, cache)))
        accs = [(P, a) for P, a in accs if a.msgs]
        if not accs:
            continue
        L = tuple(math.lcm(*(P[j] for P, _ in accs)) for j in range(traffic.torus.ndims))
        out.append(StepArrays(
            index=k, period=L,
            src=np.sum([_tile(a.src, P, L) for P, a in accs], axis=0),
            dist=np.sum([_tile(a.dist, P, L) for P, a in accs], axis=0),
            link=np.sum([_tile(a.link, P, L) for P, a in accs], axis=0),
            nmsg=np.sum([_tile(a.nmsg, P, L) for P, a in accs], axis=0),
            lanes=len(accs), hops=max(a.hops for _, a in accs), messages=sum(a.msgs for _, a in accs),
            lane_port=max(float(a.src.max()) for _, a in accs),
            lane_distance=max(float(a.dist.max()) for _, a in accs)))
    return out


def step_loads(traffic: Traffic) -> list[StepLoad]:
    """Return the loads of every global step (steps without any message are left out)."""
    return [StepLoad(
        index=a.index,
        phase=traffic.phases[a.index] if a.index < len(traffic.phases) else "",
        port=float(a.src.max()),
        distance=float(a.dist.max()),
        link=float(a.link.max()),
        hops=a.hops,
        link_messages=int(round(a.nmsg.max())),
        messages=a.messages,
        lane_port=a.lane_port,
        lane_distance=a.lane_distance,
    ) for a in step_arrays(traffic)]
