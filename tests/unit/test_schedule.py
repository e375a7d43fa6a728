"""Swing schedules proved by the in-process simulator (no MPI)."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from swing_mpi.blocks import split, split_range
from swing_mpi.schedule import build_schedule
from swing_mpi.schedule.rings import RingProgram, check_program, circulant_program, extra_node_program, ring_program
from swing_mpi.schedule.swing import EVEN_OFFSETS, delta, dim_program, lane_plan, offsets_cost, rho, search_offsets
from swing_mpi.simulate import ScheduleError, simulate
from swing_mpi.topology import Torus

M = 1021


def affine(f: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Compose affine maps x -> a·x + b (mod M), packed as a·M + b.

    Associative and NOT commutative, so it exposes any operand reordering.
    """
    a1, b1, a2, b2 = f // M, f % M, g // M, g % M
    return (a1 * a2 % M) * M + (a2 * b1 + b2) % M


def run(alg: str, dims, count: int, *, kind: str = "int", exact: bool = True, op=np.add):
    torus = Torus(dims)
    p = torus.size
    scheds = [build_schedule(alg, torus.dims, r, count, exact=exact) for r in range(p)]
    rng = np.random.default_rng(p * 7919 + count)
    if kind == "int":
        # random 40-bit values: any double counting or missed contribution changes the sum
        ins = [rng.integers(-2**40, 2**40, count) for _ in range(p)]
    elif kind == "affine":
        ins = [rng.integers(0, M * M, count) for _ in range(p)]
    else:
        # mixed magnitudes make float sums order-sensitive
        ins = [rng.choice([1e6, -1e6, 1e-2, 3.3]) * rng.standard_normal(count) for _ in range(p)]
    outs = simulate(scheds, ins, op)
    return scheds, ins, outs


def assert_exact_sum(ins, outs):
    expected = np.sum(ins, axis=0) if ins[0].size else ins[0]
    for r, out in enumerate(outs):
        assert np.array_equal(out, expected), f"rank {r} has a wrong result"


def assert_bit_identical(outs):
    for r, out in enumerate(outs):
        assert out.tobytes() == outs[0].tobytes(), f"rank {r} differs from rank 0 in the last bits"


def counts_for(p: int):
    return sorted({0, 1, max(p - 1, 0), p, 2 * p + 3, 4 * 2 * p + 5, 1000})


# -- the paper's examples ---------------------------------------------------------

def test_offsets_are_the_papers():
    assert [rho(t) for t in range(6)] == [1, -1, 3, -5, 11, -21]
    assert [delta(t) for t in range(6)] == [1, 1, 3, 5, 11, 21]
    for t in range(1, 12):
        assert delta(t) <= 2 ** t
        assert delta(t) == (2 ** (t + 1) - (-1) ** (t + 1)) // 3


def test_figure4_first_step_on_4x4():
    s = build_schedule("swing-bw", (4, 4), 0, 16 * 4 * 3)
    first = {name: lane[0].transfers[0].peer for name, lane in zip(s.lane_names, s.lanes)}
    assert first == {"plain-0": 4, "plain-1": 1, "mirrored-0": 12, "mirrored-1": 3}


def test_coordinates_are_mpi_cartesian():
    t = Torus((4, 4))
    assert t.coords(1) == (0, 1) and t.coords(4) == (1, 0)
    assert all(t.rank(t.coords(r)) == r for r in range(16))


def test_lane_plan_skips_exhausted_dimensions():
    # 2x8: dim 0 has 1 step, dim 1 has 3
    assert lane_plan((2, 8), 0) == [(0, 0), (1, 0), (1, 1), (1, 2)]
    assert lane_plan((2, 8), 1) == [(1, 0), (0, 0), (1, 1), (1, 2)]


# -- swing-bw: correctness on every shape --------------------------------------------

@pytest.mark.parametrize("p", range(1, 65))
def test_swing_bw_ring_every_p(p):
    for count in counts_for(p):
        scheds, ins, outs = run("swing-bw", (p,), count)
        assert_exact_sum(ins, outs)
    _, _, outs = run("swing-bw", (p,), 2 * p + 3, kind="float")
    assert_bit_identical(outs)


SHAPES_2D = [(a, b) for a in range(1, 13) for b in range(1, 13) if a <= b] + [(7, 8), (15, 16), (13, 13)]
ALL_3D = [(a, b, c) for a in range(2, 7) for b in range(a, 7) for c in range(b, 7)]
SHAPES_3D_ALWAYS = [(2, 2, 2), (2, 2, 3), (2, 3, 5), (3, 3, 3), (3, 4, 4), (2, 4, 4), (4, 4, 4), (3, 5, 6),
                    (5, 5, 5), (3, 4, 2), (4, 6, 6)]
SLOW = os.environ.get("SWING_MPI_SLOW_TESTS", "") not in ("", "0")
"""Every 3-D shape up to 6x6x6 runs with SWING_MPI_SLOW_TESTS=1; the representative set above always runs."""
SHAPES_3D = SHAPES_3D_ALWAYS + ([d for d in ALL_3D if d not in SHAPES_3D_ALWAYS] if SLOW else [])


@pytest.mark.parametrize("dims", SHAPES_2D + SHAPES_3D, ids=lambda d: "x".join(map(str, d)))
def test_swing_bw_torus_shapes(dims):
    p = math.prod(dims)
    counts = (1, p - 1, 2 * p * len(dims) + 7) if p <= 100 else (2 * p * len(dims) + 7,)
    for count in counts:
        _, ins, outs = run("swing-bw", dims, count)
        assert_exact_sum(ins, outs)
    scheds, _, outs = run("swing-bw", dims, 3 * p + 1, kind="float")
    assert_bit_identical(outs)
    assert_one_coordinate(scheds)
    for s in scheds[:p if p > 1 else 0]:
        assert_each_block_once(s, p)


def assert_one_coordinate(scheds):
    """Every message goes to a peer that differs from the sender in exactly one torus coordinate."""
    torus = Torus(scheds[0].dims)
    for s in scheds:
        me = torus.coords(s.rank)
        for lane in s.lanes:
            for st in lane:
                for t in st.transfers:
                    other = torus.coords(t.peer)
                    moved = [k for k, (a, b) in enumerate(zip(me, other)) if a != b]
                    assert len(moved) == 1, f"rank {me} talks to {other}: not on one of its rings"
                    assert t.port is not None and t.port // 2 == moved[0]


LOCALITY = [(3, 4), (5, 8), (7, 8), (3, 3), (5, 5), (6, 9), (3, 4, 4), (3, 3, 5), (6,), (7,), (15,)]


@pytest.mark.parametrize("dims", LOCALITY, ids=lambda d: "x".join(map(str, d)))
def test_every_peer_is_on_one_ring(dims):
    p = math.prod(dims)
    for alg in ("swing-bw", "swing-bw-1port"):
        assert_one_coordinate([build_schedule(alg, dims, r, 4 * p) for r in range(p)])
    for exact in (True, False):
        assert_one_coordinate([build_schedule("swing-lat", dims, r, 5, exact=exact) for r in range(p)])


@pytest.mark.parametrize("d", range(2, 65))
def test_ring_programs_are_reduce_scatters(d):
    """Every side's program, plain and mirrored, proved by following contributor sets."""
    for sign in (1, -1):
        prog = dim_program(d, sign)
        check_program(prog)
        assert prog.steps == math.ceil(math.log2(d))
        held = [max(bin(prog.held(c, t)).count("1") for c in range(d)) for t in range(prog.steps + 1)]
        if d % 2:  # circulant: every node halves every step (no node holds more than the others)
            assert all(h == -(-d // 2 ** t) or h == d // 2 ** t + 1 for t, h in enumerate(held)), held
    check_program(circulant_program(d))
    if d % 2:
        inner = dim_program(d - 1)
        check_program(extra_node_program(inner, spread=True))
        check_program(extra_node_program(inner))
    check_program(ring_program(d, 1))
    check_program(ring_program(d, -1))


def test_check_program_rejects_double_counting():
    prog = dim_program(4)
    rows = [list(row) for row in prog.sends]
    rows[1][0] = rows[0][0]  # node 0 resends what it gave away at step 0
    bad = RingProgram(4, tuple(tuple(r) for r in rows))
    with pytest.raises(ValueError):
        check_program(bad)


def test_even_offsets_are_searched_and_cheaper():
    """The table is what the search finds (small sides) and never costs more than Swing's own offsets."""
    for d, offs in EVEN_OFFSETS.items():
        assert d % 2 == 0 and d & (d - 1)
        assert len(offs) == math.ceil(math.log2(d))
        own = offsets_cost(d, [rho(t) for t in range(len(offs))])
        assert offsets_cost(d, offs) <= own
        if d <= 20:
            assert search_offsets(d) == offs


def test_blocks_meta_is_what_each_rank_ends_up_owning():
    for dims in [(4, 4), (3, 4), (6, 6), (5, 8), (7,)]:
        p = math.prod(dims)
        count = 2 * len(dims) * p * 2 + 3
        for r in range(p):
            s = build_schedule("swing-bw", dims, r, count)
            for li, part in enumerate(split(count, len(s.lanes))):
                blocks = s.meta["blocks"][li]
                assert sorted(blocks) == split_range(part, p)
                sent = set(lane_elements(s, li, "reduce-scatter", "send"))
                assert set(range(*part)) - sent == set(range(*blocks[r]))


# -- swing-bw: steps, bytes, ports -----------------------------------------------------

def even_shapes():
    return [(p,) for p in range(2, 65, 2)] + [d for d in SHAPES_2D if all(x % 2 == 0 for x in d)] + [
        (2, 2, 2), (2, 4, 4), (4, 4, 4), (6, 6), (10, 10), (4, 6)]


def lane_elements(s, lane_index, phase, side):
    """Elements of a lane's ``phase`` steps on ``side`` ('send'/'recv'), as a list (repeats kept)."""
    out = []
    for st in s.lanes[lane_index]:
        if st.phase == phase:
            for t in st.transfers:
                for a, b in getattr(t, side):
                    out.extend(range(a, b))
    return out


def assert_each_block_once(s, p):
    """Check each block is sent once per phase.

    Per lane: reduce-scatter sends and all-gather receives cover the lane's part
    minus exactly one block (the one this rank ends up owning), each element once.
    """
    for li, part in enumerate(split(s.count, len(s.lanes))):
        size = part[1] - part[0]
        sent = lane_elements(s, li, "reduce-scatter", "send")
        got = lane_elements(s, li, "all-gather", "recv")
        assert len(sent) == len(set(sent)), f"lane {li}: an element is sent twice in reduce-scatter"
        assert len(got) == len(set(got)), f"lane {li}: an element is received twice in all-gather"
        assert set(sent) == set(got)
        own = set(range(*part)) - set(sent)
        assert len(own) in (size // p, -(-size // p)), f"lane {li}: keeps {len(own)} elements"
        assert own == set(range(min(own), max(own) + 1)) if own else True


@pytest.mark.parametrize("dims", even_shapes(), ids=lambda d: "x".join(map(str, d)))
def test_swing_bw_steps_and_bytes_even(dims):
    torus = Torus(dims)
    p = torus.size
    count = 2 * len(dims) * p * 3 + 5
    L = sum(math.ceil(math.log2(d)) for d in dims if d > 1)
    for r in {0, 1, p - 1, p // 2}:
        s = build_schedule("swing-bw", torus.dims, r, count)
        assert s.nsteps == 2 * L
        # each rank sends each of its non-owned blocks exactly once in each phase
        assert_each_block_once(s, p)
        biggest = sum((p - 1) * -(-(b - a) // p) for a, b in split(count, len(s.lanes)))
        assert s.sent_elements() <= 2 * biggest


@pytest.mark.parametrize("p", [3, 5, 7, 9, 11, 15, 17, 31, 33, 63])
def test_swing_bw_odd_p_bytes(p):
    # odd p: the extra rank relays through its neighbours, still each rank sends each
    # non-owned block once per phase, and all ranks together move the minimum
    count = 2 * p * 5 + 3
    total = 0
    for r in range(p):
        s = build_schedule("swing-bw", (p,), r, count)
        assert_each_block_once(s, p)
        total += s.sent_elements()
    assert total == 2 * count * (p - 1)


# (a side of 2 has one link to one neighbour, so its two lanes necessarily share it)
@pytest.mark.parametrize("dims", [(4, 4), (8, 8), (4, 4, 4), (16, 16), (8, 8, 8)], ids=str)
def test_square_tori_use_a_different_port_per_lane_every_step(dims):
    torus = Torus(dims)
    for r in (0, 1, torus.size - 1):
        s = build_schedule("swing-bw", dims, r, torus.size * 2 * len(dims))
        for step in range(s.nsteps):
            ports = [lane[step].transfers[0].port for lane in s.lanes]
            assert len(set(ports)) == len(ports) == 2 * len(dims), (r, step, ports)


def test_64x64_schedule_is_fast_and_halves():
    t0 = time.perf_counter()
    s = build_schedule("swing-bw", (64, 64), 17, 4096 * 4 * 2)
    assert time.perf_counter() - t0 < 5.0
    assert s.nsteps == 24
    sizes = [lane[i].transfers[0].send_count for lane in s.lanes[:1] for i in range(12)]
    assert all(sizes[i] == 2 * sizes[i + 1] for i in range(11))


def test_large_shape_properties_8x8x8():
    s = build_schedule("swing-bw", (8, 8, 8), 5, 512 * 6)
    assert s.nsteps == 18 and s.sent_elements() == 2 * (512 * 6 - 6)


# -- swing-lat -------------------------------------------------------------------------

LAT_SHAPES = [(p,) for p in range(1, 34)] + [(a, b) for a in range(1, 7) for b in range(a, 8)] + SHAPES_3D


@pytest.mark.parametrize("dims", LAT_SHAPES, ids=lambda d: "x".join(map(str, d)))
def test_swing_lat_exact_and_contributions(dims):
    p = math.prod(dims)
    for count in (0, 1, 7):
        _, ins, outs = run("swing-lat", dims, count)
        assert_exact_sum(ins, outs)
        # the contributions form: bit-identical floats, and rank order for a non-commutative op
        _, ins, outs = run("swing-lat", dims, count, kind="float", exact=False)
        assert_bit_identical(outs)
        assert all(np.allclose(o, np.sum(ins, axis=0) if count else o) for o in outs)
        _, ins, outs = run("swing-lat", dims, count, kind="affine", exact=False, op=affine)
        expected = ins[0]
        for x in ins[1:]:
            expected = affine(expected, x)
        assert all(np.array_equal(o, expected) for o in outs)
    torus = Torus(dims)
    virt = [1 << (d.bit_length() - 1) for d in dims]
    folds = sum(1 for d, v in zip(dims, virt) if d != v)
    s = build_schedule("swing-lat", torus.dims, 0, 10)
    assert s.nsteps == (sum(int(math.log2(v)) for v in virt) + 2 * folds if p > 1 else 0)


def test_swing_lat_exact_form_is_not_bit_identical_for_floats():
    """Why floats take the contributions form: Swing's per-rank trees differ."""
    _, _, outs = run("swing-lat", (16,), 64, kind="float", exact=True)
    assert any(o.tobytes() != outs[0].tobytes() for o in outs)


# -- recdoub: order-preserving ----------------------------------------------------------

@pytest.mark.parametrize("p", range(1, 34))
def test_recdoub_keeps_rank_order(p):
    _, ins, outs = run("recdoub", (p,), 9, kind="affine", op=affine)
    expected = ins[0]
    for x in ins[1:]:
        expected = affine(expected, x)
    assert all(np.array_equal(o, expected) for o in outs)
    _, _, outs = run("recdoub", (p,), 9, kind="float")
    assert_bit_identical(outs)


# -- the simulator itself catches broken schedules -----------------------------------

def test_simulator_rejects_mismatched_lengths():
    from dataclasses import replace

    scheds = [build_schedule("swing-bw", (4,), r, 16) for r in range(4)]
    lane0 = list(scheds[1].lanes[0])
    st = lane0[0]
    t = st.transfers[0]
    lane0[0] = replace(st, transfers=(replace(t, recv=((t.recv[0][0], t.recv[0][1] - 1),)),))
    scheds[1] = replace(scheds[1], lanes=(tuple(lane0),) + scheds[1].lanes[1:])
    with pytest.raises(ScheduleError, match="expects"):
        simulate(scheds, [np.ones(16, np.int64)] * 4)


def test_simulator_rejects_unmatched_message():
    from dataclasses import replace

    scheds = [build_schedule("swing-bw", (4,), r, 16) for r in range(4)]
    lane0 = list(scheds[2].lanes[0])
    st = lane0[0]
    lane0[0] = replace(st, transfers=(replace(st.transfers[0], recv=()),))
    scheds[2] = replace(scheds[2], lanes=(tuple(lane0),) + scheds[2].lanes[1:])
    with pytest.raises(ScheduleError, match="unmatched"):
        simulate(scheds, [np.ones(16, np.int64)] * 4)


def test_simulator_rejects_lanes_that_share_elements():
    from dataclasses import replace

    scheds = [build_schedule("swing-bw", (4, 4), r, 64) for r in range(16)]
    assert len(scheds[5].lanes) >= 2
    simulate(scheds, [np.ones(64, np.int64)] * 16)  # as built: disjoint lanes
    lanes = list(scheds[5].lanes)
    st = lanes[1][0]
    t = st.transfers[0]
    a, _ = scheds[5].lanes[0][0].transfers[0].send[0]  # an element lane 0 sends
    lanes[1] = (replace(st, transfers=(replace(t, send=((a, a + 1), *t.send[1:])),) + st.transfers[1:]),
                *lanes[1][1:])
    scheds[5] = replace(scheds[5], lanes=tuple(lanes))
    with pytest.raises(ScheduleError, match="rank 5: lanes 0 and 1 share elements"):
        simulate(scheds, [np.ones(64, np.int64)] * 16)


# -- topology input checks ----------------------------------------------------------------

@pytest.mark.parametrize("spec, msg", [
    ("4x", "cannot parse"), ("4x0", ">= 1"), ((4, -4), ">= 1"), ("abc", "cannot parse"), ((), "at least one"),
])
def test_bad_dims(spec, msg):
    with pytest.raises(ValueError, match=msg):
        Torus.from_spec(spec)


def test_dims_product_must_match():
    with pytest.raises(ValueError, match="hold 12 ranks, but the communicator has 16"):
        Torus.from_spec("3x4", 16)


def test_balanced_dims_like_mpi():
    assert Torus.from_spec(None, 16, ndims=2).dims == (4, 4)
    assert Torus.from_spec(None, 12, ndims=2).dims == (4, 3)
    assert Torus.from_spec(None, 8, ndims=3).dims == (2, 2, 2)
    assert Torus.from_spec(None, 7).dims == (7,)


def test_distance_and_ports():
    t = Torus((4, 4))
    assert t.distance(0, 15) == 2 and t.distance(0, 10) == 4
    assert t.neighbor(0, 0) == 4 and t.neighbor(0, 1) == 12 and t.neighbor(0, 2) == 1 and t.neighbor(0, 3) == 3
    assert t.port_towards(0, 2) == 2  # tie at d/2 goes the + way


def test_ndims_strings_match_mpi_compute_dims():
    from mpi4py import MPI

    for p in range(1, 65):
        for nd in (1, 2, 3):
            assert Torus.from_spec(f"{nd}d", p).dims == tuple(MPI.Compute_dims(p, nd)), (p, nd)
    with pytest.raises(ValueError, match="needs the number of ranks"):
        Torus.from_spec("2d")


@pytest.mark.parametrize("dims", [(4, 4), (3, 4), (2, 3, 4), (7,), (6, 10), (8, 8)])
def test_sizes_only_schedules_carry_the_real_counts(dims):
    """build_sizes: the real schedule's peers, steps, actions and counts, with placeholder ranges."""
    from swing_mpi.schedule import ALGORITHMS, build_sizes

    def shape(s):
        return [[(st.phase, st.combine, tuple((t.peer, t.send_count, t.recv_count, t.action, t.peer_first, t.port)
                                              for t in st.transfers)) for st in lane] for lane in s.lanes]

    p = math.prod(dims)
    compared = 0
    for alg in ALGORITHMS:
        for count in (0, 5, 1001):
            for rank in sorted({0, p // 2 + 1, p - 1}):
                try:
                    real = build_schedule(alg, dims, rank, count)
                except ValueError:
                    continue  # the algorithm does not run on this shape
                sized = build_sizes(alg, dims, rank, count)
                assert shape(sized) == shape(real), (alg, dims, count, rank)
                assert all(len(t.send) <= 1 and len(t.recv) <= 1 for lane in sized.lanes for st in lane
                           for t in st.transfers if st.phase in ("reduce-scatter", "all-gather"))
                compared += 1
    assert compared >= 3 * 3 * 8
    real, sized = build_schedule("swing-bw", dims, 0, 1001), build_sizes("swing-bw", dims, 0, 1001)
    assert real is build_schedule("swing-bw", dims, 0, 1001)  # the cache holds real schedules only
    if dims in ((3, 4), (6, 10)):  # placeholders indeed: one range where the real transfer has several
        assert any(len(t.send) > 1 for lane in real.lanes for st in lane for t in st.transfers)
        assert not any(len(t.send) > 1 for lane in sized.lanes for st in lane for t in st.transfers)
