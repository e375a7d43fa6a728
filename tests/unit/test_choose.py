"""``auto``'s chooser (swing_mpi.choose): the model, its determinism, tuning files, the table."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import pytest

from swing_mpi import choose as select
from swing_mpi.choose import (
    DEFAULT_TUNING,
    Features,
    Tuning,
    TuningError,
    auto_table,
    choose,
    estimate,
    features,
    load_tuning,
    save_tuning,
    tuning_for_comm,
    tuning_from_dict,
)

SHAPES = [(4,), (2, 2), (4, 4), (16,), (2, 2, 4), (8,), (3,), (6,), (6, 4)]
MODEL = replace(DEFAULT_TUNING, native_below_bytes=None)
"""The default constants without the hand-off of tiny vectors to MPI: the model's own choices."""
SIZES = [8 << i for i in range(24)]  # 8 B … 64 MiB


def _pick(dims, nbytes, *, exact, tuning=MODEL, commutative=True, itemsize=8):
    return choose(math.prod(dims), dims, max(1, nbytes // itemsize), itemsize, exact=exact,
                  commutative=commutative, tuning=tuning)


def _crossover(dims, *, exact, tuning=MODEL):
    """The first size at which swing-bw wins (None if it never does up to 64 MiB)."""
    for n in SIZES:
        if _pick(dims, n, exact=exact, tuning=tuning) == "swing-bw":
            return n
    return None


# -- choose ------------------------------------------------------------------------------

@pytest.mark.parametrize("dims", SHAPES)
@pytest.mark.parametrize("exact", [True, False])
def test_noncommutative_is_recdoub(dims, exact):
    allow_native = Tuning(1e-6, 1e-9, 1e-9, native_below_bytes=1 << 30)
    for n in (8, 1 << 20):
        for tuning in (None, allow_native):
            assert _pick(dims, n, exact=exact, commutative=False, tuning=tuning) == "recdoub"


@pytest.mark.parametrize("dims", [d for d in SHAPES if d != (3,)])
@pytest.mark.parametrize("exact", [True, False])
def test_tiny_is_swing_lat_large_is_swing_bw(dims, exact):
    assert _pick(dims, 8, exact=exact) == "swing-lat"
    assert _pick(dims, 64, exact=exact) == "swing-lat"
    assert _pick(dims, 16 << 20, exact=exact) == "swing-bw"


def test_three_ranks():
    """On a 3-ring swing-lat folds (3 steps); swing-bw's odd ring needs 2 steps, on 2 lanes.

    With concurrent lanes swing-bw wins at every size; with serial lanes (4
    lane steps) swing-lat wins small vectors, except one element, where only
    one of swing-bw's lanes has data.
    """
    assert features("swing-lat", (3,), 1, 8, True).steps == 3
    assert features("swing-bw", (3,), 100, 8, True).steps == 2
    assert features("swing-bw", (3,), 100, 8, True).lane_steps == 4
    assert features("swing-bw", (3,), 1, 8, True).lane_steps == 2
    conc = replace(MODEL, concurrent_lanes=True)
    assert {_pick((3,), n, exact=e, tuning=conc) for n in SIZES for e in (True, False)} == {"swing-bw"}
    assert _pick((3,), 8, exact=True) == "swing-bw"
    assert _pick((3,), 16, exact=True) == "swing-lat"
    assert _pick((3,), 16 << 20, exact=True) == "swing-bw"


def _from_full_lanes(dims):
    """Sizes from which every lane of swing-bw has data in every block (2·D·p elements)."""
    return [n for n in SIZES if n // 8 >= 2 * len(dims) * math.prod(dims)]


@pytest.mark.parametrize("dims", SHAPES)
@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("concurrent", [False, True])
def test_monotone_once_bw_always_bw(dims, exact, concurrent):
    """Once swing-bw wins, larger vectors keep it (from the size where all its lanes carry data;
    for power-of-two shapes from one element on).
    """
    tuning = replace(MODEL, concurrent_lanes=concurrent)
    sizes = SIZES if math.prod(dims) & (math.prod(dims) - 1) == 0 else _from_full_lanes(dims)
    picks = [_pick(dims, n, exact=exact, tuning=tuning) for n in sizes]
    assert set(picks) <= {"swing-lat", "swing-bw"}
    first = picks.index("swing-bw")
    assert all(p == "swing-lat" for p in picks[:first])
    assert all(p == "swing-bw" for p in picks[first:]), list(zip(sizes, picks))


@pytest.mark.parametrize("dims", SHAPES)
def test_monotone_with_other_tunings(dims):
    sizes = _from_full_lanes(dims)
    for tuning in (Tuning(1e-6, 1e-10, 1e-10), Tuning(50e-6, 1e-9, 0.0), Tuning(5e-6, 0.0, 1e-9),
                   Tuning(1e-6, 1e-10, 1e-10, concurrent_lanes=False), Tuning(5e-6, 0.0, 1e-9, concurrent_lanes=False)):
        for exact in (True, False):
            picks = [_pick(dims, n, exact=exact, tuning=tuning) for n in sizes]
            if "swing-bw" in picks:
                assert all(p == "swing-bw" for p in picks[picks.index("swing-bw"):]), (tuning, exact)


@pytest.mark.parametrize("dims", [(4,), (2, 2), (4, 4), (16,), (2, 2, 4), (8,), (6, 4)])
def test_inexact_swing_lat_loses_earlier(dims):
    """The contributions form moves count·(p−1) elements: swing-bw takes over at smaller sizes."""
    inexact, exact = _crossover(dims, exact=False), _crossover(dims, exact=True)
    assert inexact is not None and exact is not None
    assert inexact <= exact
    if math.prod(dims) >= 8:
        assert inexact < exact


def test_larger_p_inexact_crosses_earlier():
    assert _crossover((16,), exact=False) <= _crossover((4,), exact=False)


def test_identical_inputs_identical_answers():
    a = [_pick(d, n, exact=e) for d in SHAPES for n in SIZES[::3] for e in (True, False)]
    select._choose.cache_clear()
    select.features.cache_clear()
    b = [_pick(d, n, exact=e) for d in SHAPES for n in SIZES[::3] for e in (True, False)]
    assert a == b
    # equal tunings from different sources are the same cache key and give the same answers
    t1 = replace(DEFAULT_TUNING, source="somewhere else")
    assert t1 == DEFAULT_TUNING and hash(t1) == hash(DEFAULT_TUNING)
    assert [_pick((4, 4), n, exact=False, tuning=t1) for n in SIZES] == \
           [_pick((4, 4), n, exact=False, tuning=DEFAULT_TUNING) for n in SIZES]


def test_choose_arguments_are_normalised():
    import numpy as np
    assert choose(16, [4, 4], 1024, 8, exact=True, commutative=True) == \
        choose(np.int64(16), (np.int64(4), 4), np.int64(1024), 8, exact=np.bool_(True), commutative=1)


def test_dims_must_match_p():
    with pytest.raises(ValueError, match="hold 16 ranks"):
        choose(8, (4, 4), 10, 8, exact=True, commutative=True)


def test_degenerate_inputs():
    assert choose(1, (1,), 100, 8, exact=True, commutative=True, tuning=MODEL) == "swing-lat"
    assert choose(4, (4,), 0, 8, exact=False, commutative=True, tuning=MODEL) == "swing-lat"
    assert choose(4, (4,), 0, 8, exact=False, commutative=True) == "native"  # defaults: tiny -> MPI


def test_native_only_when_tuning_allows():
    for dims in SHAPES:
        for n in SIZES:
            assert _pick(dims, n, exact=False) != "native"
            assert _pick(dims, n, exact=True) != "native"
    t = replace(DEFAULT_TUNING, native_below_bytes=1024)
    assert _pick((4,), 8, exact=False, tuning=t) == "native"
    assert _pick((4,), 1016, exact=True, tuning=t) == "native"
    assert _pick((4,), 1024, exact=True, tuning=t) == "swing-lat"  # below, not at
    assert _pick((4,), 16 << 20, exact=True, tuning=t) == "swing-bw"
    t0 = replace(MODEL, native_below_bytes=0)
    assert _pick((4,), 8, exact=True, tuning=t0) == "swing-lat"


def test_model_extremes():
    """Only latency: fewest steps win; only bandwidth: fewest bytes win (either lane mode)."""
    for conc in (True, False):
        lat_only = Tuning(1e-5, 0.0, 0.0, concurrent_lanes=conc)
        bw_only = Tuning(0.0, 1e-9, 1e-9, concurrent_lanes=conc)
        for dims in [(4,), (4, 4), (16,), (2, 2, 4)]:
            assert _pick(dims, 64 << 20, exact=True, tuning=lat_only) == "swing-lat"
            assert _pick(dims, 1 << 20, exact=True, tuning=bw_only) == "swing-bw"


def test_lane_modes_price_lanes_differently():
    """Serial lanes make swing-bw's 2D lanes cost more: it wins later than with concurrent lanes."""
    for dims in [(4, 4), (2, 2, 4), (16,)]:
        for exact in (True, False):
            serial = _crossover(dims, exact=exact, tuning=replace(MODEL, concurrent_lanes=False))
            conc = _crossover(dims, exact=exact, tuning=replace(MODEL, concurrent_lanes=True))
            assert conc <= serial


# -- the features the model prices -------------------------------------------------------

@pytest.mark.parametrize("dims", [(4,), (4, 4), (16,), (2, 2, 4)])
def test_features_swing_lat_exact_vs_contributions(dims):
    p = math.prod(dims)
    L = int(math.log2(p))
    count, item = 1000, 8
    ex = features("swing-lat", dims, count, item, True)
    assert ex == Features(L, L * count * item, L * count * item, L, L * count * item)  # one lane
    inex = features("swing-lat", dims, count, item, False)
    assert inex.steps == inex.lane_steps == L
    assert inex.all_lanes_bytes == inex.lane_bytes
    assert inex.lane_bytes == (p - 1) * count * item  # the contributions form: bytes grow with p
    assert inex.reduced_bytes == (p - 1) * count * item  # the final rank-order combine


def test_features_swing_bw_busiest_lane():
    f = features("swing-bw", (4, 4), 1 << 12, 8, False)
    assert f.steps == 8  # 2·log2 p
    assert f.lane_steps == 4 * 8  # 2D = 4 lanes
    assert f.all_lanes_bytes == pytest.approx(4 * f.lane_bytes, rel=0.02)
    # 4 lanes of n/4 each; reduce-scatter + all-gather move 2·(p−1)/p of a lane's part
    assert f.lane_bytes == pytest.approx(2 * (15 / 16) * (1 << 12) * 8 / 4, rel=0.02)
    assert f.reduced_bytes == pytest.approx((15 / 16) * (1 << 12) * 8, rel=0.02)


def test_features_folded_ring_counts_the_fold():
    """Rank 0 is idle in the fold steps of a 6-ring; rank 5 folds: the model counts it."""
    f = features("swing-lat", (6,), 100, 8, True)
    assert f.steps == 4  # fold, 2 core steps, unfold
    assert f.lane_bytes == 4 * 100 * 8


def test_estimate_is_the_feature_time():
    t = Tuning(2e-6, 1e-9, 3e-10)
    f = features("swing-bw", (2, 2), 4096, 4, True)
    assert estimate("swing-bw", (2, 2), 4096, 4, exact=True, tuning=t) == pytest.approx(
        f.steps * 2e-6 + f.lane_bytes * 1e-9 + f.reduced_bytes * 3e-10)
    ts = replace(t, concurrent_lanes=False)
    assert estimate("swing-bw", (2, 2), 4096, 4, exact=True, tuning=ts) == pytest.approx(
        f.lane_steps * 2e-6 + f.all_lanes_bytes * 1e-9 + f.reduced_bytes * 3e-10)


# -- tuning files ---------------------------------------------------------------------------

@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SWING_MPI_TUNING", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_defaults_without_files(clean_env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_tuning() is DEFAULT_TUNING
    assert DEFAULT_TUNING.native_below_bytes == 2048  # vectors up to 1 KiB go to MPI_Allreduce
    assert DEFAULT_TUNING.alpha > 0 and DEFAULT_TUNING.beta > 0 and DEFAULT_TUNING.gamma >= 0


def test_explicit_file(clean_env):
    p = _write(clean_env / "t.json", {"version": 1, "alpha": 1e-5, "beta": 2e-10, "gamma": 3e-10,
                                      "native_below_bytes": 256, "measured": [1, 2], "p": 4})
    t = load_tuning(p)
    assert (t.alpha, t.beta, t.gamma, t.native_below_bytes) == (1e-5, 2e-10, 3e-10, 256)
    assert t.source == str(p)


def test_lane_mode_from_file(clean_env):
    p = _write(clean_env / "t.json", {"alpha": 1e-5, "beta": 2e-10, "gamma": 0, "concurrent_lanes": False})
    assert load_tuning(p).concurrent_lanes is False
    p = _write(clean_env / "u.json", {"alpha": 1e-5, "beta": 2e-10, "gamma": 0})
    assert load_tuning(p).concurrent_lanes is True  # the paper's model unless a calibration says otherwise


def test_env_var_file(clean_env, monkeypatch):
    p = _write(clean_env / "env.json", {"alpha": 7e-6, "beta": 1e-10, "gamma": 0})
    monkeypatch.setenv("SWING_MPI_TUNING", str(p))
    t = load_tuning()
    assert t.alpha == 7e-6 and t.gamma == 0 and t.native_below_bytes is None


def test_env_var_default_keyword(clean_env, monkeypatch):
    _write(clean_env / "config" / "swing_mpi" / "tuning.json", {"alpha": 1.0, "beta": 1.0, "gamma": 1.0})
    monkeypatch.setenv("SWING_MPI_TUNING", "default")
    assert load_tuning() is DEFAULT_TUNING


def test_config_file(clean_env):
    p = _write(clean_env / "config" / "swing_mpi" / "tuning.json", {"alpha": 3e-6, "beta": 1e-10, "gamma": 1e-10})
    assert select.default_tuning_path() == p
    assert load_tuning().alpha == 3e-6


def test_env_var_wins_over_config_file(clean_env, monkeypatch):
    _write(clean_env / "config" / "swing_mpi" / "tuning.json", {"alpha": 3e-6, "beta": 1e-10, "gamma": 1e-10})
    p = _write(clean_env / "env.json", {"alpha": 4e-6, "beta": 1e-10, "gamma": 1e-10})
    monkeypatch.setenv("SWING_MPI_TUNING", str(p))
    assert load_tuning().alpha == 4e-6


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ([1, 2, 3], "expected a JSON object"),
    ({"alpha": 1e-6, "beta": 1e-9}, "missing gamma"),
    ({"alpha": -1e-6, "beta": 1e-9, "gamma": 0}, "alpha must be a finite number >= 0"),
    ({"alpha": "fast", "beta": 1e-9, "gamma": 0}, "alpha must be"),
    ({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "native_below_bytes": -5}, "native_below_bytes"),
    ({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "native_below_bytes": 1.5}, "native_below_bytes"),
    ({"version": 99, "alpha": 1e-6, "beta": 1e-9, "gamma": 0}, "version 99"),
    ({"alpha": 1e-6, "beta": 1e-9, "gamma": 0, "concurrent_lanes": "yes"}, "concurrent_lanes"),
])
def test_bad_files(clean_env, monkeypatch, content, message):
    """An explicit path raises TuningError; the same file found implicitly warns and gives the defaults."""
    p = _write(clean_env / "bad.json", content if isinstance(content, str) else content)
    with pytest.raises(TuningError, match=message):
        load_tuning(p)
    monkeypatch.setenv("SWING_MPI_TUNING", str(p))
    with pytest.warns(RuntimeWarning, match="SWING_MPI_TUNING.*" + message.split()[0]):
        assert load_tuning() is DEFAULT_TUNING
    monkeypatch.delenv("SWING_MPI_TUNING")
    _write(clean_env / "config" / "swing_mpi" / "tuning.json", content)
    with pytest.warns(RuntimeWarning, match="config file"):
        assert load_tuning() is DEFAULT_TUNING


def test_binary_file(clean_env, monkeypatch):
    p = clean_env / "bin.json"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TuningError, match="not UTF-8"):
        load_tuning(p)
    monkeypatch.setenv("SWING_MPI_TUNING", str(p))
    with pytest.warns(RuntimeWarning, match="not UTF-8"):
        assert load_tuning() is DEFAULT_TUNING


def test_tuning_for_comm_never_raises_on_rank_0(monkeypatch):
    """Rank 0 must reach the broadcast whatever happens while loading."""
    def boom():
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(select, "load_tuning", boom)
    root = _FakeComm(0, 4, None)
    with pytest.warns(RuntimeWarning, match="disk on fire"):
        assert tuning_for_comm(root) is DEFAULT_TUNING
    assert root.bcasts == 1


def test_missing_env_file_warns(clean_env, monkeypatch):
    monkeypatch.setenv("SWING_MPI_TUNING", str(clean_env / "nope.json"))
    with pytest.warns(RuntimeWarning, match="cannot read tuning file"):
        assert load_tuning() is DEFAULT_TUNING
    with pytest.raises(TuningError, match="cannot read"):
        load_tuning(clean_env / "nope.json")


def test_save_roundtrip(clean_env):
    t = Tuning(1.5e-5, 2.5e-10, 3.5e-10, native_below_bytes=4096, source="test")
    path = save_tuning(t, clean_env / "sub" / "dir" / "t.json", extra={"p": 4, "alpha": "overwritten"})
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["p"] == 4 and data["alpha"] == 1.5e-5
    back = load_tuning(path)
    assert (back.alpha, back.beta, back.gamma, back.native_below_bytes) == (1.5e-5, 2.5e-10, 3.5e-10, 4096)
    assert tuning_from_dict(t.to_dict(), source="test") == t


def test_tuning_validates_directly():
    with pytest.raises(TuningError):
        Tuning(math.nan, 0.0, 0.0)
    with pytest.raises(TuningError):
        Tuning(0.0, math.inf, 0.0)
    with pytest.raises(TuningError):
        Tuning(0.0, 0.0, 0.0, native_below_bytes=True)


class _FakeComm:
    """Enough of a communicator for tuning_for_comm: rank 0's object reaches the others."""

    def __init__(self, rank, size, root_value):
        self.rank, self.size, self.root_value, self.bcasts = rank, size, root_value, 0

    def Get_rank(self):  # noqa: N802
        return self.rank

    def Get_size(self):  # noqa: N802
        return self.size

    def bcast(self, obj, root=0):
        self.bcasts += 1
        assert root == 0
        if self.rank == 0:
            return obj
        assert obj is None  # non-root ranks do not read anything
        return self.root_value


def test_tuning_for_comm_reads_on_rank_0_only(clean_env, monkeypatch):
    p = _write(clean_env / "t.json", {"alpha": 9e-6, "beta": 1e-10, "gamma": 1e-10})
    monkeypatch.setenv("SWING_MPI_TUNING", str(p))
    root = _FakeComm(0, 4, None)
    t0 = tuning_for_comm(root)
    assert t0.alpha == 9e-6 and root.bcasts == 1
    # another rank with a broken file: it never reads it, it gets rank 0's tuning
    monkeypatch.setenv("SWING_MPI_TUNING", str(clean_env / "missing.json"))
    other = _FakeComm(2, 4, t0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuning_for_comm(other) == t0
    assert other.bcasts == 1


def test_tuning_pickles():
    import pickle
    t = Tuning(1e-6, 2e-10, 3e-10, 512, "x")
    assert pickle.loads(pickle.dumps(t)) == t
    assert hash(pickle.loads(pickle.dumps(t))) == hash(t)


# -- the table ----------------------------------------------------------------------------

def test_auto_table_markdown():
    sizes = [8, 1 << 10, 1 << 20, 16 << 20]
    text = auto_table([4, (2, 2), "4x4", 16, (2, 2, 4)], sizes, tuning=MODEL)
    lines = text.splitlines()
    assert len(lines) == 2 + len(sizes)
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head == ["size", "4 (ring)", "2x2", "4x4", "16 (ring)", "2x2x4"]
    assert set(lines[1]) <= set("|-:")
    assert all(ln.startswith("|") and ln.endswith("|") for ln in lines)
    assert len({len(ln) for ln in lines}) == 1  # aligned columns
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]
    assert [r[0] for r in rows] == ["8 B", "1 KiB", "1 MiB", "16 MiB"]
    assert all(c in ("swing-lat", "swing-bw") for r in rows for c in r[1:])
    assert rows[0][1:] == ["swing-lat"] * 5
    assert rows[-1][1:] == ["swing-bw"] * 5
    with_defaults = auto_table([4, (2, 2)], [8, 1 << 10, 2 << 10])
    lines = with_defaults.splitlines()
    assert "native" in lines[2] and "native" in lines[3] and "native" not in lines[4]
    for r, n in zip(rows, sizes):
        for c, dims in zip(r[1:], [(4,), (2, 2), (4, 4), (16,), (2, 2, 4)]):
            assert c == _pick(dims, n, exact=False)


def test_auto_table_exact_and_itemsize():
    t = Tuning(DEFAULT_TUNING.alpha, DEFAULT_TUNING.beta, DEFAULT_TUNING.gamma, native_below_bytes=64)
    text = auto_table([(4,)], [4, 8, 64], dtype_itemsize=4, exact=True, tuning=t)
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in text.splitlines()[2:]]
    assert rows == [["4 B", "native"], ["8 B", "native"], ["64 B", "swing-lat"]]


# -- calibrate's fitting (pure functions, no MPI) ----------------------------------------------

def _synthetic(tuning, shapes=((4,), (2, 2)), sizes=tuple(8 << i for i in range(0, 20, 2))):
    from swing_mpi.calibrate import SERIES
    recs = []
    for dims in shapes:
        for n in sizes:
            count = n // 8
            for s in SERIES:
                if s.algorithm == "native":
                    t = 50e-6 + n * 0.2e-9
                else:
                    t = estimate(s.algorithm, dims, count, 8, exact=s.exact, tuning=tuning)
                recs.append({"nbytes": n, "count": count, "series": s.name, "algorithm": s.algorithm,
                             "exact": s.exact, "median_s": t, "min_s": t, "dims": dims})
    return recs


def test_nnls():
    from swing_mpi.calibrate import nnls
    rows = [[1, 0, 1], [1, 1, 0], [1, 2, 1], [1, 3, 0]]
    coef, rss = nnls(rows, [1 + 2 * r[1] for r in rows])
    assert coef == pytest.approx([1, 2, 0], abs=1e-9) and rss == pytest.approx(0, abs=1e-12)
    coef, _ = nnls(rows, [1 - 0.5 * r[1] for r in rows])  # the best fit wants a negative slope
    assert all(c >= 0 for c in coef) and coef[1] == 0


@pytest.mark.parametrize("concurrent", [True, False])
def test_fit_recovers_a_known_tuning(concurrent):
    from swing_mpi.calibrate import fit
    truth = Tuning(120e-6, 1.5e-9, 0.05e-9, concurrent_lanes=concurrent)
    f = fit(_synthetic(truth), (4,), gamma=truth.gamma)
    assert f.concurrent_lanes is concurrent
    assert f.alpha == pytest.approx(truth.alpha, rel=1e-6) and f.beta == pytest.approx(truth.beta, rel=1e-6)
    assert f.max_abs_rel_error < 1e-6 and f.gamma_measured
    assert f.regret[concurrent] == pytest.approx(0.0, abs=1e-12)
    shifted = _synthetic(truth)
    for r in shifted:
        r["median_s"] += 300e-6  # a per-call constant (argument checks, leaving the barrier)
    g = fit(shifted, (4,), gamma=truth.gamma)
    assert g.overhead == pytest.approx(300e-6, rel=1e-4) and g.alpha == pytest.approx(truth.alpha, rel=1e-4)
    free = fit(_synthetic(truth), (4,))  # all three fitted
    assert free.alpha == pytest.approx(truth.alpha, rel=1e-3) and free.gamma == pytest.approx(truth.gamma, rel=1e-2)


def test_native_threshold():
    from swing_mpi.calibrate import native_threshold

    def recs(native_wins):
        out = []
        for i, w in enumerate(native_wins):
            n = 8 << i
            out.append({"nbytes": n, "series": "swing-lat/int64", "median_s": 1.0})
            out.append({"nbytes": n, "series": "native/float64", "median_s": 0.5 if w else 1.2})
        return out

    assert native_threshold(recs([False] * 5)) is None
    assert native_threshold(recs([True, True, False, False, False])) == 32
    assert native_threshold(recs([True, False, True, True, False, False, False])) == 128  # one noisy size
    assert native_threshold(recs([False, True, False, False])) is None
    assert native_threshold(recs([True] * 4)) == 64 + 1  # faster everywhere measured
    close = recs([True])
    close[1]["median_s"] = 0.95  # 5 % faster: not enough with the default 10 % margin
    assert native_threshold(close) is None and native_threshold(close, margin=0.0) == 9
