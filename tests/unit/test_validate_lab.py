"""benchmarks/validate_lab.py simulates each point at the rate of the lab sweep it came from."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import validate_lab  # noqa: E402


def test_default_lab_sets_ran_at_40_mbit():
    for shape, dirs in validate_lab.LAB_SETS.items():
        assert {validate_lab.sweep_rate_bps(d) for d in dirs} == {40e6}, shape


def test_a_lab_sweep_at_another_rate_is_read_as_such():
    assert validate_lab.sweep_rate_bps("scale/lab-8x8-20M/1M") == 20e6
    assert validate_lab.sweep_rate_bps("scale/lab-8x8-20M/large") == 20e6
    assert validate_lab.sweep_rate_bps("scale/lab-8x8-packets/10M-mtu9000") == 10e6


def test_by_shape_counts_each_shape_and_skips_failed_points():
    rows = [{"shape": "4x4", "ratio": 1.0, "within": True}, {"shape": "8x8", "ratio": 0.5, "within": False},
            {"shape": "4x4", "ratio": 1.3, "within": False}, {"shape": "8x8", "ratio": None, "within": False},
            {"shape": "8x8", "ratio": 0.9, "within": True}]
    assert validate_lab.by_shape(rows) == "4x4 1 of 2, 8x8 1 of 2"


def test_each_point_carries_the_rate_of_the_sweep_it_came_from():
    mixed = ("scale/lab-sync/8x8-10M-1M-burst16", "scale/lab-sync/8x8-20M-4M")
    got = validate_lab.lab_medians(mixed, (1 << 20, 4 << 20))
    assert {rate for _, src, rate in got.values() if "10M-1M" in src} == {10e6}
    assert {rate for _, src, rate in got.values() if "20M-4M" in src} == {20e6}
    assert {n for _, n in got} == {1 << 20, 4 << 20}
