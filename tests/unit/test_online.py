"""What ``auto`` tries on a launch's first calls: the contenders a table names, rounds, the agreed result."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from swing_mpi import online
from swing_mpi.choose import CLOSE_FACTOR, MODEL_CLOSE_FACTOR, SWITCH_MARGIN, TRIAL_MAX, choose, contenders, explain
from swing_mpi.schedule import ALGORITHMS
from swing_mpi.tuning import DecisionTable, Tuning

SIZES = (8, 1 << 20)


def _tuning(**times: tuple[float, float]) -> Tuning:
    table = DecisionTable(p=4, dims=(2, 2), exact=False, sizes=SIZES,
                          times=tuple((k.replace("_", "-"), v) for k, v in times.items()))
    return Tuning(1e-5, 1e-9, 1e-10, native_below_bytes=None, network="flat", tables=(table,), source="t")


def test_contenders_are_the_pick_then_the_close_ones_fastest_first():
    t = _tuning(ring=(1e-4, 2.0e-3), recdoub=(1e-4, 1.0e-3), bucket=(1e-4, 1.1e-3), native=(1e-4, 1.2e-3),
                swing_bw=(1e-4, 2.4e-3))
    c = contenders(4, (2, 2), 1 << 20, exact=False, tuning=t)
    assert [a for a, _ in c] == ["recdoub", "bucket", "native"][:TRIAL_MAX]
    assert c[0][0] == choose(4, (2, 2), (1 << 20) // 8, 8, exact=False, commutative=True, tuning=t)
    assert [s for _, s in c] == [1.0e-3, 1.1e-3, 1.2e-3][:TRIAL_MAX]
    assert explain(4, (2, 2), 1 << 20, exact=False, tuning=t).tried == tuple(a for a, _ in c)
    assert explain(4, (2, 2), 1 << 20, exact=False, tuning=t, collective="allgather").tried == ()


def test_native_is_tried_whenever_it_is_close():
    t = _tuning(ring=(1e-4, 1.1e-3), recdoub=(1e-4, 1.0e-3), bucket=(1e-4, 1.05e-3), native=(1e-4, 1.22e-3),
                swing_bw=(1e-4, 1.2e-3))
    assert [a for a, _ in contenders(4, (2, 2), 1 << 20, exact=False, tuning=t)] == (
        ["recdoub", "bucket", "ring", "swing-bw"][:TRIAL_MAX - 1] + ["native"])


def test_the_pick_comes_first_even_when_native_keeps_it_by_the_margin():
    # ours 3 % faster than native: native stays the pick (NATIVE_MARGIN) and is tried first
    t = _tuning(recdoub=(1e-4, 0.97e-3), native=(1e-4, 1.0e-3))
    assert [a for a, _ in contenders(4, (2, 2), 1 << 20, exact=False, tuning=t)] == ["native", "recdoub"]


def test_far_candidates_and_native_where_it_may_differ_are_not_tried():
    t = _tuning(recdoub=(1e-4, 1e-3), ring=(1e-4, CLOSE_FACTOR * 1.01e-3), native=(1e-4, 1.2e-3))
    assert [a for a, _ in contenders(4, (2, 2), 1 << 20, exact=False, tuning=t)] == ["recdoub", "native"]
    assert [a for a, _ in contenders(4, (2, 2), 1 << 20, exact=False, native_ok=False, tuning=t)] == []
    # no table for the ring, nor for exact ops: the model decides (its contenders: the next test)
    assert explain(4, (4,), 1 << 20, exact=False, tuning=t).why == "model"
    assert explain(4, (2, 2), 1 << 20, exact=True, tuning=t).why == "model"


@pytest.mark.parametrize("alpha", [1e-6, 91e-6, 1e-3])
@pytest.mark.parametrize("dims", [(2,), (4,), (2, 2), (4, 4), (8, 8), (3, 4), (7,)])
@pytest.mark.parametrize("nbytes", [8, 8 << 10, 1 << 20, 64 << 20])
def test_the_model_tries_the_fastest_of_the_other_form_where_close(alpha, dims, nbytes):
    t = Tuning(alpha, 1.7e-9, 0.06e-9, native_below_bytes=None, network="flat", source="t")
    d = explain(math.prod(dims), dims, nbytes, exact=False, tuning=t)
    assert d.why == "model"
    priced = {e.algorithm: e.seconds for e in d.estimates if e.seconds is not None and e.algorithm != "native"}
    pick = priced[d.algorithm]
    form = ALGORITHMS[d.algorithm].form
    order = list(priced)  # registry order breaks ties
    others = sorted(((s, order.index(a), a) for a, s in priced.items() if ALGORITHMS[a].form != form))
    if others and others[0][0] <= MODEL_CLOSE_FACTOR * pick:
        assert d.contenders == ((d.algorithm, pick), (others[0][2], others[0][0]))
    else:
        assert d.contenders == ()
    assert explain(math.prod(dims), dims, nbytes, exact=False, tuning=t, collective="allgather").contenders == ()


@pytest.mark.parametrize("dims", [(2,), (4,), (2, 2), (3, 4)])
def test_the_built_in_threshold_tries_the_models_pick_against_mpi(dims, monkeypatch, request):
    """Below the built-in native threshold (a guess about this MPI): MPI's call first, the model's pick tried."""
    from swing_mpi import choose as chooser
    from swing_mpi import tuning as tuning_mod
    from swing_mpi.tuning import DEFAULT_TUNING, native_below

    monkeypatch.setattr(tuning_mod, "NATIVE_BELOW_BY_MPI", {"mpich": 8192, "openmpi": 8192})
    chooser.cache_clear()
    request.addfinalizer(chooser.cache_clear)  # no decision made with this threshold outlives the test
    p = math.prod(dims)
    nb = native_below(DEFAULT_TUNING)
    assert nb, "the built-in defaults hand small vectors to MPI"  # 8192 under MPI, the defaults' own without
    d = explain(p, dims, nb // 2, exact=False, tuning=DEFAULT_TUNING)
    assert d.algorithm == "native" and d.why == "rule"
    model = explain(p, dims, nb // 2, exact=False, tuning=dataclasses.replace(DEFAULT_TUNING, native_below_bytes=None))
    assert model.why == "model"
    mine = dict((e.algorithm, e.seconds) for e in model.estimates)[model.algorithm]
    assert d.contenders == (("native", mine), (model.algorithm, mine))
    assert explain(p, dims, nb, exact=False, tuning=DEFAULT_TUNING).why == "model"  # at the threshold: the model
    # a threshold a tuning file measured, one rank (a copy), another collective: MPI's call, untried
    measured = dataclasses.replace(DEFAULT_TUNING, native_below_bytes=nb, source="a file")
    assert explain(p, dims, nb // 2, exact=False, tuning=measured).why == "rule"
    assert explain(p, dims, nb // 2, exact=False, tuning=measured).contenders == ()
    assert explain(1, (1,), nb // 2, exact=False, tuning=DEFAULT_TUNING).contenders == ()
    assert explain(p, dims, nb // 2, exact=False, tuning=DEFAULT_TUNING, collective="allgather").contenders == ()
    assert explain(p, dims, nb // 2, exact=False, native_ok=False, tuning=DEFAULT_TUNING).why == "model"


def test_rounds_follow_the_measured_times_within_bounds():
    assert online.rounds_for([1.0, 1.0]) == online.MIN_ROUNDS
    assert online.rounds_for([1e-6, 1e-6]) == online.MAX_ROUNDS
    t = online.TRIAL_SECONDS / 4
    assert online.rounds_for([t, t]) == max(online.MIN_ROUNDS, min(online.MAX_ROUNDS, 4))


def _feed(trial: online.Trial, times, comm) -> list[str]:
    """Run ``trial`` to its end, each call taking ``times(algorithm, i)`` on this rank; return who ran."""
    ran = []
    while trial.pick is None:
        a = trial.algorithm
        trial.record(times(a, len(ran)), comm)
        ran.append(a)
    return ran


def test_far_candidates_cost_no_trial():
    """A table that tells its candidates apart (2x) names no contenders: the user's first calls run the pick."""
    t = _tuning(recdoub=(1e-4, 1e-3), ring=(1e-4, 2e-3), native=(1e-4, 3.5e-3))
    assert contenders(4, (2, 2), 1 << 20, exact=False, tuning=t) == ()
    assert explain(4, (2, 2), 1 << 20, exact=False, tuning=t).tried == ()


class _OtherRank:
    """A stand-in communicator: each turn's Allreduce(MIN) with another rank's times for that turn."""

    def __init__(self, other: list[float], rounds: int) -> None:
        self.other = np.array(other)
        self.rounds = rounds
        self.calls = 0

    def Allreduce(self, sendbuf, recvbuf, op):  # noqa: N802 (mpi4py's name)
        from mpi4py import MPI

        assert op == MPI.MIN, "a turn's times agree on the least over ranks: the last rank to arrive's"
        r = self.rounds
        np.minimum(recvbuf, self.other[self.calls * r:(self.calls + 1) * r], out=recvbuf)
        self.calls += 1


ALONE = [np.inf] * 40
"""The other rank's times where only this one's count."""


def test_turns_the_pick_first_and_again_when_a_contender_looks_faster_and_the_least_over_ranks():
    """A call's time is the least over ranks: the rank that came last did not wait for the others to arrive."""
    trial = online.Trial(("a", "b", "c"), rounds=10)
    assert trial.turns == ("a", "b", "c") and trial.counted == 5 and trial.calls == 40
    other = [9.0] * 20 + [0.25] * 10 + [9.0] * 10  # the other rank, waiting for this one, except in c's turn
    comm = _OtherRank(other, 10)
    ran = _feed(trial, lambda a, i: {"a": 2.0, "b": 1.5, "c": 0.5}[a], comm)
    assert ran == ["a"] * 10 + ["b"] * 10 + ["c"] * 10 + ["a"] * 10 and comm.calls == 4  # one agreement a turn
    assert trial.medians == (2.0, 1.5, 0.25) and trial.pick == "c" and trial.algorithm == "c"


def test_the_trial_stops_as_soon_as_no_contender_looks_faster():
    trial = online.Trial(("a", "b", "c"), rounds=10)
    comm = _OtherRank(ALONE, 10)
    ran = _feed(trial, lambda a, i: {"a": 1.0, "b": 1.2, "c": 1.0 / (1 - SWITCH_MARGIN / 2)}[a], comm)
    assert ran == ["a"] * 10 + ["b"] * 10 + ["c"] * 10 and comm.calls == 3  # no second turn of the pick
    assert trial.pick == "a" and trial.medians[0] == 1.0


def test_only_the_later_half_of_a_turn_and_the_picks_second_turn_count():
    trial = online.Trial(("a", "b"), rounds=10)
    # a's first turn: a launch's slow first calls; b's first calls after the switch fast (what a left),
    # then 2; a's second turn 1
    times = ([50.0, 9.0, 5.0, 4.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0] + [0.1] * 5 + [2.0] * 5
             + [1.4, 1.3, 1.2, 1.1, 1.1] + [1.0] * 5)
    _feed(trial, lambda a, i: times[i], _OtherRank(ALONE, 10))
    assert trial.medians == (1.0, 2.0) and trial.pick == "a"


def test_a_gain_within_the_margin_keeps_the_pick():
    trial = online.Trial(("a", "b"), rounds=10)
    ran = _feed(trial, lambda a, i: {"a": 1.0, "b": 1.0 - SWITCH_MARGIN / 2}[a], _OtherRank(ALONE, 10))
    assert trial.pick == "a" and len(ran) == 20


def test_clearly_faster_needs_the_margin_and_a_sure_test():
    assert online.clearly_faster([1.0, 1.1, 1.2, 1.0, 1.1], [2.0, 2.1, 2.2, 2.0, 2.1])
    assert not online.clearly_faster([1.0, 1.1, 1.2], [2.0, 2.1, 2.2])  # three calls cannot be sure
    assert not online.clearly_faster([1.0] * 9, [1.0 / (1 - SWITCH_MARGIN / 2)] * 9)  # within the margin
    spread = [1.0, 1.1, 1.2, 1.3, 1.4] * 3
    # medians 8 % apart, the calls spread over 40 %: 15 calls each cannot tell
    assert not online.clearly_faster([x / 1.08 for x in spread], spread)
    # the same with 60 calls each can; so can 15 calls 25 % apart
    assert online.clearly_faster([x / 1.08 for x in spread * 4], spread * 4)
    assert online.clearly_faster([x / 1.25 for x in spread], spread)
    # one slow call among five is enough doubt
    assert not online.clearly_faster([1.0, 1.0, 9.0, 1.0, 1.0], [2.0] * 5)


def test_trial_for_starts_once_per_key_and_keeps_a_bounded_number():
    class State:
        def __init__(self) -> None:
            self.trials: dict = {}

    st = State()
    asked: list = []

    def make(c):
        asked.append(c)
        return c

    one = online.trial_for(st, "k1", make((("a", 1e-3), ("b", 1e-3))))
    assert one is not None and one.contenders == ("a", "b")
    assert online.trial_for(st, "k1", make(())) is one
    assert online.trial_for(st, "k2", make((("a", 1e-3),))) is None  # nothing else close: nothing to try
    slow = online.TRIAL_BUDGET / online.MIN_ROUNDS / 2  # a trial of two would take 3 turns of twice that
    assert online.trial_for(st, "slow", make((("a", slow), ("b", slow)))) is None
    assert online.trial_for(st, "ok", make((("a", slow / 2), ("b", slow / 2)))) is not None
    assert online.trial_for(st, "k2", make((("a", 1e-3), ("b", 1e-3)))) is None  # decided once per key
    for i in range(online.TRIALS_KEPT):
        online.trial_for(st, ("many", i), make((("a", 1e-3), ("b", 1e-3))))
    # full: nothing is dropped (a rank repeating a result while another tried again would deadlock),
    # and a new size runs the table's pick untried
    assert len(st.trials) == online.TRIALS_KEPT and online.trial_for(st, "k1", make(())) is one
    assert online.trial_for(st, "new", make((("a", 1e-3), ("b", 1e-3)))) is None
    assert len(st.trials) == online.TRIALS_KEPT
