"""``hamiltonian``: edge-disjoint Hamiltonian cycles of the torus, run both ways on all 2D ports.

The cycles are checked as a graph decomposition (every rank once per cycle,
one hop per move on the port named, every link in exactly one cycle); the
schedules through the in-process oracle ``simulate`` (exact int64 sums,
float64 results bit-identical on every rank), with their step counts, bytes,
ports and final block owners.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from swing_mpi.blocks import split, split_range
from swing_mpi.config import rc
from swing_mpi.schedule import ALGORITHMS, build_schedule
from swing_mpi.schedule.hamiltonian import hamiltonian_cycles, search_is_hopeless
from swing_mpi.simulate import simulate
from swing_mpi.topology import Torus

GRIDS = [(a, b) for a in range(3, 13) for b in range(3, 13)] + [(2, 2)]
CUBES = [(a, b, c) for a in range(2, 7) for b in range(2, 7) for c in range(2, 7) if not search_is_hopeless((a, b, c))]
MORE = [(16, 16), (15, 16), (32, 32), (8, 8, 8), (4, 4, 4, 4), (4, 1, 4), (1, 7, 3)]
HOPELESS = [(2, b) for b in range(3, 9)] + [(b, 2) for b in (3, 4)] + [(2, 2, c) for c in range(2, 6)] + [(2, 3, 2)]


def _name(dims) -> str:
    return "x".join(map(str, dims))


def _edge(torus: Torus, u: int, port: int) -> tuple[int, int]:
    """Name a link by its ``+`` end: ``(node, 2k)``."""
    return (u, port) if port % 2 == 0 else (torus.neighbor(u, port), port ^ 1)


@pytest.mark.parametrize("dims", GRIDS + CUBES + MORE, ids=_name)
def test_cycles_decompose_the_torus(dims):
    torus = Torus(dims)
    p = torus.size
    active = [k for k, d in enumerate(dims) if d > 1]
    cycles = hamiltonian_cycles(dims)
    assert cycles is not None and len(cycles) == len(active)
    seen: set[tuple[int, int]] = set()
    for cyc in cycles:
        assert sorted(cyc.order) == list(range(p))
        assert len(cyc.ports) == p
        for i, (u, port) in enumerate(zip(cyc.order, cyc.ports)):
            assert port // 2 in active
            assert torus.neighbor(u, port) == cyc.order[(i + 1) % p]
            e = _edge(torus, u, port)
            assert e not in seen, f"link {e} in two cycles"
            seen.add(e)
    assert len(seen) == p * len(active)  # every link of the torus, once


@pytest.mark.parametrize("dims", HOPELESS, ids=_name)
def test_shapes_without_cycles_fall_back_to_bucket(dims):
    assert search_is_hopeless(dims)
    assert hamiltonian_cycles(dims) is None
    p = math.prod(dims)
    for r in range(p):
        s = build_schedule("hamiltonian", dims, r, 3 * p + 1)
        b = build_schedule("bucket", dims, r, 3 * p + 1)
        assert "fallback" in s.meta
        assert s.lanes == b.lanes


def test_two_by_odd_has_no_decomposition():
    """2x3 by brute force: no Hamiltonian cycle of the doubled-rung multigraph leaves a Hamiltonian complement."""
    torus = Torus((2, 3))
    links = [(u, k) for u in range(6) for k in (0, 1)]  # (u, k): u to u + e_k
    ends = {e: (e[0], torus.shift(e[0], e[1], 1)) for e in links}

    def one_cycle(chosen) -> bool:
        inc: dict[int, list] = {u: [] for u in range(6)}
        for e in chosen:
            a, b = ends[e]
            inc[a].append(e)
            inc[b].append(e)
        if any(len(x) != 2 for x in inc.values()):
            return False
        e, u, n = chosen[0], ends[chosen[0]][0], 0
        while True:
            a, b = ends[e]
            u = b if a == u else a
            n += 1
            x, y = inc[u]
            e = y if x == e else x
            if e == chosen[0]:
                return n == 6
    found = [c for c in itertools.combinations(links, 6)
             if one_cycle(list(c)) and one_cycle([e for e in links if e not in c])]
    assert found == []


def _schedules(dims, count):
    return [build_schedule("hamiltonian", tuple(dims), r, count) for r in range(math.prod(dims))]


SIM = ([(p,) for p in range(1, 10)] + [(3, 3), (3, 4), (4, 4), (4, 5), (5, 7), (6, 6), (8, 8), (2, 2), (2, 5),
                                        (3, 3, 3), (2, 3, 4), (4, 4, 4), (1, 4, 3)])


@pytest.mark.parametrize("dims", SIM, ids=_name)
def test_sums_ports_bytes_owners(dims):
    torus = Torus(dims)
    p = torus.size
    rng = np.random.default_rng(p)
    fallback = hamiltonian_cycles(dims) is None
    A = len([d for d in dims if d > 1])
    counts = {0, 1, p - 1, 2 * p + 3, 4 * A * p + 5} if p <= 16 else {p - 1, 4 * A * p + 5}  # empty / uneven blocks
    for count in sorted(counts):
        scheds = _schedules(dims, count)
        x = [rng.integers(-(1 << 40), 1 << 40, count, dtype=np.int64) for _ in range(p)]
        want = np.sum(np.stack(x), axis=0) if count else np.zeros(0, np.int64)
        for r, got in enumerate(simulate(scheds, x)):
            assert np.array_equal(got, want), f"rank {r}: wrong sum"
        xf = [rng.standard_normal(count) * rng.choice([1e6, 1.0, 1e-2], count) for _ in range(p)]
        out = simulate(scheds, xf)
        stack = np.stack(xf) if count else np.zeros((p, 0))
        tol = 4 * p * np.finfo(np.float64).eps * np.abs(stack).sum(axis=0) + 1e-300
        for got in out:
            assert np.array_equal(got.view(np.int64), out[0].view(np.int64)), "ranks differ in some bits"
            assert np.all(np.abs(got - stack.sum(axis=0)) <= tol)
        if p == 1:
            assert all(not s.lanes for s in scheds)
            continue
        assert sum(s.sent_elements() for s in scheds) == 2 * count * (p - 1)
        if fallback:
            continue
        parts = split(count, 2 * A)
        for s in scheds:
            assert len(s.lanes) == 2 * A and all(len(lane) == 2 * (p - 1) for lane in s.lanes)
            for step in range(2 * (p - 1)):
                ports = []
                for lane in s.lanes:
                    for t in lane[step].transfers:
                        assert torus.neighbor(s.rank, t.port) == t.peer  # one hop, on the port named
                        if t.send:
                            ports.append(t.port)
                if count >= 2 * A * p:  # every block non-empty: every port of every rank sends every step
                    assert len(ports) == len(set(ports)) == 2 * A
            # reduce-scatter: rank r keeps block r of every part (sends every other block once)
            for li, lane in enumerate(s.lanes):
                blocks = split_range(parts[li], p)
                sent = sorted(a for st in lane if st.phase == "reduce-scatter" for t in st.transfers for a, _ in t.send)
                assert sent == sorted(a for i, (a, b) in enumerate(blocks) if i != s.rank and b > a)


def test_registered_everywhere():
    from swing_mpi.bench.cli import registered_algorithms
    from swing_mpi.choose import algorithm_names

    info = ALGORITHMS["hamiltonian"]
    assert info.commutative_only and info.form == "bandwidth"
    assert "reduce_scatter" in info.collectives
    assert "hamiltonian" in algorithm_names()
    assert "hamiltonian" in registered_algorithms()


@pytest.mark.parametrize("dims", [(8, 8), (4, 4, 4), (3, 4), (4, 4)], ids=_name)
def test_model_psi_xi(dims):
    from swing_mpi.model.cost import analyze

    r = analyze("hamiltonian", dims)
    p = math.prod(dims)
    assert r.Psi == pytest.approx(1.0, abs=1e-9)
    assert r.Xi("routed") <= 1.0 and r.Xi("distance") == pytest.approx(r.Xi("routed"))
    assert r.Xi("routed") == pytest.approx((p - 1) / p)


@pytest.mark.parametrize("dims", [(3,), (5,), (3, 3), (3, 4), (4, 4), (5, 6), (3, 3, 3), (3, 4, 5), (4, 1, 4),
                                  (1, 7, 3)], ids=_name)
def test_model_prices_the_rings_without_routing_them(dims):
    """The one-hop shortcut (no symmetry to find: the cycles' order is global) equals routing every rank."""
    from swing_mpi.model.cost import PARTS, analyze_schedules, part_of
    from swing_mpi.model.features import _one_hop_disjoint, _reference_count

    count = _reference_count(dims)
    for part in PARTS:
        def get(r, part=part):
            return part_of(build_schedule("hamiltonian", dims, r, count), part)

        s0 = get(0)
        assert s0.meta.get("one_hop_disjoint") and "fallback" not in s0.meta
        full = analyze_schedules(get, dims, name="hamiltonian", count=count)
        k, load = _one_hop_disjoint(s0, dims, count)
        assert k == full.K and load == pytest.approx(full.load("routed"), rel=1e-12)
        p = math.prod(dims)
        assert k == (2 if part == "allreduce" else 1) * (p - 1)


def test_model_routes_sides_of_two_and_fallbacks():
    from swing_mpi.model.features import _one_hop_disjoint, _reference_count

    for dims in [(2, 2), (2, 4), (2, 2, 3), (2, 3, 3)]:
        count = _reference_count(dims)
        assert _one_hop_disjoint(build_schedule("hamiltonian", dims, 0, count), dims, count) is None
    assert not build_schedule("hamiltonian", (2, 4), 0, 64).meta.get("one_hop_disjoint")  # bucket's schedule


def test_large_torus_is_priced_at_once(monkeypatch):
    """64x64: routing would mean all 4096 ranks' 8190 steps (no symmetry); the model gives Ψ = Ξ = 1 at once."""
    import time

    from swing_mpi.model import features

    monkeypatch.setenv(features.CACHE_ENV, "off")
    rc.reload()
    features.clear_caches()
    t0 = time.perf_counter()
    c = features.coefficients("hamiltonian", (64, 64), exact=False, network="torus")
    assert time.perf_counter() - t0 < 20  # about 0.05 s; the symmetry search it replaces took 44 s
    p = 64 * 64
    assert c.steps == 2 * (p - 1) and c.moved == pytest.approx(2 * (p - 1) / (4 * p))
    features.clear_caches()
