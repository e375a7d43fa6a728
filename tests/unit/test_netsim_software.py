"""The engine preset's software model (threads, segments, overlap) and the costs file's new keys; no SimGrid."""

from __future__ import annotations

import json

import numpy as np
import pytest

from swing_mpi.config import rc
from swing_mpi.engine_costs import parse_engine_costs
from swing_mpi.netsim import SimParams
from swing_mpi.netsim.software import (
    SPLIT_BYTES,
    engine_preset,
    exposed_reduction,
    gamma_table,
    gamma_threads,
    reduction_seconds,
)

MIB = 1 << 20
PROBE = {"alpha_s": 0.35e-6, "alpha_1lane_s": 0.6e-6, "alpha_lane_s": 0.27e-6, "mpi_step_s": 0.5e-6,
         "gamma_s_per_byte": 0.06e-9, "c_gamma_s_per_byte": 0.05e-9, "step_s": 1.4e-6, "lanes": 4,
         "lanes_together": True, "gamma_threads_s_per_byte": {"1": 0.062e-9, "2": 0.046e-9},
         "gamma_pair_s_per_byte": 0.08e-9, "c_gamma_pair_s_per_byte": 0.07e-9, "overlap": 0.8,
         "segment_bytes": MIB, "engine": "c"}


def test_gamma_threads_measured_then_extrapolated():
    m = {1: 0.062e-9, 2: 0.046e-9}
    assert gamma_threads(m, 1) == 0.062e-9 and gamma_threads(m, 2) == 0.046e-9
    e = 0.062 / 0.046 - 1  # the 2-thread efficiency
    assert gamma_threads(m, 4) == pytest.approx(0.062e-9 / (1 + 3 * e))
    assert gamma_threads(m, 16) == pytest.approx(0.062e-9 / (1 + 15 * e))
    # the largest measured count below T sets the efficiency; a measured T is used as is
    m4 = {1: 1.0, 2: 0.6, 4: 0.5}
    assert gamma_threads(m4, 4) == 0.5
    assert gamma_threads(m4, 8) == pytest.approx(1.0 / (1 + 7 * ((1 / 0.5 - 1) / 3)))
    # efficiency clipped to 0..1: slower with 2 threads gives no gain, superlinear no more than linear
    assert gamma_threads({1: 1.0, 2: 1.5}, 8) == 1.0
    assert gamma_threads({1: 1.0, 2: 0.25}, 8) == pytest.approx(1 / 8)
    # nothing measured beyond one thread: no gain; the one-thread cost may come from gamma_1
    assert gamma_threads({}, 16, gamma_1=2.0) == 2.0
    assert gamma_table(m, 3) == (gamma_threads(m, 1), gamma_threads(m, 2), gamma_threads(m, 3))
    with pytest.raises(ValueError):
        gamma_threads({}, 2)
    with pytest.raises(ValueError):
        gamma_threads(m, 0)


def test_exposed_reduction():
    g = 1e-10
    # one thread, or no segments: all of it after the data is in
    assert exposed_reduction(8 * MIB, g, MIB, 1, 1.0) == pytest.approx(g * 8 * MIB)
    assert exposed_reduction(8 * MIB, g, 0, 4, 1.0) == pytest.approx(g * 8 * MIB)
    # threads: the last segment, plus what the transfer did not hide
    assert exposed_reduction(8 * MIB, g, MIB, 4, 1.0) == pytest.approx(g * MIB)
    assert exposed_reduction(8 * MIB, g, MIB, 4, 0.0) == pytest.approx(g * 8 * MIB)
    half = g * 7 * MIB / 2
    assert exposed_reduction(8 * MIB, g, MIB, 4, half) == pytest.approx(g * MIB + half)
    # a step within one segment: nothing to overlap
    assert exposed_reduction(MIB // 2, g, MIB, 4, 1.0) == pytest.approx(g * MIB / 2)
    assert exposed_reduction(0, g, MIB, 4, 1.0) == 0.0
    assert exposed_reduction(8 * MIB, g, MIB, 4, 1.0, gamma_last_s_per_byte=2 * g) == pytest.approx(2 * g * MIB)


def test_reduction_seconds_splits_as_the_engine():
    gam = (4.0, 2.0, 1.5, 1.0)  # s/B on 1..4 threads (made up, to read the thread count back)
    n = np.array([100.0, SPLIT_BYTES, 2 * SPLIT_BYTES, 3 * MIB])
    early, last = reduction_seconds(n, gam, MIB)
    assert early.tolist() == [0.0, 0.0, 0.0, 2 * MIB * 1.0]  # segments but the last, on all 4 threads
    assert last.tolist() == [100 * 4.0, SPLIT_BYTES * 4.0, 2 * SPLIT_BYTES * 2.0, MIB * 1.0]
    early, last = reduction_seconds(n, gam, 0)  # no segments: all after the data, split by size
    assert early.tolist() == [0.0] * 4 and last[-1] == 3 * MIB * 1.0
    early, last = reduction_seconds(n, (4.0,), MIB)  # one thread: the old model
    assert early.tolist() == [0.0] * 4 and last.tolist() == (n * 4.0).tolist()


def test_costs_file_new_keys_and_validation():
    c = parse_engine_costs(PROBE)
    assert c.lanes_together and c.lanes == 4 and c.step_s == 1.4e-6 and c.engine == "c"
    assert c.gamma_threads_s_per_byte == ((1, 0.062e-9), (2, 0.046e-9))
    assert c.overlap == 0.8 and c.segment_bytes == MIB and c.c_gamma_pair_s_per_byte == 0.07e-9
    old = parse_engine_costs({"alpha_s": 3e-5, "gamma_s_per_byte": 2e-10})
    assert not old.lanes_together and old.gamma_threads_s_per_byte == () and old.overlap is None
    assert parse_engine_costs({**PROBE, "overlap": None}).overlap is None
    for bad in ({"lanes": 0}, {"lanes": 2.5}, {"lanes_together": "yes"}, {"overlap": 1.5},
                {"gamma_threads_s_per_byte": {"0": 1e-10}}, {"gamma_threads_s_per_byte": {"two": 1e-10}},
                {"gamma_threads_s_per_byte": {"2": -1}}, {"gamma_threads_s_per_byte": [1e-10]},
                {"step_s": "fast"}, {"step_s": float("inf")}, {"segment_bytes": -1}, {"engine": "rust"}):
        with pytest.raises(ValueError):
            parse_engine_costs({**PROBE, **bad})


def test_engine_preset_from_costs():
    c = parse_engine_costs(PROBE)
    one = engine_preset(c, 1)
    assert one == {"alpha_s": 0.35e-6, "gamma_s_per_byte": 0.062e-9, "cpu": "lockstep", "threads": 1,
                   "gamma_threads": (0.062e-9,), "segment_bytes": MIB}
    sixteen = engine_preset(c, 16)
    assert sixteen["threads"] == 16 and len(sixteen["gamma_threads"]) == 16  # type: ignore[arg-type]
    assert sixteen["gamma_s_per_byte"] == pytest.approx(gamma_threads({1: 0.062e-9, 2: 0.046e-9}, 16))
    # the interpreted executor's costs: the old model, and no threads to give it
    old = parse_engine_costs({"alpha_s": 3e-5, "gamma_s_per_byte": 2e-10})
    assert engine_preset(old, 1) == {"alpha_s": 3e-5, "gamma_s_per_byte": 2e-10, "cpu": "rank"}
    with pytest.raises(ValueError, match="lanes_together"):
        engine_preset(old, 4)


def test_simparams_preset_and_validation(tmp_path, monkeypatch):
    (tmp_path / "e.json").write_text(json.dumps(PROBE))
    monkeypatch.setattr(rc, "engine_costs", str(tmp_path / "e.json"))
    p = SimParams.preset("engine", cores=4)
    assert p.cpu == "lockstep" and p.threads == 4 and p.segment_bytes == MIB and len(p.gammas) == 4
    assert SimParams.preset("engine").threads == 1
    c = SimParams.preset("c")
    assert (c.alpha_s, c.gamma_s_per_byte, c.cpu, c.threads, c.segment_bytes) == (1.5e-6, 0.0, "lane", 1, 0)
    assert c.gammas == (0.0,)
    with pytest.raises(ValueError, match="engine preset"):
        SimParams.preset("c", cores=4)
    for bad in ({"threads": 0}, {"threads": True}, {"segment_bytes": -1},
                {"threads": 2, "gamma_threads": (1e-10,)}, {"gamma_threads": (float("nan"),)}):
        with pytest.raises(ValueError):
            SimParams(**bad)  # type: ignore[arg-type]
    assert SimParams(threads=2, gamma_s_per_byte=1e-10).gammas == (1e-10, 1e-10)


def test_cli_cores_and_gamma_c(tmp_path, monkeypatch):
    import argparse

    from swing_mpi.netsim.cli import _params, add_arguments

    (tmp_path / "e.json").write_text(json.dumps(PROBE))
    monkeypatch.setattr(rc, "engine_costs", str(tmp_path / "e.json"))
    parser = add_arguments(argparse.ArgumentParser())
    p = _params(parser.parse_args(["--alpha", "engine", "--cores", "16"]))
    assert p.threads == 16 and p.cpu == "lockstep"
    p = _params(parser.parse_args(["--alpha", "c", "--gamma", "c"]))
    assert p.gamma_s_per_byte == 0.05e-9 and p.threads == 1 and p.cpu == "lane"
    p = _params(parser.parse_args(["--alpha", "engine", "--cores", "2", "--gamma", "1e-10"]))
    assert p.gammas == (1e-10, 1e-10)
    p = _params(parser.parse_args(["--alpha", "engine", "--cores", "4", "--segment", "0"]))
    assert p.segment_bytes == 0 and p.threads == 4
    assert _params(parser.parse_args(["--alpha", "engine", "--segment", "256K"])).segment_bytes == 256 << 10
    for argv in (["--alpha", "c", "--cores", "4"], ["--alpha", "engine", "--cores", "0"], ["--gamma", "fast"],
                 ["--alpha", "c", "--segment", "1M"]):
        with pytest.raises(ValueError):
            _params(parser.parse_args(argv))
