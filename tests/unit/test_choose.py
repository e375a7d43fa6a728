"""``auto``'s decision (swing_mpi.choose), its cost features (swing_mpi.model.features) and tuning files."""

from __future__ import annotations

import json
import math
import sys
import types
import warnings
from dataclasses import replace

import pytest

from swing_mpi import choose as chooser
from swing_mpi.choose import candidates, choose, choose_collective, explain
from swing_mpi.config import rc
from swing_mpi.model.features import NETWORKS, coefficients, lower_bound, probe_counts
from swing_mpi.schedule import ALGORITHMS, HALVES, NATIVE, AlgorithmInfo
from swing_mpi.tuning import (
    DEFAULT_TUNING,
    DecisionTable,
    TuningError,
    load_tuning,
    save_tuning,
    tuning_for_comm,
    tuning_from_dict,
)

MODEL = replace(DEFAULT_TUNING, native_below_bytes=None)
"""The default constants without the hand-off of tiny vectors to MPI: the model's own choices."""
SHAPES = [(4,), (2, 2), (4, 4), (3, 4), (6,), (2, 2, 4), (5, 3)]
SIZES = [8 << (2 * i) for i in range(12)]  # 8 B … 32 MiB


def _pick(dims, nbytes, *, exact=False, tuning=MODEL, commutative=True, native_ok=True):
    return choose(math.prod(dims), dims, max(1, nbytes // 8), 8, exact=exact, commutative=commutative,
                  native_ok=native_ok, tuning=tuning)


def _table(dims=(4, 4), exact=False, sizes=(1024, 4096), **times):
    return DecisionTable(p=math.prod(dims), dims=dims, exact=exact, sizes=sizes,
                         times=tuple((k.replace("_", "-"), tuple(v)) for k, v in times.items()))


@pytest.fixture(autouse=True)
def _model_cache(monkeypatch, tmp_path_factory):
    """Keep the model's disk cache of these tests out of the user's ~/.cache."""
    monkeypatch.setenv("SWING_MPI_MODEL_CACHE", str(tmp_path_factory.getbasetemp() / "model-cache"))
    rc.reload()


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SWING_MPI_TUNING", raising=False)
    rc.reload()
    monkeypatch.delenv("SWING_MPI_NETWORK", raising=False)
    rc.reload()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


# -- candidates -------------------------------------------------------------------------

@pytest.mark.parametrize("dims", SHAPES)
def test_candidates_are_every_registered_algorithm_plus_native(dims):
    for exact in (True, False):
        assert candidates(dims, exact=exact, commutative=True) == tuple(ALGORITHMS) + (NATIVE,)
    assert candidates(dims, exact=True, commutative=True, native_ok=False) == tuple(ALGORITHMS)
    order_keeping = tuple(a for a, i in ALGORITHMS.items() if not i.commutative_only)
    assert order_keeping and candidates(dims, exact=False, commutative=False, native_ok=False) == order_keeping


def test_collective_candidates_are_the_ones_marked_for_it():
    halves = tuple(a for a, i in ALGORITHMS.items() if set(HALVES) <= set(i.collectives))
    assert halves
    for coll in ("reduce_scatter", "allgather"):
        assert candidates((4, 4), exact=False, commutative=True, collective=coll) == halves + (NATIVE,)
    with pytest.raises(ValueError, match="collective must be one of"):
        candidates((4, 4), exact=False, commutative=True, collective="bcast")


def _fake_builder_module(monkeypatch):
    from swing_mpi.schedule.ring import build_ring

    def build_even_only(rank, dims, count, *, algorithm):
        if math.prod(dims) % 2:
            raise ValueError("even rank counts only")
        return build_ring(rank, dims, count, algorithm=algorithm)

    mod = types.ModuleType("c2_fake_schedules")
    mod.build_even_only = build_even_only  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "c2_fake_schedules", mod)


def test_a_new_registry_entry_becomes_a_candidate(monkeypatch):
    """Nothing in the chooser names algorithms: a new entry is priced, measured and picked like the others."""
    _fake_builder_module(monkeypatch)
    monkeypatch.setitem(ALGORITHMS, "evenring", AlgorithmInfo("evenring", "c2_fake_schedules:build_even_only",
                                                              True, "bandwidth", "a ring on even p only"))
    chooser.cache_clear()
    try:
        assert "evenring" in candidates((4, 4), exact=False, commutative=True)
        assert "evenring" not in candidates((5, 3), exact=False, commutative=True)  # its builder refuses 15
        assert _pick((5, 3), 1 << 20) != "evenring"
        fast = _table(swing_bw=(1e-3, 4e-3), evenring=(9e-4, 1e-3), native=(5e-3, 9e-3))
        t = replace(MODEL, tables=(fast,))
        assert _pick((4, 4), 2048, tuning=t) == "evenring"
        assert coefficients("evenring", (4, 4), exact=False, network="torus").moved == pytest.approx(
            coefficients("ring", (4, 4), exact=False, network="torus").moved)
    finally:
        chooser.cache_clear()


# -- measured tables ------------------------------------------------------------------------

def test_interpolation_is_log_log_between_sizes():
    t = _table(sizes=(1024, 4096, 16384), swing_bw=(1e-3, 4e-3, None), ring=(2e-3, 2e-3, 8e-3))
    got, how = t.time("swing-bw", 2048)
    assert got == pytest.approx(2e-3) and "interpolated between 1024 B and 4096 B" in how
    assert t.time("ring", 8192)[0] == pytest.approx(4e-3)
    sqrt = _table(sizes=(1024, 4096), ring=(1e-3, 2e-3))  # t ~ n^0.5: log-log gives 2^0.5, linear would give 4/3
    assert sqrt.time("ring", 2048)[0] == pytest.approx(1e-3 * 2 ** 0.5)
    assert t.time("swing-bw", 4096) == (4e-3, "measured at 4096 B")
    assert t.time("swing-bw", 8) == (1e-3, "measured at 1024 B")  # below the grid: the smallest size's time
    assert t.time("swing-bw", 8192)[0] is None  # not measured at 16 KiB: it had lost
    assert t.time("ring", 65536)[0] == pytest.approx(8e-3 * 4)  # above: the last segment's slope (1)
    flat = _table(sizes=(1024, 4096), ring=(2e-3, 1e-3))
    assert flat.time("ring", 1 << 20)[0] == pytest.approx(1e-3)  # a falling slope is clamped to 0
    assert t.time("bucket", 2048) == (None, "not in the table")


def test_measured_table_decides_with_a_crossover():
    """A fast at small sizes, B at large: auto switches where the interpolated curves cross."""
    t = replace(MODEL, tables=(_table(sizes=(1024, 16384), recdoub=(1e-4, 1.6e-3), ring=(4e-4, 4e-4 * 4)),))
    # recdoub: t = 1e-4 (n/1024); ring: t = 4e-4 (n/1024)^0.5 -> equal at n/1024 = 16 -> from 16 KiB ring
    assert _pick((4, 4), 1024, tuning=t) == "recdoub"
    assert _pick((4, 4), 15 * 1024, tuning=t) == "recdoub"
    assert _pick((4, 4), 17 * 1024, tuning=t) == "ring"
    d = explain(16, (4, 4), 8192, exact=False, tuning=t)
    assert d.pick == "recdoub" and d.source == "measured"
    assert {e.algorithm: e.source for e in d.estimates}["ring"] == "measured"


def test_native_in_the_table_only_where_its_result_is_bit_identical():
    t = replace(MODEL, tables=(_table(sizes=(8, 1024), native=(1e-6, 2e-6), ring=(1e-4, 1e-4)),))
    assert _pick((4, 4), 8, tuning=t) == NATIVE
    assert _pick((4, 4), 8, tuning=t, native_ok=False) == "ring"


def test_ours_must_beat_native_clearly_in_a_table():
    close = 1e-3 * (1 - chooser.NATIVE_MARGIN / 2)
    clear = 1e-3 * (1 - 2 * chooser.NATIVE_MARGIN)
    t = replace(MODEL, tables=(_table(sizes=(8, 1024), native=(1e-3, 1e-3), ring=(close, clear)),))
    assert _pick((4, 4), 8, tuning=t) == NATIVE
    assert _pick((4, 4), 1024, tuning=t) == "ring"


def test_a_table_for_other_calls_is_not_used():
    """Another p, dims or op class: the model decides, with no error."""
    t = replace(MODEL, tables=(_table(dims=(4, 4), sizes=(8, 1 << 24), bucket=(1e-9, 2e-9)),))
    assert _pick((4, 4), 1 << 20, tuning=t) == "bucket"
    for dims, exact in (((2, 8), False), ((16,), False), ((4, 4), True), ((2, 4), False)):
        assert _pick(dims, 1 << 20, exact=exact, tuning=t) == _pick(dims, 1 << 20, exact=exact, tuning=MODEL)
        assert explain(math.prod(dims), dims, 1 << 20, exact=exact, tuning=t).source == "model"


def test_table_round_trip(clean_env):
    t = replace(MODEL, network="torus", tables=(
        _table(sizes=(8, 64, 1024), swing_bw=(3e-5, 3.5e-5, None), native=(1e-5, 2e-5, 9e-5)),
        _table(exact=True, sizes=(8, 64, 1024), swing_lat=(2e-5, 2e-5, 3e-5))))
    path = save_tuning(t, clean_env / "t.json", extra={"notes": ["kept"]})
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["network"] == "torus" and data["notes"] == ["kept"]
    assert data["tables"][0]["times_s"]["swing-bw"] == [3e-5, 3.5e-5, None]
    back = load_tuning(path)
    assert back == t and back.tables == t.tables and back.source == str(path)
    assert back.table_for(16, (4, 4), exact=True, commutative=True) == t.tables[1]
    assert back.table_for(16, (4, 4), exact=True, commutative=False) is None


# -- the model ------------------------------------------------------------------------------

@pytest.mark.parametrize("dims", [(4, 4), (3, 4), (8,), (2,), (5,), (2, 2), (2, 2, 2), (6, 4), (2, 4), (3, 3, 2)])
@pytest.mark.parametrize("part", ["allreduce", "reduce_scatter", "allgather"])
def test_lower_bound_never_above_routed_cost(dims, part):
    for a in ALGORITHMS:
        if part != "allreduce" and part not in ALGORITHMS[a].collectives:
            continue
        for exact in (True, False):
            lb = lower_bound(a, dims, exact=exact, part=part)
            c = coefficients(a, dims, exact=exact, network="torus", part=part)
            assert lb.steps <= c.steps and lb.moved <= c.moved + 1e-12 and lb.reduced == c.reduced, a


def test_lower_bound_counts_every_byte_a_rank_sends():
    """A lane count does not make a lower bound: bytes a rank sends all cross its links.

    On 2x2 hamiltonian's four lanes of small messages cannot look cheaper than swing-bw's two lanes of
    larger ones: both send as much through a rank's two links (a side of 2 is one link).
    """
    ham = lower_bound("hamiltonian", (2, 2), exact=False, part="reduce_scatter")
    assert ham.moved == pytest.approx(coefficients("hamiltonian", (2, 2), exact=False, network="torus",
                                                   part="reduce_scatter").moved)
    assert choose_collective("reduce_scatter", 4, (2, 2), 16 << 20, exact=False, commutative=True,
                             tuning=replace(MODEL, network="torus")) == "swing-bw"


def test_torus_model_sees_link_sharing_flat_does_not():
    """XOR peers at distance 2^s share links on a torus; Swing's do less (the paper's point)."""
    sw = {n: coefficients("swing-bw", (8, 8), exact=False, network=n) for n in NETWORKS}
    xor = {n: coefficients("recdoub-mirrored", (8, 8), exact=False, network=n) for n in NETWORKS}
    assert sw["flat"].moved == pytest.approx(xor["flat"].moved)
    assert xor["torus"].moved > 1.2 * sw["torus"].moved
    t = replace(MODEL, network="torus", alpha=1e-9)
    assert _pick((8, 8), 1 << 26, tuning=t) in ("swing-bw", "bucket")


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("dims", [(4, 4), (3, 4), (2, 2, 4), (12,)])
def test_model_pick_is_the_cheapest_candidate(network, dims):
    t = replace(MODEL, network=network)
    for n in SIZES:
        for exact in (True, False):
            pick = _pick(dims, n, exact=exact, tuning=t)
            cost = {a: coefficients(a, dims, exact=exact, network=network).time(n, t.alpha, t.beta, t.gamma)
                    for a in ALGORITHMS}
            best = min(cost.values())
            slack = chooser.MODEL_RESOLUTION if network == "torus" else 0.0
            assert cost[pick] * (1 - slack) <= best * (1 + 1e-12), (n, pick, cost)


def test_costs_scale_linearly_and_sizes_are_o1():
    dims = (8, 8)
    t = replace(MODEL, network="torus")
    _pick(dims, 1 << 20, tuning=t)
    misses = probe_counts.cache_info().misses
    for n in range(1000, 1 << 26, 977_000):
        _pick(dims, n, tuning=t)
    assert probe_counts.cache_info().misses == misses  # no schedule read again for new sizes
    c = coefficients("swing-bw", dims, exact=False, network="torus")
    assert c.time(2e6, 1e-6, 1e-9, 1e-10) - c.time(1e6, 1e-6, 1e-9, 1e-10) == pytest.approx(
        1e6 * (c.moved * 1e-9 + c.reduced * 1e-10))


def test_coefficients_come_back_from_the_disk_cache(monkeypatch, tmp_path):
    from swing_mpi.model import features

    monkeypatch.setenv("SWING_MPI_MODEL_CACHE", str(tmp_path))
    rc.reload()
    features.clear_caches()
    want = {n: coefficients("bucket", (2, 6), exact=False, network=n) for n in NETWORKS}
    path = features.cache_file()
    assert path is not None and path.parent == tmp_path and path.is_file()
    features.clear_caches()

    def no_schedules(*args, **kwargs):
        raise AssertionError("read from the disk cache, not rebuilt")

    monkeypatch.setattr(features, "build_schedule", no_schedules)
    assert {n: coefficients("bucket", (2, 6), exact=False, network=n) for n in NETWORKS} == want
    features.clear_caches()
    path.write_text("{not json")  # a broken cache is ignored and rebuilt
    monkeypatch.undo()
    monkeypatch.setenv("SWING_MPI_MODEL_CACHE", str(tmp_path))
    rc.reload()
    assert coefficients("bucket", (2, 6), exact=False, network="torus") == want["torus"]
    monkeypatch.setenv("SWING_MPI_MODEL_CACHE", "off")
    rc.reload()
    assert features.cache_file() is None
    features.clear_caches()
    assert coefficients("bucket", (2, 6), exact=False, network="flat") == want["flat"]


def test_halves_cost_less_than_the_allreduce():
    for a in ("swing-bw", "ring", "bucket"):
        whole = coefficients(a, (4, 4), exact=False, network="torus")
        rs = coefficients(a, (4, 4), exact=False, network="torus", part="reduce_scatter")
        ag = coefficients(a, (4, 4), exact=False, network="torus", part="allgather")
        assert rs.moved + ag.moved == pytest.approx(whole.moved)
        assert rs.steps + ag.steps == whole.steps and ag.reduced == 0 and rs.reduced == whole.reduced
    got = choose_collective("reduce_scatter", 16, (4, 4), 1 << 20, exact=False, commutative=True, tuning=MODEL)
    assert got in candidates((4, 4), exact=False, commutative=True, collective="reduce_scatter")


def test_noncommutative_never_runs_a_commutative_only_algorithm():
    for dims in SHAPES:
        for n in (8, 1 << 20):
            got = _pick(dims, n, commutative=False, native_ok=False)
            assert not ALGORITHMS[got].commutative_only


def test_native_below_threshold_only_without_a_table():
    t = replace(MODEL, native_below_bytes=2048)
    assert _pick((4, 4), 1024, tuning=t) == NATIVE
    assert _pick((4, 4), 1024, tuning=t, native_ok=False) != NATIVE
    assert _pick((4, 4), 4096, tuning=t) != NATIVE


def test_choice_depends_only_on_its_arguments():
    import numpy as np

    for network in NETWORKS:
        t = replace(MODEL, network=network)
        a = [_pick(d, n, tuning=t) for d in SHAPES for n in SIZES]
        chooser.cache_clear()
        assert a == [_pick(d, n, tuning=replace(t, source="elsewhere")) for d in SHAPES for n in SIZES]
    assert choose(16, [4, 4], 1024, 8, exact=True, commutative=True) == \
        choose(np.int64(16), (np.int64(4), 4), np.int64(1024), 8, exact=np.bool_(True), commutative=1)
    with pytest.raises(ValueError, match="hold 16 ranks, not 8"):
        choose(8, (4, 4), 10, 8, exact=True, commutative=True)


def test_first_decision_on_a_large_torus_is_quick():
    import time

    t0 = time.perf_counter()
    _pick((32, 32), 1 << 20, tuning=replace(MODEL, network="flat"))
    assert time.perf_counter() - t0 < 30  # generous: the machine may be shared; the report gives 64x64


# -- tuning files and the network kind ----------------------------------------------------------

def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_defaults_without_files(clean_env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_tuning() is DEFAULT_TUNING
    assert DEFAULT_TUNING.network == "auto" and DEFAULT_TUNING.tables == ()


def test_network_from_file_and_version_1(clean_env):
    assert load_tuning(_write(clean_env / "a.json", {"alpha": 1e-5, "beta": 1e-9, "gamma": 0,
                                                     "network": "torus"})).network == "torus"
    v1 = {"version": 1, "alpha": 1e-5, "beta": 2e-10, "gamma": 0}
    assert load_tuning(_write(clean_env / "b.json", dict(v1, concurrent_lanes=False))).network == "flat"
    assert load_tuning(_write(clean_env / "c.json", v1)).network == "torus"


def test_network_env_override(clean_env, monkeypatch):
    p = _write(clean_env / "t.json", {"alpha": 1e-5, "beta": 1e-9, "gamma": 0, "network": "flat"})
    monkeypatch.setenv("SWING_MPI_NETWORK", "torus")
    rc.reload()
    assert load_tuning(p).network == "torus"
    assert load_tuning().network == "torus"
    assert "SWING_MPI_NETWORK" in load_tuning().source
    monkeypatch.setenv("SWING_MPI_NETWORK", "dragonfly")
    rc.reload()
    with pytest.raises(ValueError, match="expected one of: torus, flat"):
        load_tuning()


class _FakeComm:
    def __init__(self, size, rank, root_value=None):
        self.size, self.rank, self.root_value = size, rank, root_value

    def Get_size(self):  # noqa: N802
        return self.size

    def Get_rank(self):  # noqa: N802
        return self.rank

    def bcast(self, value, root=0):
        return value if self.rank == root else self.root_value


def test_tuning_for_comm_bad_network_fails_on_every_rank(clean_env, monkeypatch):
    monkeypatch.setenv("SWING_MPI_NETWORK", "mesh")
    rc.reload()
    with pytest.raises(ValueError, match="torus, flat"):
        tuning_for_comm(_FakeComm(2, 0))
    msg = "$SWING_MPI_NETWORK='mesh' is not a network kind; expected one of: torus, flat"
    monkeypatch.setenv("SWING_MPI_NETWORK", "torus")  # a non-root rank's own environment does not count
    rc.reload()
    with pytest.raises(ValueError, match="torus, flat"):
        tuning_for_comm(_FakeComm(2, 1, root_value=msg))
    assert tuning_for_comm(_FakeComm(2, 1, root_value=MODEL)) is MODEL


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ([1, 2, 3], "expected a JSON object"),
    ({"alpha": 1e-6, "beta": 1e-9}, "missing gamma"),
    ({"alpha": -1e-6, "beta": 1e-9, "gamma": 0}, "alpha must be a finite number >= 0"),
    ({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "native_below_bytes": 1.5}, "native_below_bytes"),
    ({"version": 99, "alpha": 1e-6, "beta": 1e-9, "gamma": 0}, "version 99"),
    ({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "network": "ring"}, "network must be one of"),
    ({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "tables": [{"p": 4}]}, "table misses"),
    ({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "tables": [{"p": 4, "dims": [4], "exact": False, "sizes": [8, 8],
                                                           "times_s": {}}]}, "increasing"),
    ({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "tables": [{"p": 4, "dims": [2, 2], "exact": False, "sizes": [8],
                                                           "times_s": {"ring": [1, 2]}}]}, "2 values for 1 sizes"),
])
def test_broken_files_warn_and_give_the_defaults(clean_env, monkeypatch, content, message):
    """An explicit path raises TuningError; the same file found implicitly warns and gives the defaults."""
    p = _write(clean_env / "bad.json", content)
    with pytest.raises(TuningError, match=message):
        load_tuning(p)
    monkeypatch.setenv("SWING_MPI_TUNING", str(p))
    rc.reload()
    with pytest.warns(RuntimeWarning, match="SWING_MPI_TUNING"):
        assert load_tuning() is DEFAULT_TUNING
    monkeypatch.delenv("SWING_MPI_TUNING")
    rc.reload()
    _write(clean_env / "config" / "swing_mpi" / "tuning.json", content)
    with pytest.warns(RuntimeWarning, match="config file"):
        assert load_tuning() is DEFAULT_TUNING
    with pytest.warns(RuntimeWarning):
        assert tuning_for_comm(_FakeComm(1, 0)) is DEFAULT_TUNING


def test_tuning_from_dict_ignores_unknown_keys():
    t = tuning_from_dict({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "measured": [1], "host": "x"}, source="s")
    assert t.alpha == 1e-6 and t.source == "s"


# -- swing-mpi choose ---------------------------------------------------------------------------

def test_choose_command_json(clean_env, capsys):
    from swing_mpi.cli import main

    t = replace(MODEL, tables=(_table(dims=(3, 4), sizes=(1 << 20, 1 << 23), bucket=(1e-2, 8e-2),
                                      ring=(2e-2, 9e-2), native=(3e-2, 3e-1)),))
    path = save_tuning(t, clean_env / "t.json")
    assert main(["choose", "--dims", "3x4", "--size", "4MiB", "--tuning", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pick"] == "bucket" and out["decided_by"] == "measured" and out["nbytes"] == 4 << 20
    by = {c["algorithm"]: c for c in out["candidates"]}
    assert set(by) == set(candidates((3, 4), exact=False, commutative=True))
    assert by["bucket"]["seconds"] == pytest.approx(1e-2 * 4) and "interpolated" in by["bucket"]["detail"]
    assert main(["choose", "--dims", "4x4", "--size", "4MiB", "--tuning", str(path)]) == 0
    text = capsys.readouterr().out  # nothing measured the network: a 2-D torus is priced as one
    assert "decided by model" in text and "network torus" in text and "routed link loads" in text
    assert main(["choose", "--dims", "4x4", "--size", "4M", "--tuning", str(path), "--network", "flat"]) == 0
    text = capsys.readouterr().out
    assert "routed" not in text and "no link sharing" in text


def test_choose_command_errors(clean_env, capsys, monkeypatch):
    from swing_mpi.cli import main

    assert main(["choose", "--dims", "3x4", "--size", "lots"]) == 2
    assert "cannot parse size" in capsys.readouterr().err
    assert main(["choose", "--dims", "3x4", "--size", "7", "--dtype", "float64"]) == 2
    assert "not a whole number of float64 elements" in capsys.readouterr().err
    monkeypatch.setenv("SWING_MPI_NETWORK", "fat-tree")
    rc.reload()
    assert main(["choose", "--dims", "3x4", "--size", "4M"]) == 2
    assert "expected one of: torus, flat" in capsys.readouterr().err


def test_calibrate_stops_measuring_only_a_candidate_falling_further_behind_or_far_behind_at_large_sizes():
    from swing_mpi.calibrate import beaten

    assert not beaten(None, (10.0, 1.0, 1 << 20))
    k64, k256 = 64 << 10, 256 << 10
    assert beaten((3.5, 1e-3, k64), (5.0, 4e-3, k256))  # behind, further behind, past its latency floor
    assert not beaten((3.5, 1e-3, k64), (5.0, 1.7e-3, k256))  # its time grows slower than the size: a per-step cost
    assert not beaten((5.0, 1e-3, k64), (4.0, 4e-3, k256))  # catching up (a bandwidth algorithm at growing n)
    assert not beaten((1.5, 1e-3, k64), (5.0, 4e-3, k256))  # one size behind is not enough
    assert not beaten((3.5, 1e-3, 16), (5.0, 4e-3, 64))  # tiny sizes never drop (below drop_from)
    assert beaten((3.5, 1e-3, 16), (5.0, 4e-3, 64), drop_from=64)
    # from 1 MiB on, drop times slower at two sizes in a row is enough, closing or not (swing-lat, MPICH 4x4:
    # 6.5x at 1 MiB, 4.0x at 4 MiB on a time that grew 2.96x, then 11 s a call at 16 MiB)
    m1, m4 = 1 << 20, 4 << 20
    assert beaten((6.5, 42.9e-3, m1), (4.0, 126.9e-3, m4))
    assert not beaten((6.5, 42.9e-3, k256), (4.0, 126.9e-3, m1))  # below 1 MiB the closing rule still holds
    assert not beaten((6.5, 42.9e-3, m1), (2.9, 126.9e-3, m4))  # under drop at the second size
    assert not beaten((2.9, 42.9e-3, m1), (4.0, 126.9e-3, m4))  # ... or at the first


def test_calibrate_narrows_the_contenders_to_the_leaders_rivals():
    from swing_mpi.calibrate import narrowed

    samples = [[80.0, 82.0, 84.0], [90.0, 91.0, 95.0], [79.0, 88.0, 90.0], [100.0, 101.0], [85.0]]
    # 1: every sample slower than the leader's median (82): out; 2: one sample under it: stays;
    # 3 and 4 are judged only from three samples on
    assert narrowed([0, 1, 2, 3, 4], samples) == [0, 2, 3, 4]
    assert narrowed([1, 3], samples) == [1, 3]  # 1 leads (median 91); 3 has two samples
    assert narrowed([0, 1], samples) == [0]
    assert narrowed([1], samples) == [1] and narrowed([], samples) == []
    assert narrowed([0, 1], samples, least=4) == [0, 1]
    tied = [[5.0, 5.0, 5.0], [5.0, 5.0, 5.0]]
    assert narrowed([0, 1], tied) == [0, 1]  # equal is not slower


def test_one_slow_call_does_not_keep_a_candidate_out_of_the_race():
    from swing_mpi.calibrate import race_basis, race_groups, to_confirm

    # Open MPI, 16 ranks, 16 MiB, one round each (ms): swing-bw-1port's one call was slow
    samples = [[76.5], [150.4], [98.0], [189.6], [90.0]]
    assert to_confirm([[0, 1, 2, 3, 4]], samples) == [1, 2]  # within 2x, not within 25 %; 4 already races
    assert to_confirm([[0, 1, 2, 3, 4]], samples, within=1.5) == [2]
    assert to_confirm([[0, 1], [2, 3]], samples) == [1, 3]  # each table has its own leader
    samples[1].append(64.0)  # its second call: the fastest of all
    samples[2].append(99.0)
    basis = race_basis(samples)
    assert basis[:3] == [76.5, 64.0, 98.0]  # the best of fewer than three calls, else the median
    assert race_basis([[5.0, 1.0, 3.0, 4.0]]) == [3.5] and race_basis([[]]) == [float("inf")]
    assert race_groups([[0, 1, 2, 3, 4]], basis) == [[0, 1]]  # 76.5 is within 25 % of 64; 90 is not
    assert to_confirm([[0, 1, 2, 3, 4]], samples) == [4]  # timed once, 1.41x the new leader: once more
    assert to_confirm([[0, 1]], [[10.0, 10.0], [30.0]]) == []  # over 2x: beaten, not unlucky


def test_calibrate_round_starts_every_call_from_a_barrier_settling_ones_too(monkeypatch):
    # settling calls back to back (ranks presumably skewed) slowed the timed call after them by an amount
    # that depends on the algorithm (Open MPI, 16 ranks, 16 MiB: ours 78 -> 88 ms, MPI_Allreduce 85 -> 87)
    from swing_mpi.calibrate import timed_round

    monkeypatch.delenv("SWING_MPI_WAIT", raising=False)
    log: list[str] = []

    class OneRank:
        def Barrier(self):  # noqa: N802
            log.append("|")

        def Allreduce(self, *args, **kwargs):  # noqa: N802
            pass

    calls = [lambda c=c: log.append(c) for c in "abc"]
    samples: list[list[float]] = [[], [], []]
    spent = timed_round(OneRank(), calls, [2, 0, 1], samples, [2, 0, 1])  # settle: a 2, b none, c 1
    assert "".join(log) == "|c|c" + "|a|a|a" + "|b"
    assert [len(x) for x in samples] == [1, 1, 1] and spent >= sum(x[0] for x in samples)


def test_contenders_race_within_each_decision_table():
    from swing_mpi.calibrate import race_groups, series_for, table_groups

    run = series_for((8, 8))
    names = [s.name for s in run]
    inexact, exact = table_groups(run)
    assert [names[j] for j in inexact] == [s.name for s in run if s.dtype == "float64"]
    # the exact table: every int64 series, and the float64 series of algorithms without one (native among them)
    assert {names[j] for j in exact} == ({s.name for s in run if s.exact}
                                        | {s.name for s in run if not s.exact
                                           and f"{s.algorithm}/int64" not in names})
    assert "native/float64" in {names[j] for j in exact} and "swing-lat/float64" not in {names[j] for j in exact}
    assert table_groups([s for s in run if not s.exact]) == [inexact]

    # the 8x8 lab at 64 KiB (ms): swing-lat's exact form led by far, which left the float64 race unrun
    ms = {"swing-lat/int64": 57.0, "rabenseifner/float64": 82.0, "recdoub/float64": 85.9, "native/float64": 107.9,
          "swing-bw-1port/float64": 94.4, "swing-lat/float64": 1492.3}
    first = [ms.get(n, 500.0) for n in names]
    f_race, e_race = race_groups([inexact, exact], first)
    assert {names[j] for j in f_race} == {"rabenseifner/float64", "recdoub/float64", "swing-bw-1port/float64"}
    assert {names[j] for j in e_race} == {"swing-lat/int64"}  # alone: no rounds needed there
    assert {names[j] for j in race_groups([inexact, exact], first, close=1.35)[0]} >= {"native/float64"}


@pytest.mark.parametrize("network", NETWORKS)
def test_fit_recovers_the_constants_and_the_network_kind(network):
    """Times made by one network's model are fitted exactly by it, and better than by the other kind."""
    from swing_mpi.model.fit import fit_constants

    dims, alpha, beta, gamma, c0 = (4, 4), 20e-6, 2e-9, 1e-10, 50e-6
    pts = []
    for a in ("swing-bw", "recdoub-mirrored", "ring", "recdoub", "bucket"):
        for n in SIZES:
            c = coefficients(a, dims, exact=False, network=network)
            pts.append((a, False, n, c0 + c.time(n, alpha, beta, gamma)))
    f = fit_constants(pts, dims, gamma=gamma)
    assert f.network == network and f.rms[network] < 1e-6 < max(f.rms.values())
    assert f.alpha == pytest.approx(alpha, rel=1e-6) and f.beta == pytest.approx(beta, rel=1e-6)
    assert f.overhead == pytest.approx(c0, rel=1e-6)
    other = next(n for n in NETWORKS if n != network)
    assert fit_constants(pts, dims, gamma=gamma, network=other).network == other


def test_unmeasured_network_is_decided_by_the_calls_dims(clean_env):
    from swing_mpi.tuning import network_for

    assert network_for(DEFAULT_TUNING, (3, 4)) == "torus"
    assert network_for(DEFAULT_TUNING, (4, 4, 4)) == "torus"
    assert network_for(DEFAULT_TUNING, (16,)) == "flat"
    assert network_for(DEFAULT_TUNING, (1, 16)) == "flat"
    measured = replace(DEFAULT_TUNING, network="flat")
    assert network_for(measured, (4, 4)) == "flat"
    # on a declared torus the uncalibrated chooser uses all ports, not one
    pick = choose(12, (3, 4), 4 << 20 >> 3, 8, exact=False, commutative=True, tuning=DEFAULT_TUNING)
    assert pick != "swing-bw-1port" and pick in chooser.algorithm_names()


LAB_3X4_ALGORITHMS = ("swing-bw", "swing-bw-1port", "swing-lat", "recdoub", "rabenseifner", "recdoub-mirrored",
                      "ring", "bucket", "hamiltonian")
LAB_3X4_US = {  # medians from `swing-mpi calibrate` in the 3x4 lab (40 Mbit/s links), float64 SUM; None: not measured
    64 << 10: (6655.2, 7926.5, 66437.3, 25803.0, 15364.7, 29883.6, 23113.7, 7627.3, 13942.7),
    256 << 10: (26199.0, 34134.5, 440082.7, 162303.6, 117657.3, 118010.2, 94424.2, 25535.7, 24656.2),
    1 << 20: (77156.4, 176555.5, None, None, 633528.3, None, None, 104026.5, 96177.2),
    4 << 20: (420989.0, 1282795.6, None, None, None, None, None, 403160.6, 383619.6),
    16 << 20: (1898938.8, 6028281.4, None, None, None, None, None, 1922515.1, 1531689.4),
}


def test_network_kind_is_the_one_whose_model_picks_best():
    """Measured on a 3x4 torus: the flat fit has the smaller error but would pick one port (3-4x slower)."""
    from swing_mpi.model.fit import fit_constants

    pts = [(a, False, n, t * 1e-6) for n, row in LAB_3X4_US.items()
           for a, t in zip(LAB_3X4_ALGORITHMS, row) if t is not None]
    f = fit_constants(pts, (3, 4), gamma=0.0874e-9)
    assert f.rms["flat"] < f.rms["torus"]
    assert f.network == "torus" and f.regret["torus"] < f.regret["flat"]


def test_choose_command_lists_a_candidate_too_large_to_route(clean_env, capsys, monkeypatch):
    """A candidate the model cannot route on these dims is listed, unpriced, as auto leaves it out (no abort)."""
    from swing_mpi.cli import main
    from swing_mpi.model import features

    real = features.coefficients

    def refuse_ring(a, dims, **kw):
        if a == "swing-bw" and kw.get("network") == "torus":  # the model's first pick here
            raise ValueError("no symmetry found on 4x4: too many rank-steps")
        return real(a, dims, **kw)

    monkeypatch.setattr(chooser, "coefficients", refuse_ring)
    assert main(["choose", "--dims", "4x4", "--size", "16MiB", "--json", "--network", "torus"]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {c["algorithm"]: c for c in out["candidates"]}
    assert by["swing-bw"]["seconds"] is None and "not priced" in by["swing-bw"]["detail"]
    assert out["pick"] != "swing-bw" and by[out["pick"]]["seconds"] > 0  # the next best was routed instead
    assert main(["choose", "--dims", "4x4", "--size", "16MiB", "--network", "torus"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("swing-bw ")]
    assert len(line) == 1 and "too many rank-steps" in line[0]


def test_choose_command_decides_a_noncommutative_reduce_scatter_as_the_api_does(clean_env, capsys):
    """Each rank gets its own block, so MPI's own collective is fine: the API runs it, the command says so."""
    import json

    from swing_mpi.cli import main

    for collective in ("reduce_scatter", "allgather"):
        assert main(["choose", "--dims", "4", "--size", "8", "--noncommutative", "--collective", collective,
                     "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["native_ok"] is True, got
    assert main(["choose", "--dims", "4", "--size", "8", "--noncommutative", "--collective", "reduce_scatter",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pick"] == "native"


# -- auto's form on a torus of nodes (choose.node_form) --------------------------------------------------

def test_node_form_hands_small_vectors_to_mpi_over_all_ranks():
    t = chooser.Tuning(alpha=10e-6, beta=1e-9, gamma=0.05e-9, native_below_bytes=1024)
    d = chooser.node_form((2, 2), 4, 512, 8, 1, exact=False, tuning=t)
    assert (d.algorithm, d.why, d.contenders) == ("flat", "rule", ())
    d = chooser.node_form((2, 2), 4, 512, 8, 1, exact=False, native_ok=False, tuning=t)
    assert d.why == "model"  # MPI's result not bit-identical for this op: both forms priced


def test_node_form_prices_both_forms_and_tries_the_close_ones():
    t = chooser.Tuning(alpha=10e-6, beta=1e-9, gamma=0.05e-9, native_below_bytes=64)
    d = chooser.node_form((4, 4), 2, 1 << 20, 8, 2, exact=False, tuning=t)
    forms = {e.algorithm: e.seconds for e in d.estimates}
    assert set(forms) == set(chooser.NODE_FORMS) and all(s and s > 0 for s in forms.values())
    assert d.algorithm == min(forms, key=lambda f: forms[f])
    # the contenders: every form within NODE_FORM_FACTOR of the least, flat first (the trial's reference)
    close = [f for f, s in forms.items() if s <= chooser.NODE_FORM_FACTOR * forms[d.algorithm]]
    assert sorted(c for c, _ in d.contenders) == sorted(close if len(close) > 1 else [])
    assert d.contenders and d.contenders[0][0] == "flat"


def test_node_form_does_not_try_a_form_the_model_puts_far_behind():
    # 48 ranks a node on 8x8 nodes, 1 MiB: the flat torus 8x8x48 sends every rank's bytes over the node's links
    t = chooser.Tuning(alpha=10e-6, beta=1e-9, gamma=0.05e-9, native_below_bytes=64)
    d = chooser.node_form((8, 8), 48, 1 << 20, 8, 32, exact=False, tuning=t)
    forms = {e.algorithm: e.seconds for e in d.estimates}
    assert d.algorithm == "nodes" and d.contenders == ()
    assert forms["flat"] > chooser.NODE_FORM_FACTOR * forms["nodes"]


def test_choose_command_with_ranks_per_node(clean_env, capsys):
    """With K ranks a node, `choose` shows auto's form first, then the pick on the form's dims and size."""
    from swing_mpi.cli import main

    path = save_tuning(chooser.Tuning(alpha=10e-6, beta=1e-9, gamma=0.05e-9, native_below_bytes=64),
                       clean_env / "t.json")
    assert main(["choose", "--dims", "8x8", "--ranks-per-node", "48", "--size", "1M", "--tuning", str(path),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"]["form"] == "nodes" and out["nodes"]["form_tried_first"] == []
    assert out["dims"] == "8x8" and out["nbytes"] == 32 << 10  # a lane's chunk: 1 MiB over 32 lanes of 32 KiB
    assert {f["form"] for f in out["nodes"]["forms"]} == set(chooser.NODE_FORMS)
    assert main(["choose", "--dims", "2x2", "--ranks-per-node", "4", "--size", "8", "--tuning", str(path),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"]["form"] == "flat" and out["dims"] == "2x2x4" and out["pick"] == "native"
    assert main(["choose", "--dims", "2x2", "--ranks-per-node", "4", "--size", "64K", "--tuning", str(path)]) == 0
    text = capsys.readouterr().out
    assert "# 4 ranks a node: auto runs the" in text and "first calls try the forms: flat, nodes" in text
    assert main(["choose", "--dims", "4x4", "--ranks-per-node", "2", "--size", "64K", "--collective",
                 "reduce_scatter", "--json", "--tuning", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"]["form"] == "nodes" and out["nbytes"] == 32 << 10 and out["dims"] == "4x4"
    assert main(["choose", "--dims", "2x2", "--ranks-per-node", "0", "--size", "8"]) == 2
