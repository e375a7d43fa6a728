"""The engine-cost probe: its synthetic schedules are valid, and the cost file is found where documented."""

import json
from pathlib import Path

import numpy as np
import pytest

from swing_mpi.config import rc
from swing_mpi.probe import DEFAULT_ENGINE, chain_schedules, load_engine_costs
from swing_mpi.simulate import simulate


@pytest.mark.parametrize("steps,lanes", [(1, 1), (5, 1), (3, 4)])
def test_chain_schedules_are_valid_allreduces(steps, lanes):
    scheds = chain_schedules(steps, lanes=lanes)
    assert [s.nsteps for s in scheds] == [steps, steps]
    assert all(len(s.lanes) == lanes for s in scheds)
    inputs = [np.arange(lanes, dtype=np.float64) + 1, np.full(lanes, 10.0)]
    out = simulate(scheds, inputs)
    # each step sums the two ranks' copies: after k steps the value is 2^(k-1) * (a + b)
    want = (inputs[0] + inputs[1]) * 2 ** (steps - 1)
    for o in out:
        np.testing.assert_array_equal(o, want)


def test_load_engine_costs_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setattr(rc, "engine_costs", None)
    assert load_engine_costs() == DEFAULT_ENGINE
    default = tmp_path / "cfg" / "swing_mpi" / "engine_costs.json"
    default.parent.mkdir(parents=True)
    default.write_text(json.dumps({"alpha_s": 1e-5, "gamma_s_per_byte": 2e-10}))
    c = load_engine_costs()
    assert (c.alpha_s, c.gamma_s_per_byte, c.alpha_lane_s, c.source) == (1e-5, 2e-10, None, str(default))
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"alpha_s": 3e-5, "gamma_s_per_byte": 0, "alpha_lane_s": 1e-6}))
    monkeypatch.setattr(rc, "engine_costs", str(env))  # $SWING_MPI_ENGINE_COSTS
    assert load_engine_costs().alpha_s == 3e-5
    assert load_engine_costs(default).alpha_s == 1e-5


def test_load_engine_costs_rejects_bad_files(tmp_path, monkeypatch):
    monkeypatch.setattr(rc, "engine_costs", None)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"alpha_s": -1, "gamma_s_per_byte": 0}))
    with pytest.raises(ValueError):
        load_engine_costs(bad)
    with pytest.raises(ValueError):
        load_engine_costs(tmp_path / "missing.json")
    monkeypatch.setattr(rc, "engine_costs", str(tmp_path / "missing.json"))  # $SWING_MPI_ENGINE_COSTS
    with pytest.raises(ValueError):
        load_engine_costs()


def test_committed_probe_matches_built_in_default():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "engine" / "sim" / "probe.json"
    data = json.loads(path.read_text())
    assert data["alpha_s"] == pytest.approx(DEFAULT_ENGINE.alpha_s, rel=0.05)
    assert data["gamma_s_per_byte"] == pytest.approx(DEFAULT_ENGINE.gamma_s_per_byte, rel=0.05)
    from swing_mpi.engine_costs import parse_engine_costs

    c = parse_engine_costs(data)
    assert c.lanes_together == DEFAULT_ENGINE.lanes_together and c.lanes == DEFAULT_ENGINE.lanes
    assert c.step_s == pytest.approx(DEFAULT_ENGINE.step_s, rel=0.05)
    assert c.c_gamma_s_per_byte == pytest.approx(DEFAULT_ENGINE.c_gamma_s_per_byte, rel=0.05)
    assert dict(c.gamma_threads_s_per_byte) == pytest.approx(dict(DEFAULT_ENGINE.gamma_threads_s_per_byte), rel=0.05)
    assert c.segment_bytes == DEFAULT_ENGINE.segment_bytes and c.overlap == DEFAULT_ENGINE.overlap


def test_trace_summary_splits_reductions_at_the_last_message():
    """Reductions before the last message are under the wire; the part of one that runs past it is not."""
    from swing_mpi.probe import _trace_summary

    events = [(0.0, 0, 0, -1, 4), (1.0, 1, 0, 0, 0), (1.0, 2, 0, 0, 8), (1.5, 3, 0, 0, 8),  # under the wire
              (2.0, 1, 0, 0, 1), (2.5, 2, 0, 0, 8), (3.0, 1, 0, 0, 2),  # a reduction from 2.5 runs past 3.0
              (3.25, 3, 0, 0, 8), (3.5, 4, 1, -1, 0)]
    s = _trace_summary(events)
    assert s["trace_reduce_s"] == 0.5 + 0.75
    assert s["trace_reduce_after_wire_s"] == 0.25
    assert s["trace_tail_s"] == 0.5
    assert s["trace_hidden"] == 1 - 0.25 / 1.25
    # two parts on worker threads, interleaved: each end pairs with the earliest open start
    par = [(0.0, 2, 0, 0, 8), (0.1, 2, 0, 0, 8), (1.0, 3, 0, 0, 8), (1.2, 3, 0, 0, 8), (1.1, 1, 0, 0, 0),
           (1.3, 4, 1, -1, 0)]
    s = _trace_summary(par)
    assert abs(s["trace_reduce_s"] - 2.1) < 1e-12 and abs(s["trace_reduce_after_wire_s"] - 0.1) < 1e-12
    assert _trace_summary([])["trace_hidden"] == 0.0
    assert _trace_summary([])["trace_copies_ahead"] == 0
    assert _trace_summary(par + [(1.25, 5, 0, 0, 8), (1.26, 5, 0, 0, 8)])["trace_copies_ahead"] == 2


def test_medians_keep_a_turns_first_call_apart(monkeypatch):
    """Turns of several calls: the first of each (right after another function's turn) is reported apart."""
    from types import SimpleNamespace

    from swing_mpi import probe

    clock, last = [0.0], [""]
    monkeypatch.setattr(probe, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    def fn(name: str) -> object:
        def call() -> None:
            clock[0] += 4.0 if last[0] != name else 1.0  # slow right after the other function
            last[0] = name
        return call

    assert probe._medians([fn("a"), fn("b")], 5, streak=3) == ([1.0, 1.0], [4.0, 4.0])
    assert probe._medians([fn("a"), fn("b")], 5) == ([4.0, 4.0], [4.0, 4.0])  # one call a turn: each after the other
