"""Odd sides: the two-way programs, the candidates and the per-lane choice (no MPI)."""

from __future__ import annotations

import itertools
import math

import pytest

from swing_mpi.model import analyze
from swing_mpi.schedule import build_schedule
from swing_mpi.schedule.base import port_lanes
from swing_mpi.schedule.programs import TWO_SIDED_FROM, _stage_steps, lane_programs, lockstep_cost, odd_candidates
from swing_mpi.schedule.rings import (
    STAGE_KINDS,
    STAGE_PROGRAMS,
    check_program,
    circulant_program,
    link_loads,
    odd_radices,
    ring_loads,
    staged_program,
    twosided_program,
    twoway_program,
)
from swing_mpi.schedule.swing import swing_lane


@pytest.mark.parametrize("d", range(3, 34, 2))
def test_twoway_and_staged_programs_are_reduce_scatters(d):
    one = twoway_program(d)
    check_program(one)
    assert one.kind == "two-way" and one.steps == (d - 1) // 2
    for row in one.sends:
        for c, msgs in enumerate(row):
            # one block to each neighbour, every step: d - 1 block-hops in all, the ring's minimum
            assert sorted(q for q, _ in msgs) == sorted({(c + 1) % d, (c - 1) % d})
            assert all(bin(m).count("1") == 1 for _, m in msgs)
    assert sum(max(n for n in step.values()) for step in link_loads(one)) == (d - 1) // 2
    for radices in odd_radices(d):
        for kinds in itertools.product(STAGE_KINDS, repeat=len(radices)):
            prog = staged_program(d, tuple(zip(radices, kinds)))
            check_program(prog)
            assert prog.steps == sum((r - 1) // 2 if k == "two-way" else ((r - 1) // 2).bit_length()
                                     if k == "two-sided" else (r - 1).bit_length() for r, k in zip(radices, kinds))
    for prog in odd_candidates(d):
        check_program(prog)


@pytest.mark.parametrize("d", range(3, 48, 2))
def test_two_sided_circulant(d):
    prog = twosided_program(d)
    check_program(prog)
    h = (d - 1) // 2
    assert prog.kind == "two-sided" and prog.steps == h.bit_length()  # ⌈log2(h + 1)⌉
    half = circulant_program(h + 1)
    for t, row in enumerate(prog.sends):
        (skip, _), = half.sends[t][0]
        for c, msgs in enumerate(row):  # to both sides, the same skip, never further than h
            assert sorted(q for q, _ in msgs) == sorted({(c + skip) % d, (c - skip) % d}) and skip <= h
    # fewer block-hops per port than the circulant's one-way route, never fewer than two-way's
    two_ports = 2 * sum(ring_loads(prog))  # a lane and its mirror share both ports
    assert two_ports <= sum(ring_loads(circulant_program(d))) + 1e-12
    assert two_ports >= sum(ring_loads(twoway_program(d))) * 2 - 1e-12
    if d >= 7:
        assert two_ports < sum(ring_loads(circulant_program(d)))


def test_staged_program_of_even_radices_too():
    # a stage may be any ring the circulant handles: 12 = 4·3
    check_program(staged_program(12, ((4, "circulant"), (3, "two-way"))))


def test_odd_radices_and_bad_input():
    assert odd_radices(15) == [(15,), (3, 5), (5, 3)]
    assert odd_radices(27) == [(27,), (3, 9), (3, 3, 3), (9, 3)]
    assert odd_radices(7) == [(7,)]
    for d in (8, 1):
        with pytest.raises(ValueError):
            twoway_program(d)
    with pytest.raises(ValueError, match="multiply"):
        staged_program(15, ((3, "two-way"), (3, "two-way")))
    with pytest.raises(ValueError, match="stage kind"):
        staged_program(15, ((3, "two-way"), (5, "ring")))
    with pytest.raises(ValueError, match="two-way"):
        staged_program(12, ((4, "two-way"), (3, "two-way")))


def test_candidates_never_take_more_steps():
    for d in range(3, 40, 2):
        cands = odd_candidates(d)
        assert cands[0].kind == "circulant"
        assert all(p.steps <= (d - 1).bit_length() for p in cands)
        assert len({p.kind for p in cands}) == len(cands)
    assert [p.kind for p in odd_candidates(5)] == ["circulant", "two-way"]  # two-sided is two-way there
    assert [p.kind for p in odd_candidates(7)] == ["circulant", "two-way", "two-sided"]
    assert [p.kind for p in odd_candidates(11)] == ["circulant", "two-sided"]  # two-way takes 5 steps > 4
    assert "two-way-5+circulant-3" in [p.kind for p in odd_candidates(15)]


def test_stage_steps_are_the_programs_steps():
    for r in range(3, 40, 2):
        for kind, build in STAGE_PROGRAMS.items():
            if kind == "two-sided" and r < TWO_SIDED_FROM:
                assert build(r).sends == twoway_program(r).sends  # why the candidates leave it out there
            assert _stage_steps(r, kind) == build(r).steps, (r, kind)


def _lanes(dims):
    return [swing_lane(dims, start, sign) for _, start, sign in port_lanes(dims)]


# Translation-invariant programs on every side (odd sides, powers of two): the lockstep
# cost (reduce-scatter and all-gather) is exactly the routed model's, which normalises to 1 / (D · cost).
@pytest.mark.parametrize("dims", [(4, 4), (8, 8), (3, 5), (5, 5), (7, 8), (3, 4, 4), (15, 16), (9, 9), (7,), (11, 11),
                                  (9, 8)],
                         ids=lambda d: "x".join(map(str, d)))
def test_lockstep_cost_is_the_routed_model(dims):
    D = sum(1 for d in dims if d > 1)
    r = analyze("swing-bw", dims)
    assert r.ceiling("routed") == pytest.approx(1 / (D * lockstep_cost(dims, _lanes(dims))), rel=1e-9)


def test_lanes_may_run_different_programs():
    # 7x8: the lane starting in the odd side runs two-way there, the other the circulant
    chosen = lane_programs((7, 8))
    assert [p.kind for p in chosen[(0, 1)]] == ["two-way", "swing"]
    assert [p.kind for p in chosen[(1, 1)]] == ["circulant", "swing"]
    assert [p.kind for p in chosen[(0, -1)]] == ["two-way-mirrored", "swing-mirrored"]
    s = build_schedule("swing-bw", (7, 8), 3, 7 * 8 * 4)
    assert s.meta["programs"] == (("two-way", "swing"), ("circulant", "swing"),
                                  ("two-way-mirrored", "swing-mirrored"), ("circulant-mirrored", "swing-mirrored"))
    # one port keeps one port per step: the circulant
    one = build_schedule("swing-bw-1port", (7, 8), 3, 7 * 8)
    assert one.meta["programs"] == (("circulant", "swing"),)


@pytest.mark.parametrize("dims,floor", [((5, 5), 1.0), ((7, 7), 1.0), ((3, 3, 3), 1.0), ((3, 5, 7), 0.8),
                                        ((9, 8), 0.79), ((5, 6), 0.88), ((15, 16), 0.77), ((11, 11), 0.83),
                                        ((13, 13), 0.75), ((11, 12), 0.65)], ids=str)
def test_odd_shapes_gain(dims, floor):
    r = analyze("swing-bw", dims)
    assert r.ceiling("routed") >= floor
    assert r.K <= 2 * sum(math.ceil(math.log2(d)) for d in dims)


def test_large_choice_is_quick():
    # too many combinations to try them all: per side, then passes per (lane, side)
    import time

    for dims in [(3, 5, 7, 9), (15, 15), (45, 45)]:
        t0 = time.perf_counter()
        chosen = lane_programs(dims)
        assert time.perf_counter() - t0 < 10
        assert len(chosen) == 2 * len(dims) and all(len(v) == len(dims) for v in chosen.values())
    assert analyze("swing-bw", (15, 15)).ceiling("routed") > 0.85
    # one side at a time starts from the best program shared by equal sides: alone, a staged
    # program on one side of 45x45 loses to the circulant on both (that start gave 66.8 %)
    assert {p.kind for p in lane_programs((45, 45))[(0, 1)]} != {"circulant"}
    assert analyze("swing-bw", (45, 45)).ceiling("routed") > 0.9
