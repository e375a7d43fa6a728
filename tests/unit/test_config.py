"""``swing_mpi.rc``: every ``SWING_MPI_*`` variable parsed and checked in one place."""

from __future__ import annotations

import pytest

from swing_mpi import config
from swing_mpi.config import Config


def test_defaults_without_variables():
    c = Config({})
    assert (c.algorithm, c.dims, c.check, c.timeout, c.wait, c.sleep_us, c.datatypes, c.tuning, c.network,
            c.trial, c.model_cache, c.engine_costs, c.simgrid_contexts) == (None, None, False, None, None, 0.0, True,
                                                                            None, None, True, None, None, None)


def test_every_variable_has_an_attribute():
    assert set(config.VARIABLES.values()) == set(Config.__annotations__) - {"_problems"}
    assert len(config.VARIABLES) == 18


def test_values_are_typed():
    c = Config({"SWING_MPI_ALGORITHM": "swing-bw", "SWING_MPI_DIMS": "4x4", "SWING_MPI_CHECK": "1",
                "SWING_MPI_TIMEOUT": "2.5", "SWING_MPI_WAIT": "backoff", "SWING_MPI_SLEEP_US": "50",
                "SWING_MPI_DATATYPES": "0", "SWING_MPI_TUNING": "default", "SWING_MPI_NETWORK": "Torus",
                "SWING_MPI_TRIAL": "off", "SWING_MPI_MODEL_CACHE": "OFF", "SWING_MPI_ENGINE_COSTS": "/e.json",
                "SWING_MPI_SIMGRID_CONTEXTS": "Thread"})
    assert (c.algorithm, c.dims, c.check, c.timeout, c.wait, c.sleep_us, c.datatypes, c.tuning, c.network,
            c.trial, c.model_cache, c.engine_costs, c.simgrid_contexts) == (
        "swing-bw", "4x4", True, 2.5, "backoff", 50.0, False, "default", "torus", False, "off", "/e.json", "thread")
    with pytest.raises(ValueError, match="SWING_MPI_SIMGRID_CONTEXTS"):
        Config({"SWING_MPI_SIMGRID_CONTEXTS": "fibers"})


def test_engine_settings():
    c = Config({})
    assert (c.engine, c.threads, c.segment) == ("auto", None, config.DEFAULT_SEGMENT)
    c = Config({"SWING_MPI_ENGINE": "Python", "SWING_MPI_THREADS": "3", "SWING_MPI_SEGMENT": "64K"})
    assert (c.engine, c.threads, c.segment) == ("python", 3, 65536)
    assert Config({"SWING_MPI_THREADS": "auto", "SWING_MPI_SEGMENT": "0"}).segment == 0
    for var, text in (("SWING_MPI_ENGINE", "fortran"), ("SWING_MPI_THREADS", "0"), ("SWING_MPI_THREADS", "two"),
                      ("SWING_MPI_SEGMENT", "100"), ("SWING_MPI_SEGMENT", "lots")):
        with pytest.raises(ValueError, match=var):
            Config({var: text})


@pytest.mark.parametrize(("text", "seconds"), [("", None), ("0", None), ("off", None), ("30", 30.0), ("0.5", 0.5)])
def test_timeout(text, seconds):
    assert Config({"SWING_MPI_TIMEOUT": text}).timeout == seconds


@pytest.mark.parametrize(("var", "text", "message"), [
    ("SWING_MPI_TIMEOUT", "soon", "SWING_MPI_TIMEOUT='soon': expected seconds"),
    ("SWING_MPI_TIMEOUT", "-3", "expected a positive number of seconds"),
    ("SWING_MPI_CHECK", "maybe", r"\$SWING_MPI_CHECK='maybe' is not understood"),
    ("SWING_MPI_DATATYPES", "2", r"\$SWING_MPI_DATATYPES='2' is not understood"),
    ("SWING_MPI_WAIT", "poll", "SWING_MPI_WAIT='poll'"),
    ("SWING_MPI_SLEEP_US", "-1", "SWING_MPI_SLEEP_US='-1'"),
])
def test_a_bad_value_is_an_error_naming_the_variable(var, text, message):
    with pytest.raises(ValueError, match=message):
        Config({var: text})


@pytest.mark.parametrize(("var", "attr", "text"), [("SWING_MPI_NETWORK", "network", "mesh"),
                                                   ("SWING_MPI_TRIAL", "trial", "sometimes")])
def test_rank_zeros_variables_raise_where_used(var, attr, text):
    c = Config({var: text})  # not at import: only rank 0's value counts, and it is shared from there
    assert var in (c.problem(attr) or "")
    with pytest.raises(ValueError, match=var):
        c.checked(attr)
    setattr(c, attr, None if attr == "network" else True)
    assert c.problem(attr) is None


def test_setting_an_attribute_checks_it_like_the_variable():
    c = Config({})
    c.timeout = 3
    c(wait="spin", dims="2x2")
    assert (c.timeout, c.wait, c.dims) == (3.0, "spin", "2x2")
    c.timeout = "off"
    assert c.timeout is None
    with pytest.raises(ValueError, match="SWING_MPI_WAIT"):
        c.wait = "sometimes"
    with pytest.raises(TypeError):
        c.check = 2.5  # type: ignore[assignment]
    with pytest.raises(AttributeError, match="no setting"):
        c.timout = 3  # type: ignore[attr-defined]


def test_reload_reads_the_environment_again(monkeypatch):
    monkeypatch.setenv("SWING_MPI_TIMEOUT", "7")
    c = Config()
    assert c.timeout == 7.0
    monkeypatch.delenv("SWING_MPI_TIMEOUT")
    c.reload()
    assert c.timeout is None


def test_node_settings():
    c = Config({})
    assert (c.ranks_per_node, c.node_chunk) == (None, config.DEFAULT_NODE_CHUNK)
    c = Config({"SWING_MPI_RANKS_PER_NODE": "4", "SWING_MPI_NODE_CHUNK": "1M"})
    assert (c.ranks_per_node, c.node_chunk) == (4, 1 << 20)
    assert Config({"SWING_MPI_RANKS_PER_NODE": "auto", "SWING_MPI_NODE_CHUNK": "0"}).node_chunk == 0
    c.ranks_per_node = 2
    c.node_chunk = 64
    assert (c.ranks_per_node, c.node_chunk) == (2, 64)
    for var, text in (("SWING_MPI_RANKS_PER_NODE", "0"), ("SWING_MPI_RANKS_PER_NODE", "two"),
                      ("SWING_MPI_NODE_CHUNK", "lots"), ("SWING_MPI_NODE_CHUNK", "-1")):
        with pytest.raises(ValueError, match=var):
            Config({var: text})
