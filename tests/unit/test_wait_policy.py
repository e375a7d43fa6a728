"""``$SWING_MPI_WAIT`` and ``$SWING_MPI_SLEEP_US``: the values the executor accepts, and clear errors otherwise."""

from __future__ import annotations

import pytest

from swing_mpi import executor as ex


@pytest.mark.parametrize(("env", "mode"), [({}, "yield"), ({"SWING_MPI_WAIT": ""}, "yield"),
                                           ({"SWING_MPI_WAIT": "yield"}, "yield"),
                                           ({"SWING_MPI_WAIT": "spin"}, "spin")])
def test_wait_policy(env, mode):
    assert ex.wait_policy(env) == mode


@pytest.mark.parametrize("value", ["poll", "Spin", "sleep", "0"])
def test_unknown_wait_policy_names_the_allowed_ones(value):
    with pytest.raises(ValueError, match=f"SWING_MPI_WAIT='{value}': expected one of yield, spin"):
        ex.wait_policy({"SWING_MPI_WAIT": value})


@pytest.mark.parametrize(("text", "seconds"), [(None, 0.0), ("", 0.0), ("0", 0.0), ("1000", 1e-3), (" 250 ", 250e-6)])
def test_sleep_us(text, seconds):
    assert ex.parse_sleep(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "1ms", "x"])
def test_bad_sleep_us(text):
    with pytest.raises(ValueError, match="SWING_MPI_SLEEP_US=.*expected microseconds >= 0"):
        ex.parse_sleep(text)
