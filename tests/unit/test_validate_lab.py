"""benchmarks/validate_lab.py simulates each point at the rate of the lab sweep it came from."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import validate_lab  # noqa: E402


def test_default_lab_sets_ran_at_40_mbit():
    for shape, dirs in validate_lab.LAB_SETS.items():
        assert {validate_lab.sweep_rate_bps(d) for d in dirs} == {40e6}, shape


def _sweep(root: Path, folder: str, rate_mbit: float, rows: list[tuple[str, int, float]]) -> str:
    """Write a stored lab sweep (results.json's env, results.csv's medians) under root; return its folder."""
    d = root / folder
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({"env": {"sweep": {"lab": True, "rate_mbit": rate_mbit}}}))
    lines = ["label,size,time_median_us"] + [f"{label},{size},{us}" for label, size, us in rows]
    (d / "results.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_a_lab_sweep_at_another_rate_is_read_as_such(tmp_path, monkeypatch):
    monkeypatch.setattr(validate_lab, "RESULTS", tmp_path)
    assert validate_lab.sweep_rate_bps(_sweep(tmp_path, "lab-20M", 20, [])) == 20e6
    assert validate_lab.sweep_rate_bps(_sweep(tmp_path, "lab-10M", 10, [])) == 10e6


def test_a_sweep_not_measured_in_a_lab_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(validate_lab, "RESULTS", tmp_path)
    (tmp_path / "shm").mkdir()
    (tmp_path / "shm" / "results.json").write_text(json.dumps({"env": {"sweep": {"lab": False}}}))
    with pytest.raises(ValueError):
        validate_lab.sweep_rate_bps("shm")


def test_by_shape_counts_each_shape_and_skips_failed_points():
    rows = [{"shape": "4x4", "ratio": 1.0, "within": True}, {"shape": "8x8", "ratio": 0.5, "within": False},
            {"shape": "4x4", "ratio": 1.3, "within": False}, {"shape": "8x8", "ratio": None, "within": False},
            {"shape": "8x8", "ratio": 0.9, "within": True}]
    assert validate_lab.by_shape(rows) == "4x4 1 of 2, 8x8 1 of 2"


def test_each_point_carries_the_rate_of_the_sweep_it_came_from(tmp_path, monkeypatch):
    monkeypatch.setattr(validate_lab, "RESULTS", tmp_path)
    monkeypatch.setattr(validate_lab, "ROOT", tmp_path)
    mib = 1 << 20
    mixed = (_sweep(tmp_path, "8x8-10M-1M", 10, [("swing-bw", mib, 500000.0), ("native", mib, 1.0)]),
             _sweep(tmp_path, "8x8-20M-4M", 20, [("swing-bw", mib, 1.0), ("swing-bw", 4 * mib, 250000.0)]))
    got = validate_lab.lab_medians(mixed, (mib, 4 * mib))
    assert set(got) == {("swing-bw", mib), ("swing-bw", 4 * mib)}  # ours only; the first folder wins
    assert got[("swing-bw", mib)] == (0.5, "8x8-10M-1M/results.csv", 10e6)
    assert got[("swing-bw", 4 * mib)] == (0.25, "8x8-20M-4M/results.csv", 20e6)
