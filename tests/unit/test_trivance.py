"""Trivance schedules proved by the in-process simulator and the ring-program checker (no MPI)."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from test_schedule import assert_bit_identical, assert_each_block_once, assert_exact_sum, assert_one_coordinate, run

from swing_mpi.model import analyze
from swing_mpi.schedule import build_schedule
from swing_mpi.schedule.blockset import bits
from swing_mpi.schedule.rings import check_program, mirror_program
from swing_mpi.schedule.trivance import (
    is_power_of_three,
    log3_ceil,
    trivance_distances,
    trivance_lane,
    trivance_paths,
    trivance_program,
)
from swing_mpi.simulate import simulate
from swing_mpi.topology import Torus

RINGS = list(range(2, 31))
SHAPES = [(3, 3), (9, 9), (2, 3), (3, 2), (3, 5), (4, 6), (5, 5), (2, 2), (4, 4), (2, 9), (3, 9), (6, 6), (8, 3),
          (2, 2, 3), (3, 3, 3), (2, 3, 4), (3, 3, 2), (2, 2, 2)]


def counts(p: int) -> list[int]:
    return sorted({0, 1, max(p - 1, 0), p, 2 * p + 3, 8 * p + 5})


def test_distances_and_steps():
    assert trivance_distances(27) == (1, 3, 9)
    assert trivance_distances(9) == (1, 3)
    assert trivance_distances(10) == (1, 3, 1)  # ⌈(10 − 9)/2⌉
    assert trivance_distances(20) == (1, 3, 6)  # ⌈(20 − 9)/2⌉
    assert trivance_distances(2) == (1,)
    assert trivance_distances(1) == ()
    for d in range(1, 300):
        assert log3_ceil(d) == (0 if d == 1 else math.ceil(math.log(d, 3) - 1e-12))
        assert is_power_of_three(d) == (3 ** round(math.log(d, 3)) == d)


@pytest.mark.parametrize("d", range(2, 82))
def test_ring_program_is_a_reduce_scatter(d):
    prog = trivance_program(d)
    check_program(prog)
    check_program(mirror_program(prog, a=0))
    assert prog.steps == log3_ceil(d)
    s = trivance_distances(d)
    for t, row in enumerate(prog.sends):
        for c, msgs in enumerate(row):  # both neighbours at distance s_t, nobody else
            assert {q for q, _ in msgs} <= {(c + s[t]) % d, (c - s[t]) % d}
    for c in range(d):  # every block leaves every node once: d − 1 blocks, the minimum
        sent = [m for row in prog.sends for q, m in row[c]]
        assert sum(bin(m).count("1") for m in sent) == d - 1
        assert functools.reduce(lambda a, b: a | b, sent) == ((1 << d) - 1) & ~(1 << c)
    paths = trivance_paths(d)
    for j, (t, a) in paths.items():  # the rest of a path moves only at later steps
        rest = (j - a * s[t]) % d
        assert rest == 0 or paths[rest][0] > t


@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_power_of_three_is_balanced_ternary(L):
    d = 3 ** L
    prog = trivance_program(d)
    assert mirror_program(prog, a=0).sends == prog.sends  # the mirrored lane runs the same moves
    for t, row in enumerate(prog.sends):
        for msgs in row:  # a third of what is left to each side, every step
            assert [bin(m).count("1") for _, m in msgs] == [3 ** (L - 1 - t)] * 2
    for j, (t, a) in trivance_paths(d).items():
        digits, x = [], j if j <= d // 2 else j - d
        while x:
            r = ((x + 1) % 3) - 1
            digits.append(r)
            x = (x - r) // 3
        low = next(i for i, r in enumerate(digits) if r)
        assert (t, a) == (low, digits[low])


@pytest.mark.parametrize("d", RINGS)
def test_bw_every_ring(d):
    for count in counts(d):
        _, ins, outs = run("trivance-bw", (d,), count)
        assert_exact_sum(ins, outs)
    scheds, _, outs = run("trivance-bw", (d,), 3 * d + 1, kind="float")
    assert_bit_identical(outs)
    assert_one_coordinate(scheds)
    for s in scheds:
        assert_each_block_once(s, d)
        assert s.nsteps == 2 * log3_ceil(d)


@pytest.mark.parametrize("dims", SHAPES, ids=lambda d: "x".join(map(str, d)))
def test_bw_torus_shapes(dims):
    p = math.prod(dims)
    for count in (0, 1, p - 1, 2 * p * len(dims) + 7):
        _, ins, outs = run("trivance-bw", dims, count)
        assert_exact_sum(ins, outs)
    scheds, _, outs = run("trivance-bw", dims, 4 * p * len(dims) + 1, kind="float")
    assert_bit_identical(outs)
    assert_one_coordinate(scheds)
    for s in scheds:
        assert_each_block_once(s, p)
        assert s.nsteps == 2 * sum(log3_ceil(d) for d in dims)


def test_lanes_run_negated_distances():
    lane, mirror = trivance_lane((5, 7), 1, 1), trivance_lane((5, 7), 1, -1)
    assert lane.plan == mirror.plan == ((1, 0), (0, 0), (1, 1), (0, 1))
    for p, m in zip(lane.programs, mirror.programs):
        assert p is not None and m is not None
        d = p.d
        for t in range(p.steps):
            for c in range(d):
                assert {((-q) % d, sum(1 << ((-b) % d) for b in bits(x))) for q, x in p.sends[t][c]} == \
                    set(m.sends[t][(-c) % d])


def _lat_side_steps(d: int) -> int:
    """Exact form: ``a + b`` window steps on ``d = 2^a·3^b`` unless the fold onto ``3^m ≤ d`` is shorter."""
    m = 0
    while 3 ** (m + 1) <= d:
        m += 1
    fold = m + 2 if d > 3 ** m else m
    a = b = 0
    rest = d
    while rest % 2 == 0:
        rest, a = rest // 2, a + 1
    while rest % 3 == 0:
        rest, b = rest // 3, b + 1
    return min(a + b, fold) if rest == 1 else fold


def _lat_steps(dims) -> int:
    return sum(_lat_side_steps(d) for d in dims)


def test_lat_side_steps():
    assert [_lat_side_steps(d) for d in (2, 3, 4, 5, 6, 8, 9, 10, 12, 16, 27, 64, 81)] == \
        [1, 1, 2, 3, 2, 3, 2, 4, 3, 4, 3, 5, 4]


@pytest.mark.parametrize("dims", [(d,) for d in RINGS] + SHAPES, ids=lambda d: "x".join(map(str, d)))
def test_lat_exact_and_contributions(dims):
    p = math.prod(dims)
    for count in counts(p):
        scheds, ins, outs = run("trivance-lat", dims, count)
        assert_exact_sum(ins, outs)
        assert all(s.nsteps == _lat_steps(dims) for s in scheds)
    scheds, ins, outs = run("trivance-lat", dims, 2 * p + 3, kind="float", exact=False)
    assert_bit_identical(outs)
    # every rank combines all p contributions in rank order: ((x0 + x1) + x2) + …
    want = functools.reduce(np.add, ins)
    assert outs[0].tobytes() == want.tobytes()
    assert all(s.nsteps == sum(log3_ceil(d) for d in dims) + 1 for s in scheds)  # + the combine
    assert_one_coordinate(scheds)
    assert_one_coordinate([build_schedule("trivance-lat", dims, r, 5) for r in range(p)])


def test_lat_exact_power_of_three_sends_whole_vector_to_both_peers():
    dims = (9, 3)
    torus = Torus(dims)
    for r in range(torus.size):
        s = build_schedule("trivance-lat", dims, r, 10)
        assert s.nsteps == 3
        for st in s.lanes[0]:
            assert len(st.transfers) == 2
            assert all(t.send == ((0, 10),) == t.recv for t in st.transfers)


def test_lat_integer_ops_other_than_sum():
    dims = (4, 5)
    p = 20
    scheds = [build_schedule("trivance-lat", dims, r, 17) for r in range(p)]
    rng = np.random.default_rng(5)
    ins = [rng.integers(0, 2**30, 17) for _ in range(p)]
    for op, ref in ((np.maximum, np.max), (np.bitwise_xor, np.bitwise_xor.reduce)):
        outs = simulate(scheds, ins, op)
        for o in outs:
            assert np.array_equal(o, ref(np.array(ins), axis=0))


@pytest.mark.parametrize("dims, bw_steps", [((9, 9), 8), ((27,), 6), ((3, 3, 3), 6), ((27, 27), 12)])
def test_model_power_of_three(dims, bw_steps):
    r = analyze("trivance-bw", dims)
    assert r.K == bw_steps
    assert r.Psi == pytest.approx(1.0, rel=1e-9)  # every one of the 2D ports busy, minimal bytes
    lat = analyze("trivance-lat", dims)
    assert lat.K == bw_steps // 2


@pytest.mark.parametrize("d", [10, 16, 28, 64, 128])
def test_cover_paths_shrink_the_data(d):
    from swing_mpi.schedule.rings import ring_loads
    from swing_mpi.schedule.trivance import _build, _cover_paths, _latest_paths

    s = trivance_distances(d)
    cover, latest = (sum(ring_loads(_build(d, s, f(d, s)))) for f in (_cover_paths, _latest_paths))
    assert sum(ring_loads(trivance_program(d))) == min(cover, latest)
    assert cover < latest  # where they differ, sending early is cheaper on these sides
    held = [max(bin(trivance_program(d).held(c, t)).count("1") for c in range(d)) for t in range(len(s) + 1)]
    assert held[1] <= 0.4 * d + 1 and all(a > b for a, b in zip(held, held[1:])), held  # most leaves at once


@pytest.mark.parametrize("dims", [(8, 8), (10, 4), (9, 9)], ids=lambda d: "x".join(map(str, d)))
def test_model_symmetry_shortcut_is_exact(dims):
    # the schedules are translates of each other (paths depend on offsets only): parity or periodic covers them
    for alg in ("trivance-bw", "trivance-lat"):
        short, full = analyze(alg, dims), analyze(alg, dims, symmetry="full")
        assert (short.K, short.Psi, short.Xi_routed, short.Xi_distance) == \
            pytest.approx((full.K, full.Psi, full.Xi_routed, full.Xi_distance), rel=1e-12)
    assert analyze("trivance-bw", dims).symmetry in ("parity", "periodic")


def test_lat_exact_doubles_on_sides_of_two_and_three():
    # 4x4: two two-way steps per side (distance 1 then 2), no fold: as many steps as swing-lat
    s = build_schedule("trivance-lat", (4, 4), 5, 7)
    assert s.nsteps == 4 == build_schedule("swing-lat", (4, 4), 5, 7).nsteps
    for st in s.lanes[0]:
        sends = [t for t in st.transfers if t.send]
        recvs = [t for t in st.transfers if t.recv]
        assert len(sends) == len(recvs) == 1 and st.phase == "exchange"
    # 6: one three-way step, then one two-way step
    assert build_schedule("trivance-lat", (6,), 0, 3).nsteps == 2
