"""The benchmark's parsing, iteration counts, table and files, without MPI."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from swing_mpi import bench
from swing_mpi.bench import (
    Config,
    add_vs_native,
    format_header,
    format_row,
    format_table,
    iterations_for,
    model_algorithm,
    parse_algorithms,
    point_sizes,
    read_results,
    write_csv,
    write_json,
)
from swing_mpi.bench.results import COLLECTIVES, collective_of
from swing_mpi.schedule import ALGORITHMS
from swing_mpi.units import format_size, parse_size, parse_sizes, short_size

ROOT = Path(__file__).resolve().parents[2]


def _parse(*argv: str) -> argparse.Namespace:
    return bench.build_parser().parse_args(list(argv))


# -- sizes -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, n", [
    ("8", 8), ("0", 0), ("64K", 65536), ("64k", 65536), ("16M", 16 << 20), ("1G", 1 << 30),
    ("4KiB", 4096), ("1MB", 1 << 20), ("32B", 32), (" 2K ", 2048), ("1.5K", 1536), (4096, 4096),
])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["", "K", "0.3K", "-8", "8X", "1e3", -1])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_parse_sizes_ranges_and_lists():
    assert parse_sizes("8:64") == [8, 16, 32, 64]
    assert parse_sizes("8:16M")[-1] == 16 << 20 and len(parse_sizes("8:16M")) == 22
    assert parse_sizes("1K:1M:4") == [1024, 4096, 16384, 65536, 262144, 1 << 20]
    assert parse_sizes("8,64K,1M,16M") == [8, 65536, 1 << 20, 16 << 20]
    assert parse_sizes("1M,8,8") == [8, 1 << 20]  # sorted, no duplicates
    assert parse_sizes("8,1K:4K") == [8, 1024, 2048, 4096]
    # ends that are not powers of two are kept; powers of two between
    assert parse_sizes("10:100") == [10, 16, 32, 64, 100]
    assert parse_sizes("5:5") == [5]


@pytest.mark.parametrize("bad", ["", "64:8", "8:64:1", "1:2:3:4", "0:8", "a:b"])
def test_parse_sizes_rejects(bad):
    with pytest.raises(ValueError):
        parse_sizes(bad)


def test_format_size():
    assert format_size(8) == "8 B"
    assert format_size(65536) == "64 KiB"
    assert format_size(16 << 20) == "16 MiB"
    assert format_size(1536) == "1.5 KiB"
    for n in (8, 1536, 65536, 16 << 20, 256 << 20, 3 << 30):
        assert parse_size(short_size(n)) == n  # the compact form reads back


# -- algorithms -------------------------------------------------------------------------------

def test_default_algorithms_are_native_plus_the_registry():
    algs = parse_algorithms(None)
    assert algs[0] == "native"
    assert algs[1:] == [a for a in ALGORITHMS]  # read at run time, in registry order
    assert "auto" not in algs
    assert parse_algorithms("all") == algs


def test_algorithm_lists():
    assert parse_algorithms("swing-bw,native,auto") == ["swing-bw", "native", "auto"]
    assert parse_algorithms("auto,all")[:2] == ["auto", "native"]
    assert parse_algorithms("swing-bw, swing-bw") == ["swing-bw"]
    assert parse_algorithms("x,native", known=("x",)) == ["x", "native"]
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        parse_algorithms("swing-bw,nope")
    with pytest.raises(ValueError):
        parse_algorithms(",")


# -- iterations --------------------------------------------------------------------------------

def test_iterations_for():
    assert iterations_for(8, 20) == 20
    assert iterations_for(16 << 20, 20, max_bytes=256 << 20) == 16
    assert iterations_for(1 << 30, 20, max_bytes=256 << 20) == 3  # never fewer than 3
    assert iterations_for(1 << 30, 2, max_bytes=256 << 20) == 2  # unless asked for fewer
    assert iterations_for(1 << 30, 20, max_bytes=0) == 20  # 0: no cap
    assert iterations_for(8, 20, seconds_per_call=1.0, max_time=5.0) == 5
    assert iterations_for(8, 20, seconds_per_call=10.0, max_time=5.0) == 3
    assert iterations_for(8, 20, seconds_per_call=1e-6, max_time=5.0) == 20
    assert iterations_for(8, 1) == 1


# -- buffers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("count, dtype", [(0, "f8"), (1, "f8"), (1000, "i4"), (1 << 17, "f8"), (3, "c16")])
def test_page_array_starts_a_page_of_its_own(count, dtype):
    import mmap

    import numpy as np

    from swing_mpi.bench.measure import page_array

    arrays = [page_array(count, np.dtype(dtype)) for _ in range(3)]
    for a in arrays:
        assert type(a) is np.ndarray and a.dtype == np.dtype(dtype) and a.shape == (count,)
        assert a.flags.c_contiguous and a.flags.writeable
        if count:
            assert a.ctypes.data % mmap.PAGESIZE == 0
            a[...] = 7
            assert (a == 7).all()
    if count:  # separate memory: writing one leaves the others
        arrays[0][...] = 1
        assert (arrays[1] == 7).all()


def test_shuffled_orders_are_the_same_on_every_rank_and_mix_neighbours():
    from itertools import islice

    from swing_mpi.bench.timing import shuffled

    n = 11
    a = list(islice(shuffled(n), 40))
    assert a == list(islice(shuffled(n), 40))  # each rank computes the same orders
    assert all(sorted(o) == list(range(n)) for o in a)
    assert len({tuple(o) for o in a}) > 30
    # in a sequence of orders, who runs right before the last candidate varies (a rotation by one
    # each iteration would put the same neighbour there in all but one iteration of n)
    seq = [j for o in a for j in o]
    before = [seq[i - 1] for i in range(1, len(seq)) if seq[i] == n - 1]
    assert len(set(before)) >= 6
    assert list(islice(shuffled(n, seed=1), 3)) != a[:3]
    assert list(islice(shuffled(0), 2)) == [[], []] and list(islice(shuffled(1), 2)) == [[0], [0]]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 11, 12])
def test_orders_put_every_candidate_after_every_other_equally_often(n):
    from collections import Counter
    from itertools import islice

    from swing_mpi.bench.timing import balanced_rows, shuffled

    rows = balanced_rows(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    pairs = Counter((a, b) for r in rows for a, b in zip(r, r[1:]))
    assert set(pairs) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert set(pairs.values()) == {1 if n % 2 == 0 else 2}
    # the generator keeps that balance in every cycle of rows, whatever its relabelling and row order
    for seed in (0, 7, 2024):
        orders = list(islice(shuffled(n, seed), 3 * len(rows)))
        for c in range(3):
            cycle = orders[c * len(rows):(c + 1) * len(rows)]
            got = Counter((a, b) for r in cycle for a, b in zip(r, r[1:]))
            assert got == pairs
    # 15 orders of 5 (the lab's head-to-head runs): nobody follows one candidate 7 times of 14 any more,
    # as the first one followed the fifth in the one fixed sequence every launch drew before
    for seed in range(50):
        seq = [j for o in islice(shuffled(5, seed), 15) for j in o]
        after = Counter((a, b) for a, b in zip(seq, seq[1:]) if a != b)
        assert max(after.values()) <= 5


class _OneRank:
    """One rank: what time_point and its barrier call; a barrier writes "|" into ``log``."""

    def __init__(self, log: list[str]):
        self.log = log

    def Get_rank(self):  # noqa: N802
        return 0

    def Get_size(self):  # noqa: N802
        return 1

    def Barrier(self):  # noqa: N802
        self.log.append("|")

    def Allreduce(self, *args):  # noqa: N802
        pass


@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("settle", [0, 1, 2])
def test_settle_puts_untimed_calls_of_the_same_algorithm_right_before_each_timed_one(interleave, settle):
    from types import SimpleNamespace

    import numpy as np

    from swing_mpi.bench.measure import Prepared
    from swing_mpi.bench.timing import time_point

    log: list[str] = []
    loads = []
    pt = SimpleNamespace(load=lambda recv: loads.append(len(log)), nbytes=8,
                         collective=SimpleNamespace(bus_factor=lambda p: 1.0))
    preps = [Prepared(a, lambda a=a: log.append(a), np.zeros(1), 0, 5) for a in "abc"]
    rows = time_point(_OneRank(log), pt, preps, interleave=interleave, seed=3, settle=settle)
    assert [len(r["times_us"]) for r in rows] == [5, 5, 5]
    before, *segments = "".join(log).split("|")  # a barrier before every call, settling ones too
    assert before == "" and all(len(seg) == 1 for seg in segments)
    calls = "".join(segments)
    turns = [calls[i:i + settle + 1] for i in range(0, len(calls), settle + 1)]
    assert len(turns) == 15 and all(t == t[0] * (settle + 1) for t in turns)  # settle calls, then the timed one
    assert sorted(t[0] for t in turns) == sorted("abc" * 5)
    assert len(loads) == 15 * (settle + 1)  # the input is loaded before every call, settling ones too


@pytest.mark.parametrize("streak", [1, 2, 3, 7])
def test_streak_gives_each_algorithm_turns_of_consecutive_timed_calls(streak):
    import itertools
    from types import SimpleNamespace

    import numpy as np

    from swing_mpi.bench.measure import Prepared
    from swing_mpi.bench.timing import shuffled, time_point

    log: list[str] = []
    pt = SimpleNamespace(load=lambda recv: None, nbytes=8, collective=SimpleNamespace(bus_factor=lambda p: 1.0))
    iters = {"a": 7, "b": 7, "c": 4}
    preps = [Prepared(a, lambda a=a: log.append(a), np.zeros(1), 0, n) for a, n in iters.items()]
    rows = time_point(_OneRank(log), pt, preps, interleave=True, seed=5, streak=streak)
    assert [len(r["times_us"]) for r in rows] == list(iters.values())
    timed = "".join(log).replace("|", "")
    assert sorted(timed) == sorted("a" * 7 + "b" * 7 + "c" * 4)
    orders = shuffled(3, 5)  # round r: every algorithm with calls left takes a turn of streak calls
    expected = "".join("".join(k * max(0, min(streak, iters[k] - r)) for k in (preps[j].alg for j in next(orders)))
                       for r in range(0, 7, streak))
    assert timed == expected
    runs = [len(list(g)) for _, g in itertools.groupby(timed)]
    assert max(runs) <= 2 * streak  # two turns of one algorithm meet only at a seam between rounds
    if streak >= 7:  # one turn holds all of an algorithm's calls: blocks
        assert len(runs) == 3


# -- options -------------------------------------------------------------------------------------

def test_defaults_and_quick():
    c = Config(_parse())
    assert c.sizes == parse_sizes(bench.DEFAULT_SIZES)
    assert c.places == ["out"] and c.check and c.iters == bench.DEFAULT_ITERS
    q = Config(_parse("--quick"))
    assert q.sizes == parse_sizes(bench.QUICK_SIZES) and max(q.sizes) <= 1 << 20
    assert q.algorithms == parse_algorithms(None) and q.iters == 10
    q2 = Config(_parse("--quick", "--sizes", "8", "--iters", "4"))
    assert q2.sizes == [8] and q2.iters == 4
    # whole elements, at least one: 1..8 B of float64 are all one element
    assert Config(_parse("--sizes", "1:16")).sizes == [8, 16]
    assert Config(_parse("--sizes", "1:16", "--dtype", "int32")).sizes == [4, 8, 16]
    assert Config(_parse("--sizes", "100", "--dtype", "uint8")).sizes == [100]
    assert Config(_parse("--sizes", "1,12,16")).rounded == [1, 12]  # rank 0 says so on stderr
    assert Config(_parse("--sizes", "8:64")).rounded == []


def test_options():
    c = Config(_parse("-m", "8:16M", "-a", "native,swing-bw,auto", "--dims", "4x4", "-i", "7", "-x", "1",
                      "--both", "--label", "mpich-ring", "--max-bytes", "64M", "--max-time", "0",
                      "--model-link", "40M", "--model-alpha", "100us", "--dtype", "int32", "--op", "max"))
    assert c.algorithms == ["native", "swing-bw", "auto"] and c.dims == "4x4"
    assert (c.iters, c.warmup, c.max_bytes, c.max_time) == (7, 1, 64 << 20, 0)
    assert c.places == ["out", "in"] and c.label == "mpich-ring"
    assert c.model_params() == {"link_bytes_per_s": 5e6, "alpha": pytest.approx(1e-4), "congestion": "routed"}
    old = Config(_parse("--model-link-mbps", "40", "--model-alpha-us", "100"))  # the old spellings, one more release
    assert old.model_params() == c.model_params()
    assert Config(_parse("--inplace")).places == ["in"]
    assert Config(_parse()).model_params() is None
    with pytest.raises(SystemExit):
        _parse("--inplace", "--both")
    with pytest.raises(ValueError):
        Config(_parse("--op", "bxor"))  # bitwise op on float64
    with pytest.raises(ValueError):
        Config(_parse("--iters", "0"))
    for bad, flag in ((("--model-link", "0G"), "--model-link"), (("--model-link=-3M",), "--model-link"),
                      (("--model-link", "nan"), "--model-link"), (("--model-link", "40"), "--model-link"),
                      (("--model-link-mbps", "0"), "--model-link"),
                      (("--model-link", "40M", "--model-alpha=-1us"), "--model-alpha"),
                      (("--model-link", "40M", "--model-alpha", "inf"), "--model-alpha"),
                      (("--model-link", "40M", "--model-alpha", "100"), "--model-alpha")):
        with pytest.raises(ValueError, match=flag):
            Config(_parse(*bad))
    assert Config(_parse()).batch == 1 and Config(_parse("--batch", "4")).batch == 4
    with pytest.raises(ValueError, match="--batch must be >= 1"):
        Config(_parse("--batch", "0"))
    assert Config(_parse("--streak", "8")).streak == 8 and Config(_parse("--settle", "2")).settle == 2
    with pytest.raises(ValueError, match="--streak must be >= 1"):
        Config(_parse("--streak", "0"))
    with pytest.raises(ValueError, match="--settle must be >= 0"):
        Config(_parse("--settle", "-1"))
    with pytest.raises(ValueError, match="use one of them"):
        Config(_parse("--streak", "4", "--blocked"))
    assert not Config(_parse("--streak", "1", "--blocked")).interleave


def test_cli_wires_bench():
    from swing_mpi import cli

    args = cli.build_parser(["bench"]).parse_args(["bench", "--quick"])
    assert args._run is bench.run and args.quick


# -- rows, table, files -------------------------------------------------------------------------

def _row(alg, size=1024, median=100.0, label=None, place="out", wrong=0, resolved=None, mpich="default"):
    return {
        "size": size, "count": size // 8, "type": "float64", "redop": "sum", "algorithm": alg,
        "label": label or alg, "resolved": resolved or alg, "place": place, "p": 4, "dims": "2x2",
        "mpich_algorithm": mpich, "iters": 5, "warmup": 1, "time_avg_us": median * 1.1,
        "time_min_us": median * 0.9, "time_max_us": median * 1.5, "time_median_us": median,
        "algbw_Bps": size / (median * 1e-6), "busbw_Bps": size / (median * 1e-6) * 1.5,
        "vs_native": None, "wrong": wrong, "model_us": None, "times_us": [median] * 5,
    }


def _rows():
    rows = [_row("native", median=100.0), _row("swing-bw", median=50.0),
            _row("auto", median=80.0, resolved="swing-lat"),
            _row("native", size=2048, median=200.0), _row("swing-bw", size=2048, median=300.0)]
    add_vs_native(rows)
    return rows


def test_vs_native():
    rows = _rows()
    assert [r["vs_native"] for r in rows] == [1.0, 0.5, 0.8, 1.0, 1.5]
    # a forced-MPICH run measured apart is compared with the reference native
    forced = [_row("native", median=400.0, label="mpich-ring", mpich="ring")]
    add_vs_native(forced, rows)
    assert forced[0]["vs_native"] == 4.0
    # no native at that size: no ratio
    lone = [_row("swing-bw", size=8)]
    add_vs_native(lone)
    assert lone[0]["vs_native"] is None


def test_table_format():
    rows = _rows()
    table = format_table(rows, "GB")
    lines = table.splitlines()
    assert lines[0].startswith("#") and "time (us)" in lines[0] and "bandwidth (GB/s)" in lines[0]
    for col in ("size", "count", "type", "redop", "algorithm", "avg", "min", "max", "median", "algbw", "busbw",
                "vs_native", "#wrong"):
        assert col in lines[1]
    data = [ln for ln in lines if not ln.startswith("#")]
    assert len(data) == 5 and "#" in lines  # a separator line between sizes
    first = data[0].split()
    assert first[:5] == ["1024", "128", "float64", "sum", "native"]
    assert first[-2:] == ["1.000", "0"]
    assert "auto:swing-lat" in data[2]  # what auto ran
    assert data[1].split()[-2] == "0.500"
    # algbw on the median: 1024 B / 50 us = 0.0205 GB/s, busbw x 1.5
    cols = data[1].split("|")
    assert cols[2].split() == ["0.0205", "0.0307"]
    # columns line up under the header
    assert len({len(ln) for ln in lines if ln != "#"}) <= 2
    assert "MB/s" in format_header("MB")
    mb = format_row(rows[1], "MB")
    assert "20.48" in mb


def test_row_without_native_or_check():
    r = _row("swing-bw")
    r["wrong"] = -1
    line = format_row(r)
    assert line.split()[-2:] == ["-", "-"]


def test_csv_json_roundtrip(tmp_path):
    rows = _rows()
    env = {"p": 4, "dims": "2x2", "mpi_library": "MPICH Version: 5.0.2"}
    write_csv(rows, str(tmp_path / "sub" / "r.csv"))
    write_json(str(tmp_path / "r.json"), env, rows)
    env2, back = read_results(str(tmp_path / "r.json"))
    assert env2 == env and back == rows
    _, csv_rows = read_results(str(tmp_path / "sub" / "r.csv"))
    assert [r["algorithm"] for r in csv_rows] == [r["algorithm"] for r in rows]
    assert csv_rows[1]["vs_native"] == 0.5 and csv_rows[0]["size"] == 1024 and csv_rows[0]["wrong"] == 0
    assert csv_rows[0]["model_us"] is None
    header = (tmp_path / "sub" / "r.csv").read_text().splitlines()[0].split(",")
    assert header[:len(bench.FIELDS)] == list(bench.FIELDS)
    assert "times_us" not in header


_ENV = {"p": 4, "dims": "2x2", "dims_source": "--dims", "dtype": "float64", "op": "sum",
        "mpi_library": "MPICH Version: 5.0.2", "native_desc": "comm.Allreduce, MPICH's default selection",
        "iters": 20, "max_bytes": 256 << 20, "max_time": 5.0, "warmup": 3, "check": True,
        "algorithms": ["native", "swing-bw"], "host": "h", "date": "d", "python": "3", "numpy": "2",
        "mpi4py": "4", "swing_mpi": "0.1", "command": "python -m mpi4py -m swing_mpi bench"}


def test_env_header_lines():
    text = "\n".join(bench.env_header_lines(_ENV))  # a file from before --collective: allreduce
    assert all(ln.startswith("# ") for ln in text.splitlines())
    for s in ("swing-mpi bench: allreduce, p=4", "dims=2x2", "MPICH Version: 5.0.2", "default selection",
              "busbw = algbw*2(p-1)/p", "against comm.Allreduce and rank 0", "command: python -m mpi4py"):
        assert s in text
    assert "elements per rank" not in text


def test_model_algorithm():
    known = tuple(ALGORITHMS)
    assert model_algorithm(_row("swing-bw"), known) == "swing-bw"
    assert model_algorithm(_row("auto", resolved="swing-lat"), known) == "swing-lat"
    assert model_algorithm(_row("native"), known) is None
    if "ring" in known:
        assert model_algorithm(_row("native", mpich="ring"), known) == "ring"
    assert model_algorithm(_row("native", mpich="recursive_doubling"), known) == "recdoub"


def test_model_times_degrade_gracefully():
    rows = _rows()
    bench.add_model_times(rows, link_bytes_per_s=5e6, alpha=1e-4, warn=lambda m: None)
    assert rows[0]["model_us"] is None  # native with MPICH's default: no model
    try:
        from swing_mpi.model import predict_time  # noqa: F401
    except ImportError:
        return
    assert rows[1]["model_us"] and rows[1]["model_us"] > 0


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    rows = _rows()
    rows[1]["model_us"] = 40.0
    out = bench.plot_results(rows, str(tmp_path / "p.png"), title="t")
    assert Path(out).stat().st_size > 1000


def test_plot_script_merges_files_with_natives_per_size(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_plot", ROOT / "benchmarks" / "plot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    small = [_row("native", size=8, median=10.0), _row("swing-bw", size=8, median=30.0)]
    large = [_row("native", size=8, median=99.0), _row("native", size=2048, median=200.0),
             _row("swing-bw", size=2048, median=100.0)]
    forced = [_row("native", size=4096, median=50.0, label="mpich-ring", mpich="ring"),
              _row("swing-bw", size=4096, median=25.0)]
    for name, rows in (("a", small), ("b", large), ("c", forced)):
        write_json(str(tmp_path / f"{name}.json"), {"p": 4}, rows)
    rows, title = mod.load([str(tmp_path / f"{n}.json") for n in "abc"])
    ratio = {(r["size"], r["label"]): r["vs_native"] for r in rows}
    assert ratio[(8, "swing-bw")] == 3.0  # the first file's native at 8 B, not the second's
    assert [r["vs_native"] for r in rows if r["size"] == 8 and r["label"] == "native"] == [1.0, 9.9]
    assert ratio[(2048, "swing-bw")] == 0.5
    assert ratio[(4096, "swing-bw")] == 0.5  # only a forced MPICH run measured 4 KiB
    assert "p=4" in title


# -- the package: modules, public names ---------------------------------------------------------

BENCH = ROOT / "swing_mpi" / "bench"
MODULES = ("__init__", "cli", "measure", "timing", "memory", "results", "plot")


def test_package_modules_are_small_and_declare_their_names():
    import ast
    import importlib

    for name in MODULES:
        path = BENCH / f"{name}.py"
        assert len(path.read_text().splitlines()) < 600, path
        mod = importlib.import_module("swing_mpi.bench" + ("" if name == "__init__" else f".{name}"))
        assert isinstance(mod.__all__, list) and mod.__all__, name
        for public in mod.__all__:
            assert hasattr(mod, public), f"{name}.__all__ names a missing {public}"
        # no private name crosses a module boundary
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"], \
                    f"{name} imports a private name from {node.module}"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                assert not (node.attr.startswith("_") and not node.attr.startswith("__")
                            and node.value.id in ("api", "measure", "memory", "results", "cli", "plot")), node.attr


def test_package_re_exports_what_callers_use():
    for name in ("add_arguments", "run", "build_parser", "main", "Config", "run_bench", "plot_results",
                 "read_results", "write_csv", "write_json", "add_vs_native", "native_medians", "set_vs_native",
                 "add_model_times", "format_table", "parse_algorithms", "FIELDS", "COLLECTIVES"):
        assert name in bench.__all__ and hasattr(bench, name)
    assert bench.run is bench.cli.run and bench.plot_results is bench.plot.plot_results
    # sizes have one home: the bench no longer re-exports them
    assert not hasattr(bench, "parse_size") and not hasattr(bench, "format_size")


def _run_python(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_importing_the_bench_imports_no_mpi():
    code = ("import sys, swing_mpi.bench, swing_mpi.bench.plot; "
            "assert 'mpi4py.MPI' not in sys.modules, 'mpi4py.MPI imported'; print('ok')")
    r = _run_python("-c", code)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


@pytest.mark.parametrize("entry", [("-m", "swing_mpi", "bench"), ("-m", "swing_mpi.bench"),
                                   ("benchmarks/allreduce.py",)])
def test_entry_points_take_the_same_options(entry):
    r = _run_python(*entry, "--help")
    assert r.returncode == 0, r.stderr
    for opt in ("--collective", "--sizes", "--algorithms", "--dims", "--both", "--blocked", "--batch", "--csv",
                "--json", "--plot", "--model-link", "--model-alpha", "--label", "--quick"):
        assert opt in r.stdout, (entry, opt)
    assert "--model-link-mbps" not in r.stdout  # deprecated spellings work but are not advertised
    # a bad option value is a clear error before any MPI work
    r = _run_python(*entry, "--collective", "allgather", "--op", "max")
    assert r.returncode == 2 and "allgather takes no reduction op" in r.stderr


# -- --collective --------------------------------------------------------------------------------

def test_collectives_and_their_busbw():
    assert list(COLLECTIVES) == ["allreduce", "reduce_scatter_block", "allgather"]
    assert COLLECTIVES["allreduce"].bus_factor(4) == 1.5  # nccl-tests: 2(n-1)/n
    assert COLLECTIVES["reduce_scatter_block"].bus_factor(4) == 0.75  # (n-1)/n
    assert COLLECTIVES["allgather"].bus_factor(4) == 0.75
    assert COLLECTIVES["allgather"].bus_factor(1) == 0.0
    assert not COLLECTIVES["allgather"].reduces and COLLECTIVES["reduce_scatter_block"].reduces


def test_collective_option():
    c = Config(_parse())
    assert c.collective == "allreduce" and c.op == "sum"
    rs = Config(_parse("--collective", "reduce_scatter", "--op", "max", "--dtype", "int32"))
    assert rs.collective == "reduce_scatter_block" and rs.op == "max"  # MPI_Reduce_scatter_block, measured
    assert Config(_parse("--collective", "reduce_scatter_block")).collective == "reduce_scatter_block"  # MPI's name
    ag = Config(_parse("--collective", "allgather", "--dtype", "uint8"))
    assert ag.op == "none"
    with pytest.raises(ValueError, match="allgather takes no reduction op"):
        Config(_parse("--collective", "allgather", "--op", "sum"))
    with pytest.raises(SystemExit):
        _parse("--collective", "reduce-scatter")
    with pytest.raises(ValueError):
        Config(_parse("--collective", "reduce_scatter_block", "--op", "band"))  # bitwise op on float64


def test_algorithms_per_collective_come_from_the_registry():
    for coll in COLLECTIVES:
        family = COLLECTIVES[coll].registry
        marked = [name for name, info in ALGORITHMS.items() if family in info.collectives]
        assert list(bench.registered_algorithms(coll)) == marked
        assert parse_algorithms(None, collective=coll) == ["native"] + marked
        assert parse_algorithms("native,auto", collective=coll) == ["native", "auto"]
    assert bench.registered_algorithms("allreduce") == tuple(ALGORITHMS)
    only_allreduce = [name for name, info in ALGORITHMS.items() if "allgather" not in info.collectives]
    for name in only_allreduce:
        with pytest.raises(ValueError, match="unknown algorithm for allgather"):
            parse_algorithms(name, collective="allgather")
    assert parse_algorithms("x", known=("x",), collective="allgather") == ["x"]


def test_collective_function():
    from swing_mpi.bench.measure import collective_function

    assert collective_function("allreduce").__name__ == "allreduce"
    for name in ("reduce_scatter_block", "allgather"):
        assert collective_function(name).__name__ == name
    with pytest.raises(ValueError, match="swing_mpi.nope does not exist in this version: only --algorithms native"):
        collective_function("nope")


def test_point_sizes():
    # allreduce: whole elements, at least one
    assert point_sizes([1, 8, 12, 1024], 8) == [8, 1024]
    # reduce-scatter / all-gather: whole elements per rank, at least one per rank
    assert point_sizes([8, 1024, 1000], 8, 4, "allgather") == [32, 992, 1024]
    assert point_sizes([8, 16], 4, 3, "reduce_scatter_block") == [12]
    assert point_sizes([1 << 20], 8, 6, "reduce_scatter_block") == [(1 << 20) // 48 * 48]


def test_header_and_rows_of_other_collectives():
    env = dict(_ENV, collective="reduce_scatter_block")
    text = "\n".join(bench.env_header_lines(env))
    assert "swing-mpi bench: reduce_scatter_block, p=4" in text
    assert "busbw = algbw*(p-1)/p" in text and "count = elements per rank" in text
    assert "against comm.Reduce_scatter_block," in text and "rank 0" not in text
    text = "\n".join(bench.env_header_lines(dict(_ENV, collective="allgather")))
    assert "against comm.Allgather and rank 0" in text and "the all-gather output" in text
    row = dict(_row("swing-bw"), collective="allgather")
    assert model_algorithm(row, tuple(ALGORITHMS)) is None  # the model is the allreduce's
    assert collective_of(row) == "allgather" and collective_of(_row("native")) == "allreduce"


def test_old_files_read_as_allreduce(tmp_path):
    rows = _rows()
    path = str(tmp_path / "old.csv")
    write_csv(rows, path, fields=[f for f in bench.FIELDS if f != "collective"])
    _, back = read_results(path)
    assert "collective" not in back[0] and {collective_of(r) for r in back} == {"allreduce"}


# -- the sweep driver (planning only) ----------------------------------------------------------------

def _sweep_module():
    spec = importlib.util.spec_from_file_location("bench_sweep", ROOT / "benchmarks" / "sweep.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_sweep"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_sweep_plan(tmp_path):
    sw = _sweep_module()
    args = sw.build_parser().parse_args(["--dims", "4x4", "--sizes", "1K:16M", "--mpich-algorithms",
                                         "default,ring,recursive_doubling", "--out", str(tmp_path),
                                         "--algorithms", "swing-bw,auto", "--lab", "--", "--iters", "3"])
    launches, np_, dims = sw.plan_launches(args, str(tmp_path))
    assert np_ == 16 and dims == (4, 4)
    assert [L.name for L in launches] == ["main", "mpich-ring", "mpich-recursive_doubling"]
    main = launches[0].bench_argv
    assert main[main.index("--algorithms") + 1] == "native,swing-bw,auto"
    assert main[-2:] == ["--iters", "3"] and "--bw-unit" in main and main[main.index("--bw-unit") + 1] == "MB"
    ring = launches[1]
    assert ring.env == {"MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM": "ring"}
    assert ring.bench_argv[ring.bench_argv.index("--label") + 1] == "mpich-ring"
    assert ring.bench_argv[ring.bench_argv.index("--algorithms") + 1] == "native"
    cmd = sw.bench_command("python", main)
    assert cmd[:6] == ["python", "-m", "mpi4py", "-m", "swing_mpi", "bench"]
    bad = sw.build_parser().parse_args(["--np", "4", "--dims", "4x4", "--out", str(tmp_path)])
    with pytest.raises(ValueError):
        sw.plan_launches(bad, str(tmp_path))
    bad = sw.build_parser().parse_args(["--mpich-algorithms", "nope", "--out", str(tmp_path)])
    with pytest.raises(ValueError):
        sw.plan_launches(bad, str(tmp_path))


def test_sweep_merge(tmp_path):
    sw = _sweep_module()
    args = sw.build_parser().parse_args(["--np", "4", "--mpich-algorithms", "default,ring", "--out", str(tmp_path)])
    launches, _, _ = sw.plan_launches(args, str(tmp_path))
    write_json(launches[0].json, {"p": 4}, [_row("native", median=100.0), _row("swing-bw", median=50.0)])
    write_json(launches[1].json, {"p": 4}, [_row("native", median=300.0, label="mpich-ring", mpich="ring")])
    envs, rows = sw.merge(launches)
    assert set(envs) == {"main", "mpich-ring"}
    assert [(r["label"], r["vs_native"]) for r in rows] == [("native", 1.0), ("swing-bw", 0.5), ("mpich-ring", 3.0)]


def test_sweep_dry_run(tmp_path, capsys):
    sw = _sweep_module()
    rc = sw.main(["--np", "4", "--dims", "2x2", "--sizes", "8:64", "--mpich-algorithms", "default,ring",
                  "--out", str(tmp_path), "--dry-run"])
    assert rc == 0
    text = (tmp_path / "commands.txt").read_text()
    assert "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring" in text and "MPIEXEC_TIMEOUT=" in text
    assert text.count("-m mpi4py -m swing_mpi bench") == 2
    assert json.dumps(text)  # plain text


def test_sweep_dry_run_in_a_lab_names_the_labs_settings(tmp_path):
    sw = _sweep_module()
    rc = sw.main(["--dims", "2x2", "--sizes", "1K", "--lab", "--burst-kib", "128", "--out", str(tmp_path), "--dry-run"])
    assert rc == 0
    text = (tmp_path / "commands.txt").read_text()
    assert "burst 128 KiB" in text and "-m swing_mpi lab --dims 2x2 --link 40M --mtu 65000 --burst-kib 128 " in text
    other = tmp_path / "bad"
    bad = ["--dims", "2x2", "--sizes", "1K", "--lab", "--burst-kib", "16", "--out", str(other), "--dry-run"]
    assert sw.main(bad) == 2  # 16 KiB is less than the MTU: refused before anything is written
    assert not (other / "commands.txt").exists()


def test_sweep_says_how_the_bench_timed_each_call():
    sw = _sweep_module()
    assert sw.timing_line({}) == ""
    assert sw.timing_line({"start": "barrier", "start_why": "asked"}) == (
        "# each call timed: every rank times from its own exit of a barrier; max over ranks\n")
    line = sw.timing_line({"start": "sync", "start_why": "one host, 16 ranks that wait sleeping (backoff)",
                           "start_lead_s": 0.05})
    assert line == ("# each call timed: every rank starts at one instant agreed after the barrier (50 ms ahead) and "
                    "times from it (one host's clock, --start auto: one host, 16 ranks that wait sleeping (backoff)); "
                    "max over ranks\n")
