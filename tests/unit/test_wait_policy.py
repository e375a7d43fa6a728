"""The wait policies: ``$SWING_MPI_WAIT`` and ``$SWING_MPI_SLEEP_US`` parsed, the machine's default, the idle steps."""

from __future__ import annotations

import pytest

from swing_mpi import config
from swing_mpi import waiting as wt


@pytest.mark.parametrize(("text", "mode"), [(None, None), ("", None), ("auto", None), ("yield", "yield"),
                                            ("spin", "spin"), ("backoff", "backoff")])
def test_wait_policy(text, mode):
    assert config.parse_wait(text) == mode
    env = {} if text is None else {"SWING_MPI_WAIT": text}
    assert config.Config(env).wait == mode


@pytest.mark.parametrize("value", ["poll", "Spin", "sleep", "0"])
def test_unknown_wait_policy_names_the_allowed_ones(value):
    with pytest.raises(ValueError, match=f"SWING_MPI_WAIT='{value}': expected one of auto, yield, spin, backoff"):
        config.Config({"SWING_MPI_WAIT": value})


@pytest.mark.parametrize(("text", "us"), [(None, 0.0), ("", 0.0), ("0", 0.0), ("1000", 1000.0), (" 250 ", 250.0)])
def test_sleep_us(text, us):
    assert config.parse_sleep_us(text) == pytest.approx(us)


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "1ms", "x"])
def test_bad_sleep_us(text):
    with pytest.raises(ValueError, match="SWING_MPI_SLEEP_US=.*expected microseconds >= 0"):
        config.parse_sleep_us(text)


@pytest.mark.parametrize(("ranks", "cores", "mode"), [(1, 1, "spin"), (2, 2, "spin"), (2, 16, "spin"),
                                                      (3, 2, "backoff"), (4, 2, "backoff"), (64, 2, "backoff"),
                                                      (16, 16, "spin"), (17, 16, "backoff"), (2, 0, "backoff")])
def test_machine_rule_backs_off_only_where_a_node_has_more_ranks_than_cores(ranks, cores, mode):
    assert wt.machine_policy(ranks, cores) == mode
    # ranks that share memory yield instead of sleeping: MPI moves their bytes with their own CPUs
    assert wt.machine_policy(ranks, cores, True) == ("spin" if mode == "spin" else "yield")


def test_a_set_policy_wins_over_the_machine_rule(monkeypatch):
    class NoComm:  # node_policy must not communicate when the variable decides
        def __getattr__(self, name):
            raise AssertionError("no node agreement when $SWING_MPI_WAIT is set")

    for mode in config.WAITS:
        monkeypatch.setattr(config.rc, "wait", mode)
        assert wt.node_policy(NoComm()) == mode  # type: ignore[arg-type]
    monkeypatch.setattr(config.rc, "wait", None)
    assert wt.default_policy() == "yield"


class _Clock:
    """A fake ``time``: ``sleep`` advances ``monotonic`` and is recorded."""

    def __init__(self):
        self.now, self.sleeps = 100.0, []

    def monotonic(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


def _idle_polls(monkeypatch, wait, polls, sleep_us=0.0):
    clock, yields = _Clock(), []
    monkeypatch.setattr(config.rc, "sleep_us", sleep_us)
    monkeypatch.setattr(wt, "time", clock)
    monkeypatch.setattr(wt.os, "sched_yield", lambda: yields.append(clock.now))
    idle = wt.Idle(wait)
    for _ in range(polls):
        idle()
    return clock.sleeps, yields


def test_backoff_yields_first_then_sleeps_growing_within_bounds(monkeypatch):
    sleeps, yields = _idle_polls(monkeypatch, "backoff", 60)
    assert len(yields) == wt.BACKOFF_SPINS
    assert len(sleeps) == 60 - wt.BACKOFF_SPINS
    assert sleeps[0] == pytest.approx(wt.BACKOFF_MIN)
    assert all(wt.BACKOFF_MIN <= s <= wt.BACKOFF_MAX for s in sleeps)
    assert sleeps == sorted(sleeps)  # never shorter than the one before
    assert sleeps[-1] == pytest.approx(wt.BACKOFF_MAX)  # 60 polls wait long enough to reach the cap
    waited = 0.0
    for s in sleeps:  # each sleep is at most BACKOFF_FRACTION of what was slept before it (or the floor)
        assert s <= max(wt.BACKOFF_MIN, wt.BACKOFF_FRACTION * waited) + 1e-12
        waited += s


def test_yield_policy_never_sleeps_unless_told(monkeypatch):
    sleeps, yields = _idle_polls(monkeypatch, "yield", 20)
    assert (sleeps, len(yields)) == ([], 20)
    sleeps, yields = _idle_polls(monkeypatch, "yield", 20, sleep_us=300.0)
    assert (sleeps, len(yields)) == ([pytest.approx(3e-4)] * 18, 2)


class _Comm:
    """A communicator of ``hosts`` (one processor name and CPU list per rank) seen from rank ``me``.

    ``shared``: ``"none"`` (MPI told to use no shared memory: a shared-memory group of one, as in the lab)
    or ``"host"`` (a host's ranks share memory). ``splits`` counts the shared-memory splits asked for.
    """

    def __init__(self, hosts, me, shared):
        self.hosts, self.me, self.shared, self.splits = hosts, me, shared, 0

    def Get_size(self):  # noqa: N802
        return len(self.hosts)

    def allgather(self, mine):
        return [mine if r == self.me else h for r, h in enumerate(self.hosts)]

    def Split_type(self, kind):  # noqa: N802
        assert kind == wt.MPI.COMM_TYPE_SHARED
        self.splits += 1
        return _Group(1 if self.shared == "none" else sum(h[0] == self.hosts[self.me][0] for h in self.hosts))


class _Group:
    def __init__(self, size):
        self.size = size

    def Get_size(self):  # noqa: N802
        return self.size

    def Free(self):  # noqa: N802
        pass


def _policies(monkeypatch, hosts, shared="none", splits=None):
    """Each rank's policy (``splits``: a list that gets each rank's count of shared-memory splits)."""
    monkeypatch.setattr(config.rc, "wait", None)
    got = []
    for me, (name, cores) in enumerate(hosts):
        monkeypatch.setattr(wt.MPI, "Get_processor_name", lambda name=name: name)
        monkeypatch.setattr(wt, "_my_cores", lambda cores=cores: cores)
        comm = _Comm(hosts, me, shared)
        got.append(wt.node_policy(comm))
        if splits is not None:
            splits.append(comm.splits)
    return got


def test_crowded_ranks_that_share_memory_yield_and_the_others_back_off(monkeypatch):
    hosts = [("a", [0, 1])] * 4 + [("b", [0, 1, 2, 3])] * 2
    splits = []
    assert _policies(monkeypatch, hosts, "host", splits) == ["yield"] * 4 + ["spin"] * 2
    assert splits == [1] * 6  # every rank asks, the uncrowded host too (a collective)
    splits.clear()
    assert _policies(monkeypatch, [("a", [0, 1, 2, 3])] * 2 + [("b", [0])], "host", splits) == ["spin"] * 3
    assert splits == [0] * 3  # no host crowded: no split


def test_node_policy_counts_the_ranks_of_each_host_against_its_cores(monkeypatch):
    # 4 ranks on a 2-core host back off; 2 ranks on a 4-core host spin; each host decides for itself
    hosts = [("a", [0, 1])] * 4 + [("b", [0, 1, 2, 3])] * 2
    assert _policies(monkeypatch, hosts) == ["backoff"] * 4 + ["spin"] * 2


def test_ranks_bound_one_to_a_core_count_every_core_of_their_host(monkeypatch):
    assert _policies(monkeypatch, [("a", [r]) for r in range(4)]) == ["spin"] * 4
    assert _policies(monkeypatch, [("a", [0])] * 3) == ["backoff"] * 3  # all bound to one core
