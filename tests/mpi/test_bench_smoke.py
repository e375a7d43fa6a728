"""The benchmark end to end under mpiexec (tiny sizes, two algorithms).

mpiexec -n 4 python -m pytest --with-mpi tests/mpi/test_bench_smoke.py
"""

from __future__ import annotations

import csv
import json

import pytest

pytestmark = pytest.mark.mpi


def _data_lines(text: str):
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


@pytest.mark.mpi(min_size=1)
def test_bench_table_and_files(mpi_tmp_path, capsys):
    from mpi4py import MPI

    from swing_mpi import bench

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    out = mpi_tmp_path
    argv = ["--sizes", "8,1K,2M", "--algorithms", "native,swing-bw", "--iters", "3", "--warmup", "1", "--both",
            "--csv", str(out / "b.csv"), "--json", str(out / "b.json"), "--quiet"]
    rc = bench.main(argv)
    captured = capsys.readouterr().out
    assert rc == 0  # every rank: nothing wrong
    comm.Barrier()
    if comm.Get_rank() != 0:
        assert captured == ""  # only rank 0 prints
        return
    rows = _data_lines(captured)
    assert len(rows) == 3 * 2 * 2  # sizes x places x algorithms (2 MiB: arrays shared by the algorithms)
    for ln in rows:
        assert ln.split()[-1] == "0", ln  # #wrong
    assert f"p={p}" in captured and "MPI:" in captured and "command:" in captured
    assert "Out of bounds values : 0 OK" in captured
    assert "\x00" not in captured  # (Open MPI's library version string ends in a NUL)
    with open(out / "b.json") as f:
        data = json.load(f)
    assert data["env"]["p"] == p and data["env"]["mpi_library"]
    assert "\x00" not in data["env"]["mpi_library"] + data["env"]["mpi_library_full"]
    assert len(data["rows"]) == 12
    for r in data["rows"]:
        assert r["wrong"] == 0 and r["iters"] == 3 and len(r["times_us"]) == 3
        assert r["time_min_us"] <= r["time_median_us"] <= r["time_max_us"]
        assert r["algbw_Bps"] > 0
        if r["algorithm"] == "native":
            assert r["vs_native"] == 1.0
    with open(out / "b.csv", newline="") as f:
        crow = list(csv.DictReader(f))
    assert len(crow) == 12 and {r["place"] for r in crow} == {"out", "in"}
    assert {int(r["size"]) for r in crow} == {8, 1024, 2 << 20}


def _broken(real, target, corrupt):
    """Wrap ``collective_call`` so that ``target`` runs and then ``corrupt(comm, recv)`` spoils it."""
    def call(comm_, mpi_op, alg, dims, pt, send, recv, ours=None):
        inner = real(comm_, mpi_op, alg, dims, pt, send, recv, ours)
        if alg != target:
            return inner

        def run():
            inner()
            corrupt(comm_, recv)
        return run
    return call


def _config(*argv):
    from swing_mpi import bench

    return bench.Config(bench.build_parser().parse_args(list(argv)))


@pytest.mark.mpi(min_size=2)
def test_bench_counts_wrong_results(monkeypatch):
    """A broken algorithm is caught: #wrong counts the bad elements over all ranks."""
    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import measure

    def two_on_rank_1(comm_, recv):
        if comm_.Get_rank() == 1:
            recv[:2] += 1

    monkeypatch.setattr(measure, "collective_call", _broken(measure.collective_call, "swing-lat", two_on_rank_1))
    cfg = _config("--sizes", "64", "--algorithms", "native,swing-lat", "--iters", "3", "--warmup", "0", "--blocked")
    env, rows = bench.run_bench(MPI.COMM_WORLD, cfg)
    wrong = {r["algorithm"]: r["wrong"] for r in rows}
    # two elements on rank 1, each both off the reference and unlike rank 0's: counted once
    assert wrong == {"native": 0, "swing-lat": 2}


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("place", ["--inplace", "--both"])
def test_bench_batch_times_back_to_back_calls(monkeypatch, place):
    """``--batch K``: an iteration is K calls from one barrier, timed per call; the check call stays one call."""
    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import measure
    from swing_mpi.bench.results import env_header_lines

    calls: dict[tuple[str, str], int] = {}
    real = measure.collective_call

    def counting(comm_, mpi_op, alg, dims, pt, send, recv, ours=None):
        inner = real(comm_, mpi_op, alg, dims, pt, send, recv, ours)

        def run():
            calls[alg, pt.place] = calls.get((alg, pt.place), 0) + 1
            inner()
        return run

    monkeypatch.setattr(measure, "collective_call", counting)
    cfg = _config("--sizes", "1K", "--algorithms", "native,swing-bw", "--iters", "2", "--warmup", "1",
                  "--batch", "3", place)
    env, rows = bench.run_bench(MPI.COMM_WORLD, cfg)
    assert env["batch"] == 3
    assert any("3 back-to-back calls from one barrier" in ln for ln in env_header_lines(env))
    places = ["in"] if place == "--inplace" else ["out", "in"]
    # one checked call, one warmup, then 2 iterations of 3 calls each
    assert calls == {(a, pl): 1 + 1 + 2 * 3 for a in ("native", "swing-bw") for pl in places}
    for r in rows:
        assert r["wrong"] == 0 and r["iters"] == 2 and len(r["times_us"]) == 2


@pytest.mark.mpi(min_size=1)
def test_bench_sync_start_times_from_the_agreed_instant(monkeypatch):
    """``--start sync``: every timed call starts at the instant all ranks agreed on, and is timed from it."""
    import time

    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import measure
    from swing_mpi.bench.results import env_header_lines

    instants: list[float] = []

    class Early(measure.SyncStart):
        def __call__(self) -> float:
            t = super().__call__()
            assert time.perf_counter() >= t  # never before the instant
            instants.append(t)
            return t - 0.05  # an instant 50 ms earlier: every time must then carry those 50 ms

    monkeypatch.setattr(measure, "SyncStart", Early)
    cfg = _config("--sizes", "1K", "--algorithms", "native,swing-bw", "--iters", "3", "--warmup", "1",
                  "--start", "sync")
    env, rows = bench.run_bench(MPI.COMM_WORLD, cfg)
    assert env["start"] == "sync" and env["start_lead_s"] >= 1e-3
    assert any("one instant agreed after the barrier" in ln for ln in env_header_lines(env))
    assert len(instants) == 6  # the timed calls only: 2 algorithms x 3 iterations
    assert MPI.COMM_WORLD.allgather(instants) == [instants] * MPI.COMM_WORLD.Get_size()  # one instant for all
    for r in rows:
        assert r["wrong"] == 0 and len(r["times_us"]) == 3
        assert min(r["times_us"]) >= 50e3


@pytest.mark.mpi(min_size=2)
def test_bench_sync_start_needs_one_host(monkeypatch):
    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import timing

    comm = MPI.COMM_WORLD
    monkeypatch.setattr(timing.socket, "gethostname", lambda: f"node{comm.Get_rank()}")
    with pytest.raises(ValueError, match="one clock for all ranks.*--start barrier"):
        timing.SyncStart(comm)

    args = bench.build_parser().parse_args([])
    args.start = "now"  # as a program building the options itself could
    with pytest.raises(ValueError, match="--start 'now': expected one of auto, barrier, sync"):
        bench.Config(args)


@pytest.mark.mpi(min_size=2)
def test_bench_auto_start_syncs_only_ranks_that_wait_sleeping_on_one_host(monkeypatch):
    """``--start auto``: sync where all ranks share a host and wait sleeping (the lab); a barrier otherwise."""
    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import measure, timing
    from swing_mpi.config import rc

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    monkeypatch.setattr(rc, "wait", "backoff")
    assert timing.auto_start(comm) == ("sync", f"one host, {p} ranks that wait sleeping (backoff)")
    for mode in ("yield", "spin"):
        monkeypatch.setattr(rc, "wait", mode)
        assert timing.auto_start(comm) == ("barrier", f"one host, ranks that wait with {mode}")
    monkeypatch.setattr(rc, "wait", "backoff" if comm.Get_rank() else "yield")  # not all alike: a barrier
    assert timing.auto_start(comm) == ("barrier", "one host, ranks that wait with backoff/yield")
    monkeypatch.setattr(rc, "wait", "backoff")
    monkeypatch.setattr(timing.socket, "gethostname", lambda: f"node{comm.Get_rank() % 2}")
    assert timing.auto_start(comm) == ("barrier", "2 hosts")
    monkeypatch.undo()

    picked: list[str] = []
    monkeypatch.setattr(measure, "auto_start", lambda c: (picked.append("auto"), ("sync", "a test"))[1])
    env, rows = bench.run_bench(comm, _config("--sizes", "1K", "--algorithms", "swing-bw", "--iters", "2",
                                              "--warmup", "0"))
    assert picked == ["auto"] and env["start"] == "sync" and env["start_why"] == "a test"
    assert env["start_lead_s"] >= 1e-3 and all(r["wrong"] == 0 for r in rows)
    env, _ = bench.run_bench(comm, _config("--sizes", "1K", "--algorithms", "swing-bw", "--iters", "2",
                                           "--warmup", "0", "--start", "barrier"))
    assert picked == ["auto"] and env["start"] == "barrier" and env["start_lead_s"] is None


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("wait", ["yield", "backoff"])
def test_bench_barrier_holds_every_rank_until_the_last_arrives(monkeypatch, wait):
    """The bench's barrier (a nonblocking one waited on sleeping under ``backoff``) is still a barrier."""
    import time

    from mpi4py import MPI

    from swing_mpi import rc, waiting
    from swing_mpi.bench import timing

    comm = MPI.COMM_WORLD
    monkeypatch.setattr(rc, "wait", wait)
    used = []
    monkeypatch.setattr(waiting, "wait_all", lambda reqs, *a, _f=waiting.wait_all: used.append(reqs) or _f(reqs, *a))
    for late in range(min(comm.Get_size(), 3)):
        timing.barrier(comm)
        entered = 0.0
        if comm.Get_rank() == late:
            time.sleep(0.1)
            entered = time.perf_counter()
        timing.barrier(comm)
        left = time.perf_counter()
        assert left >= comm.bcast(entered, root=late)  # nobody left before the late rank came (one host's clock)
    assert bool(used) is (wait == "backoff")


# -- reduce-scatter and all-gather -----------------------------------------------------------------

COLLECTIVES = ("reduce_scatter_block", "allgather")


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_bench_collective_native(collective, dtype, mpi_tmp_path, capsys):
    """``--collective`` measures MPI's own reduce-scatter / all-gather: sizes, counts, busbw, #wrong."""
    from mpi4py import MPI

    from swing_mpi import bench

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    isz = 4 if dtype == "int32" else 8
    out = mpi_tmp_path / f"{collective}-{dtype}.json"
    # 8 B is less than one element per rank for p > 2: it becomes one element per rank
    rc = bench.main(["--collective", collective, "--sizes", "8,1K,24K", "--algorithms", "native", "--dtype", dtype,
                     "--iters", "3", "--warmup", "1", "--both", "--json", str(out), "--quiet"])
    captured = capsys.readouterr().out
    assert rc == 0
    comm.Barrier()
    if comm.Get_rank() != 0:
        assert captured == ""
        return
    assert f"swing-mpi bench: {collective}, p={p}" in captured
    assert "busbw = algbw*(p-1)/p" in captured
    with open(out) as f:
        data = json.load(f)
    assert data["env"]["collective"] == collective
    rows = data["rows"]
    sizes = sorted({r["size"] for r in rows})
    expected = sorted({max(1, n // (isz * p)) * isz * p for n in (8, 1024, 24 << 10)})
    assert sizes == expected and data["env"]["sizes"] == expected
    assert len(rows) == 2 * len(sizes) == len(_data_lines(captured))
    for r in rows:
        assert r["collective"] == collective and r["wrong"] == 0 and r["vs_native"] == 1.0
        assert r["count"] * p * isz == r["size"]  # count: elements per rank (nccl-tests)
        assert r["redop"] == ("sum" if collective == "reduce_scatter_block" else "none")
        assert r["busbw_Bps"] == pytest.approx(r["algbw_Bps"] * (p - 1) / p)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("place", ["out", "in"])
def test_bench_collective_counts_wrong(collective, place, monkeypatch):
    """A spoiled reduce-scatter / all-gather result is counted, in and out of place."""
    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import measure

    comm = MPI.COMM_WORLD
    p = comm.Get_size()

    def spoil(comm_, recv):
        if comm_.Get_rank() == 1:
            recv[:3] += 1  # the reduce-scatter's result is the first block (in place too)

    monkeypatch.setattr(measure, "collective_call", _broken(measure.collective_call, "native", spoil))
    argv = ["--collective", collective, "--sizes", str(8 * 4 * p), "--algorithms", "native", "--iters", "2",
            "--warmup", "0", "--dtype", "int64"] + (["--inplace"] if place == "in" else [])
    _, rows = bench.run_bench(comm, _config(*argv))
    assert [r["wrong"] for r in rows] == [3]


@pytest.mark.mpi(min_size=2)
def test_bench_allgather_in_place_checks_every_block(monkeypatch):
    """An in-place all-gather that never writes the other ranks' blocks is caught (they start poisoned)."""
    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import measure

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    real = measure.collective_call

    def lazy(comm_, mpi_op, alg, dims, pt, send, recv, ours=None):
        real(comm_, mpi_op, alg, dims, pt, send, recv, ours)  # built, never run
        return lambda: None

    monkeypatch.setattr(measure, "collective_call", lazy)
    block = 5
    cfg = _config("--collective", "allgather", "--sizes", str(8 * block * p), "--algorithms", "native",
                  "--iters", "1", "--warmup", "0", "--inplace")
    _, rows = bench.run_bench(comm, cfg)
    assert rows[0]["count"] == block
    # every rank: the p-1 blocks of the others are off the reference; ranks other than 0 also hold
    # their own block unlike rank 0's (still poisoned there): (p-1) + (p-1)·p blocks in all
    assert rows[0]["wrong"] == (p - 1) * (p + 1) * block


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_bench_collective_ours(collective, dtype):
    """Our reduce-scatter / all-gather against MPI's: every algorithm the registry marks, #wrong = 0."""
    from mpi4py import MPI

    from swing_mpi import bench

    comm = MPI.COMM_WORLD
    algorithms = bench.registered_algorithms(collective)
    assert algorithms, f"the registry marks no algorithm for {collective}"
    argv = ["--collective", collective, "--sizes", "8,4K,40K", "--iters", "2", "--warmup", "1", "--both",
            "--dtype", dtype, "--algorithms", ",".join(("native", "auto") + algorithms), "--quiet"]
    env, rows = bench.run_bench(comm, _config(*argv))
    assert {r["algorithm"] for r in rows} == {"native", "auto", *algorithms}
    assert {r["resolved"] for r in rows if r["algorithm"] == "auto"} <= {"native", *algorithms}  # what auto ran
    bad = {(r["algorithm"], r["size"], r["place"]): r["wrong"] for r in rows if r["wrong"] != 0}
    assert not bad


def test_bench_node_env_places_our_collectives(monkeypatch, capsys):
    """``--node-env VAR``: each rank's torus node from ``$VAR``; ours run on Intracomm(coords=...), results right."""
    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import measure

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    node = (r * 3 + 1) % p if p % 3 else (p - 1 - r)  # a permutation that is not the identity (p > 1)
    monkeypatch.setenv("SWING_TEST_NODE", str(node))
    seen = []
    real = measure.placed_comm

    def spy(comm_, dims, node_env):
        got = real(comm_, dims, node_env)
        seen.append(got)
        return got

    monkeypatch.setattr(bench.cli, "placed_comm", spy)
    rc = bench.main(["--sizes", "8,64K", "--algorithms", "native,swing-bw,ring", "--iters", "2", "--warmup", "1",
                     "--dims", str(p), "--node-env", "SWING_TEST_NODE", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0
    assert seen and seen[0].swing_placement == (None if p == 1 else tuple(comm.allgather(node)))
    if r == 0:
        for ln in _data_lines(out):
            assert ln.split()[-1] == "0", ln
    monkeypatch.delenv("SWING_TEST_NODE")
    rc = bench.main(["--sizes", "8", "--algorithms", "swing-bw", "--dims", str(p), "--node-env", "SWING_TEST_NODE",
                     "--quiet"])
    assert rc == 2
    assert "SWING_TEST_NODE is not set" in capsys.readouterr().err or r != 0


@pytest.mark.mpi(min_size=2)
def test_bench_leaves_out_what_does_not_fit_in_memory(monkeypatch, capsys):
    """A point whose buffers would not fit the node drops the hungriest algorithms (never native).

    It says so, drops them at the larger sizes too, and does the same on every rank.
    """
    from mpi4py import MPI

    from swing_mpi import bench
    from swing_mpi.bench import memory

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    real = memory.work_bytes

    def hungry(name, *args):  # swing-lat ten times as hungry as it is: at 1 MiB it needs more than the budget
        return real(name, *args) * (10 if name == "swing-lat" else 1)

    monkeypatch.setattr(memory, "work_bytes", hungry)
    monkeypatch.setattr(memory, "memory_budget", lambda comm_: (16 << 20, 8, 80 << 20))
    env, rows = bench.run_bench(comm, _config("--sizes", "64K,1M,2M", "--algorithms", "native,swing-lat,swing-bw",
                                              "--iters", "2", "--warmup", "0", "--quiet"))
    got = {(r["size"], r["algorithm"]) for r in rows}
    assert all(r["wrong"] == 0 for r in rows)
    assert real("swing-lat", (p,), 0, 1 << 20, 8, False) >= p << 20  # its contributions form: p copies
    assert (64 << 10, "swing-lat") in got
    assert (1 << 20, "swing-lat") not in got and (2 << 20, "swing-lat") not in got
    assert {(1 << 20, "native"), (2 << 20, "native"), (1 << 20, "swing-bw")} <= got
    assert [x["algorithm"] for x in env["left_out"]] == ["swing-lat"]
    assert "1 MiB: needs about" in env["left_out"][0]["why"]
    assert comm.allgather(sorted(got)) == [sorted(got)] * p


@pytest.mark.mpi(min_size=1)
def test_memory_budget_counts_every_rank_of_the_machine():
    """Ranks of one machine share its memory however MPI groups them (the lab puts each in its own namespace)."""
    from mpi4py import MPI

    from swing_mpi.bench import memory

    comm = MPI.COMM_WORLD
    budget = memory.memory_budget(comm)
    assert budget is not None  # Linux: /proc/meminfo
    per_rank, ranks, avail = budget
    assert ranks == comm.Get_size()  # the tests run on one machine
    assert per_rank == int(memory.MEMORY_SHARE * avail / ranks)
    assert comm.allgather(budget) == [budget] * comm.Get_size()
