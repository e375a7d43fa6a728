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
    with open(out / "b.json") as f:
        data = json.load(f)
    assert data["env"]["p"] == p and data["env"]["mpi_library"]
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


@pytest.mark.mpi(min_size=2)
def test_bench_counts_wrong_results(monkeypatch):
    """A broken algorithm is caught: #wrong counts the bad elements over all ranks."""
    from mpi4py import MPI

    from swing_mpi import bench

    comm = MPI.COMM_WORLD
    real = bench._call

    def broken(comm_, mpi_op, alg, dims, pt, send, recv):
        call = real(comm_, mpi_op, alg, dims, pt, send, recv)
        if alg == "native":
            return call

        def run():
            call()
            if comm_.Get_rank() == 1:
                recv[:2] += 1  # two wrong elements on rank 1
        return run

    monkeypatch.setattr(bench, "_call", broken)
    cfg = bench.Config(bench.build_parser().parse_args(
        ["--sizes", "64", "--algorithms", "native,swing-lat", "--iters", "3", "--warmup", "0", "--blocked"]))
    env, rows = bench.run_bench(comm, cfg)
    wrong = {r["algorithm"]: r["wrong"] for r in rows}
    # two elements on rank 1, each both off the reference and unlike rank 0's: counted once
    assert wrong == {"native": 0, "swing-lat": 2}
