"""``$SWING_MPI_WAIT`` and ``$SWING_MPI_SLEEP_US``: the values the executor accepts, and clear errors otherwise."""

from __future__ import annotations

import pytest

from swing_mpi import executor as ex


@pytest.mark.parametrize(("env", "mode"), [({}, "yield"), ({"SWING_MPI_WAIT": ""}, "yield"),
                                           ({"SWING_MPI_WAIT": "yield"}, "yield"),
                                           ({"SWING_MPI_WAIT": "spin"}, "spin"),
                                           ({"SWING_MPI_WAIT": "backoff"}, "backoff")])
def test_wait_policy(env, mode):
    assert ex.wait_policy(env) == mode


@pytest.mark.parametrize("value", ["poll", "Spin", "sleep", "0"])
def test_unknown_wait_policy_names_the_allowed_ones(value):
    with pytest.raises(ValueError, match=f"SWING_MPI_WAIT='{value}': expected one of yield, spin, backoff"):
        ex.wait_policy({"SWING_MPI_WAIT": value})


@pytest.mark.parametrize(("text", "seconds"), [(None, 0.0), ("", 0.0), ("0", 0.0), ("1000", 1e-3), (" 250 ", 250e-6)])
def test_sleep_us(text, seconds):
    assert ex.parse_sleep(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "1ms", "x"])
def test_bad_sleep_us(text):
    with pytest.raises(ValueError, match="SWING_MPI_SLEEP_US=.*expected microseconds >= 0"):
        ex.parse_sleep(text)


class _Clock:
    """A fake ``time``: ``sleep`` advances ``monotonic`` and is recorded."""

    def __init__(self):
        self.now, self.sleeps = 100.0, []

    def monotonic(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


def _idle_polls(monkeypatch, wait, polls, sleep_s=0.0):
    clock, yields = _Clock(), []
    monkeypatch.setattr(ex, "_WAIT", wait)
    monkeypatch.setattr(ex, "_SLEEP", sleep_s)
    monkeypatch.setattr(ex, "time", clock)
    monkeypatch.setattr(ex.os, "sched_yield", lambda: yields.append(clock.now))
    idle = ex._Idle()
    for _ in range(polls):
        idle()
    return clock.sleeps, yields


def test_backoff_yields_first_then_sleeps_growing_within_bounds(monkeypatch):
    sleeps, yields = _idle_polls(monkeypatch, "backoff", 60)
    assert len(yields) == ex.BACKOFF_SPINS
    assert len(sleeps) == 60 - ex.BACKOFF_SPINS
    assert sleeps[0] == pytest.approx(ex.BACKOFF_MIN)
    assert all(ex.BACKOFF_MIN <= s <= ex.BACKOFF_MAX for s in sleeps)
    assert sleeps == sorted(sleeps)  # never shorter than the one before
    assert sleeps[-1] == pytest.approx(ex.BACKOFF_MAX)  # 60 polls wait long enough to reach the cap
    waited = 0.0
    for s in sleeps:  # each sleep is at most BACKOFF_FRACTION of what was slept before it (or the floor)
        assert s <= max(ex.BACKOFF_MIN, ex.BACKOFF_FRACTION * waited) + 1e-12
        waited += s


def test_yield_policy_never_sleeps_unless_told(monkeypatch):
    sleeps, yields = _idle_polls(monkeypatch, "yield", 20)
    assert (sleeps, len(yields)) == ([], 20)
    sleeps, yields = _idle_polls(monkeypatch, "yield", 20, sleep_s=3e-4)
    assert (sleeps, len(yields)) == ([3e-4] * 18, 2)


def test_waits_sleeping_follows_the_policy(monkeypatch):
    for mode, sleeping in (("yield", False), ("spin", False), ("backoff", True)):
        monkeypatch.setattr(ex, "_WAIT", mode)
        assert ex.waits_sleeping() is sleeping
