"""The paper's baselines as schedules: rabenseifner, recdoub-mirrored, ring, bucket.

Every schedule goes through ``build_schedule`` and the in-process oracle
``simulate`` (which checks the message contract), with exact int64 sums and
float64 results that must be bit-identical on every rank. Bytes and step
counts are checked against what each algorithm promises.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from swing_mpi.blocks import split, split_range
from swing_mpi.schedule import ALGORITHMS, build_schedule
from swing_mpi.schedule.rabenseifner import xor_direction, xor_peer
from swing_mpi.schedule.recdoub import fold_ranks
from swing_mpi.schedule.swing import lane_plan
from swing_mpi.simulate import simulate
from swing_mpi.topology import Torus

BASELINES = ("rabenseifner", "recdoub-mirrored", "ring", "bucket")

RINGS = [(p,) for p in range(1, 34)]
GRIDS = [(a, b) for a in range(1, 9) for b in range(1, 9)]
CUBES = [(2, 2, 2), (2, 3, 5), (3, 3, 3), (4, 4, 4)]
SHAPES = RINGS + GRIDS + CUBES


def _name(dims) -> str:
    return "x".join(map(str, dims))


def _counts(p: int):
    """0, 1, p−1 (one empty block), p, 2p+3 (uneven blocks), a few hundred.

    Above 12 ranks only p−1 and 2p+3 (an empty block, uneven blocks) to keep
    the file fast; :func:`test_more_counts_on_large_shapes` adds 0, 1, p and
    300 on a few large shapes.
    """
    if p > 12:
        return [p - 1, 2 * p + 3]
    return sorted({0, 1, p - 1, p, 2 * p + 3, 300})


def _is_pow2(x: int) -> bool:
    return x & (x - 1) == 0


def _reduces_like_a_ring(alg: str, dims) -> bool:
    """Whether the data flow only depends on ``p`` (ring; XOR schedules folded onto a 1-D ring)."""
    p = math.prod(dims)
    return len(dims) > 1 and (alg == "ring" or (alg in ("rabenseifner", "recdoub-mirrored")
                                                 and not _is_pow2(p)))


def _schedules(alg, dims, count):
    return [build_schedule(alg, tuple(dims), r, count) for r in range(math.prod(dims))]


def _check_int(scheds, rng):
    p, count = scheds[0].size, scheds[0].count
    x = [rng.integers(-(1 << 40), 1 << 40, count, dtype=np.int64) for _ in range(p)]
    want = np.sum(np.stack(x), axis=0) if count else np.zeros(0, np.int64)
    for r, got in enumerate(simulate(scheds, x)):
        assert got.dtype == np.int64
        assert np.array_equal(got, want), f"rank {r}: wrong sum"


def _check_float(scheds, rng):
    p, count = scheds[0].size, scheds[0].count
    x = []
    for _ in range(p):
        mag = rng.choice([1e6, 1.0, 1e-2], count)
        x.append(rng.standard_normal(count) * mag)
    stack = np.stack(x)
    want = stack.sum(axis=0)
    tol = 4 * p * np.finfo(np.float64).eps * np.abs(stack).sum(axis=0) + 1e-300
    out = simulate(scheds, x)
    ref = out[0].view(np.int64)
    for r, got in enumerate(out):
        assert np.array_equal(got.view(np.int64), ref), f"rank {r} differs from rank 0 in some bits"
        assert np.all(np.abs(got - want) <= tol), f"rank {r}: far from the sum"


def _sent(s, phase=None) -> int:
    return sum(t.send_count for lane in s.lanes for st in lane for t in st.transfers
               if phase is None or st.phase == phase)


def _sent_lane(s, lane, phase) -> int:
    return sum(t.send_count for st in s.lanes[lane] for t in st.transfers if st.phase == phase)


def _check_bytes_and_steps(alg, dims, scheds, *, hops=False):
    p, count = scheds[0].size, scheds[0].count
    torus = Torus(dims)
    sent = [s.sent_elements() for s in scheds]
    total = sum(sent)
    if p == 1:
        assert all(not s.lanes for s in scheds)
        return
    parts = split(count, len(scheds[0].lanes))
    assert all(len(s.lanes) == len(parts) for s in scheds)
    if alg == "ring":
        blocks = split(count, p)
        size = [b - a for a, b in blocks]
        assert total == 2 * (p - 1) * count
        for s in scheds:
            r = s.rank
            assert s.nsteps == 2 * (p - 1)
            assert sent[r] == 2 * count - size[r] - size[(r + 1) % p]
            assert _sent(s, "reduce-scatter") == count - size[r]
    elif alg == "bucket":
        active = [d for d in dims if d > 1]
        nsteps = 2 * sum(d - 1 for d in active)
        nlanes = (1 if all(d == 2 for d in active) else 2) * len(active)  # sides of 2: no mirrored lanes
        assert total == 2 * (p - 1) * count
        for s in scheds:
            assert len(s.lanes) == nlanes
            assert all(len(lane) == nsteps for lane in s.lanes)
            assert sent[s.rank] <= 2 * count * (p - 1) / p + 2 * nlanes * sum(d - 1 for d in active)
            if hops:  # Ξ = 1: every message goes to a neighbour, on the port that leads there
                for lane in s.lanes:
                    for st in lane:
                        for t in st.transfers:
                            assert torus.neighbor(s.rank, t.port) == t.peer
    else:
        pw, rem = fold_ranks(p)
        L = pw.bit_length() - 1
        assert total == 2 * (pw - 1) * count + 2 * rem * count
        for s in scheds:
            assert all(len(lane) == 2 * L + (2 if rem else 0) for lane in s.lanes)
            bound = sum(2 * (pw - 1) * math.ceil((b - a) / pw) for a, b in parts)
            folded = rem and s.rank < 2 * rem
            assert sent[s.rank] <= bound + (count if folded else 0)
            if folded and s.rank % 2 == 0:
                assert _sent(s, "reduce-scatter") == 0 and _sent(s, "fold") == count
        # reduce-scatter: every survivor sends every block of every part but its own
        # exactly once, so what it keeps are the blocks of split_range(part, p')
        # (rs_ag_lane may place blocks in another order: compare as multisets)
        survivors = [s for s in scheds if not (s.rank < 2 * rem and s.rank % 2 == 0)]
        for li, part in enumerate(parts):
            kept = sorted(part[1] - part[0] - _sent_lane(s, li, "reduce-scatter") for s in survivors)
            assert kept == sorted(b - a for a, b in split_range(part, pw))


@pytest.mark.parametrize("dims", SHAPES, ids=_name)
@pytest.mark.parametrize("alg", BASELINES)
def test_sums_bytes_steps(alg, dims):
    p = math.prod(dims)
    rng = np.random.default_rng(p * 7919 + len(dims))
    counts = _counts(p)
    if _reduces_like_a_ring(alg, dims):
        # same data flow as the 1-D ring of p (tested with more counts): only ports differ
        counts = [2 * p + 3]
    for i, count in enumerate(counts):
        scheds = _schedules(alg, dims, count)
        _check_bytes_and_steps(alg, dims, scheds, hops=i == 0)
        _check_int(scheds, rng)
        if count == 2 * p + 3:
            _check_float(scheds, rng)


LARGE = [(31,), (32,), (5, 7), (8, 8), (2, 3, 5), (4, 4, 4)]


# shapes on which an algorithm moves data like the 1-D ring are covered by
# test_shape_independent_data_flow, so they are left out here
LARGE_CASES = [(alg, dims) for alg in BASELINES for dims in LARGE if not _reduces_like_a_ring(alg, dims)]


@pytest.mark.parametrize("alg,dims", LARGE_CASES, ids=[f"{a}-{_name(d)}" for a, d in LARGE_CASES])
def test_more_counts_on_large_shapes(alg, dims):
    p = math.prod(dims)
    rng = np.random.default_rng(p)
    for count in (0, 1, p, 300):
        scheds = _schedules(alg, dims, count)
        _check_bytes_and_steps(alg, dims, scheds)
        _check_int(scheds, rng)
        if count == 300:
            _check_float(scheds, rng)


RING_LIKE = [(alg, dims) for alg in BASELINES for dims in [(2, 3), (3, 2), (3, 5), (6, 6), (2, 2, 5), (7, 3)]
             if _reduces_like_a_ring(alg, dims)]


@pytest.mark.parametrize("alg,dims", RING_LIKE, ids=[f"{a}-{_name(d)}" for a, d in RING_LIKE])
def test_shape_independent_data_flow(alg, dims):
    """Where the data flow only depends on p, 2-D shapes move the same ranges as the ring."""
    p = math.prod(dims)
    for r in range(p):
        a = build_schedule(alg, dims, r, 3 * p + 1)
        b = build_schedule(alg, (p,), r, 3 * p + 1)
        strip = [[[(t.peer, t.send, t.recv, t.action) for t in st.transfers] for st in lane]
                 for lane in a.lanes]
        assert strip == [[[(t.peer, t.send, t.recv, t.action) for t in st.transfers] for st in lane]
                         for lane in b.lanes]


def test_registered():
    for name in BASELINES:
        info = ALGORITHMS[name]
        assert info.commutative_only
        assert info.form == "bandwidth"
        assert info.builder() is not None
    assert {"swing-bw", "swing-bw-1port", "swing-lat", "recdoub"} <= set(ALGORITHMS)
    assert not ALGORITHMS["recdoub"].commutative_only


@pytest.mark.parametrize("d", [2, 4, 8, 16, 64])
def test_xor_peers_are_involutions(d):
    for t in range(d.bit_length() - 1):
        for c in range(d):
            for sign in (1, -1):
                q = xor_peer(c, t, d, sign)
                assert xor_peer(q, t, d, sign) == c
                assert q == (c + xor_direction(c, t, sign) * (1 << t)) % d
            assert xor_direction(c, t, 1) == -xor_direction(c, t, -1)


@pytest.mark.parametrize("dims", [(16,), (4, 4), (8, 8), (2, 2, 2), (4, 4, 4), (8, 4), (2, 16)], ids=_name)
def test_rabenseifner_torus_optimized_peers(dims):
    """Power-of-two tori: step s XORs one coordinate by 2^t, t the in-dimension step."""
    torus = Torus(dims)
    plan = lane_plan(dims, 0)
    for r in range(torus.size):
        s = build_schedule("rabenseifner", dims, r, 5 * torus.size)
        (lane,) = s.lanes
        rs = [st for st in lane if st.phase == "reduce-scatter"]
        assert len(rs) == len(plan)
        for st, (k, t) in zip(rs, plan):
            (tr,) = st.transfers
            c = list(torus.coords(r))
            c[k] ^= 1 << t
            assert tr.peer == torus.rank(c)
            assert tr.port // 2 == k


@pytest.mark.parametrize("dims", [(2,), (4,), (16,), (32,), (2, 2), (4, 4), (8, 8), (2, 2, 2), (4, 4, 4)],
                         ids=_name)
def test_mirrored_lanes_use_distinct_ports(dims):
    """Square power-of-two tori: the 2D lanes leave by 2D distinct ports at every step.

    Where every side is 2 (one neighbour per dimension) the D plain lanes leave in the D dimensions.
    """
    torus = Torus(dims)
    D = len(dims)
    hypercube = all(d == 2 for d in dims)
    for r in range(torus.size):
        s = build_schedule("recdoub-mirrored", dims, r, 7 * torus.size)
        assert len(s.lanes) == (D if hypercube else 2 * D)
        for step in range(s.nsteps):
            ports = []
            for lane in s.lanes:
                (tr,) = lane[step].transfers
                k, sign = tr.port // 2, (1 if tr.port % 2 == 0 else -1)
                # the port points the way the XOR step moves: peer = coordinate ± 2^t
                dist = Torus.ring_distance(torus.coords(r)[k], torus.coords(tr.peer)[k], dims[k])
                assert torus.shift(r, k, sign * dist) == tr.peer
                ports.append(tr.port)
            if hypercube:
                assert sorted(port // 2 for port in ports) == list(range(D)), (r, step, ports)
            else:
                assert sorted(ports) == list(range(2 * D)), (r, step, ports)


@pytest.mark.parametrize("dims", [(5,), (3, 3), (4, 4), (2, 2, 2), (3, 3, 3)], ids=_name)
def test_bucket_lanes_use_distinct_ports(dims):
    torus = Torus(dims)
    D = len(dims)
    hypercube = all(d == 2 for d in dims)
    for r in range(torus.size):
        s = build_schedule("bucket", dims, r, 64 * torus.size + 1)
        for step in range(s.nsteps):
            sends = [t.port for lane in s.lanes for t in lane[step].transfers if t.send]
            if hypercube:  # one neighbour per dimension: one lane in each
                assert sorted(port // 2 for port in sends) == list(range(D)), (r, step, sends)
            else:
                assert sorted(sends) == list(range(2 * D)), (r, step, sends)


@pytest.mark.parametrize("dims", [(2,), (2, 2), (2, 2, 2), (2, 1, 2), (4, 2), (2, 4, 2)], ids=_name)
@pytest.mark.parametrize("alg", ["swing-bw", "bucket", "recdoub-mirrored"])
def test_hypercube_has_no_mirrored_lanes(alg, dims):
    """A ring of 2 has one neighbour: on a torus of sides 2 the mirrored lanes would repeat the plain ones."""
    active = [d for d in dims if d > 1]
    s = build_schedule(alg, dims, 0, 64)
    hypercube = all(d == 2 for d in active)
    assert len(s.lanes) == (len(active) if hypercube else 2 * len(active))
    assert all(name.startswith("plain") for name in s.lane_names) == hypercube


@pytest.mark.parametrize("alg", BASELINES)
def test_bad_count_rejected(alg):
    with pytest.raises(ValueError):
        build_schedule(alg, (4,), 0, -1)
