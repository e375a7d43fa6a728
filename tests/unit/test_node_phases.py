"""Many ranks per node: the node phases of swing_mpi.model.node_phases, and --ranks-per-node in model and simulate."""

from __future__ import annotations

import math
import re

import pytest

from swing_mpi.model import analyze
from swing_mpi.model.cli import main as model_main
from swing_mpi.model.node_phases import (
    NodeCosts,
    NodePhases,
    barrier_s,
    binomial_pairs,
    c_node_phases,
    chunk_lanes,
    flat_steps,
    flat_time,
    leader_phases,
    model_c_node_aware,
    model_forms,
    parse_byte_rate,
)
from swing_mpi.netsim import simgrid_available

RATE = 50e9
ALPHA = 1.5e-6


def test_one_rank_per_node_is_todays_allreduce_exactly():
    nc = NodeCosts(1)
    for n in (32, 4096, 1 << 20, 512 << 20):
        assert leader_phases(n, nc) == NodePhases() and c_node_phases(n, nc) == NodePhases()
        for alg in ("swing-bw", "swing-lat", "bucket"):
            today = analyze(alg, (8, 8)).time(n, alpha=ALPHA, link_bytes_per_s=RATE)
            f = model_forms(alg, (8, 8), n, nc, alpha=ALPHA, link_bytes_per_s=RATE)
            assert f["multi_leader_s"] == today and f["single_leader_s"] == today and f["flat_s"] == today
        best = min(analyze(a, (8, 8)).time(n, alpha=ALPHA, link_bytes_per_s=RATE)
                   for a in ("recdoub", "rabenseifner", "ring"))
        assert model_c_node_aware((8, 8), n, nc, alpha=ALPHA, link_bytes_per_s=RATE)["c_node_aware_s"] == best
    assert barrier_s(nc) == 0.0


def test_a_hand_computed_node():
    """K = 4, 1 MiB, 100 GB/s, γ = 0.1 ns/B, no cache, 100 ns a barrier round."""
    nc = NodeCosts(4, memory_bytes_per_s=100e9, gamma_s_per_byte=1e-10, c_gamma_s_per_byte=1e-10, sync_s=100e-9,
                   cache_bytes=0)
    n = 1 << 20
    copy = max(n * 2e-10 / 3, 4 * n * 2 / 100e9)  # four cores copy 1 MiB each: the memory's 8 MiB is slower
    red = max(3 * (n // 4) * 1e-10, 4 * 3 * (n // 4) * 3 / 100e9)  # 3 reductions of 256 KiB on each core
    assert copy == pytest.approx(83.886e-6, rel=1e-4) and red == pytest.approx(94.372e-6, rel=1e-4)
    ph = leader_phases(n, nc)
    assert ph.copy_in_s == pytest.approx(copy) and ph.reduce_s == pytest.approx(red)
    assert ph.copy_out_s == pytest.approx(copy) and ph.barriers_s == pytest.approx(2 * 2 * 100e-9)
    assert ph.total_s == pytest.approx(262.544e-6, rel=1e-4)
    assert leader_phases(n, nc, single=True).total_s == pytest.approx(ph.total_s + 200e-9)
    # the C MPI: binomial reduce (2 pairs, then 1) and broadcast (1, then 2), one core reducing per pair
    c = c_node_phases(n, nc)
    assert c.reduce_s == pytest.approx(max(n * 1e-10, 2 * 5 * n / 100e9) + max(n * 1e-10, 5 * n / 100e9))
    assert c.copy_out_s == pytest.approx(max(n * 2e-10 / 3, 4 * n / 100e9) + max(n * 2e-10 / 3, 2 * 4 * n / 100e9))
    assert c.barriers_s == pytest.approx(4 * 100e-9)


def test_a_vector_that_fits_the_cache_runs_at_its_cores_rate():
    nc = NodeCosts(4, memory_bytes_per_s=1e9, gamma_s_per_byte=1e-10, cache_bytes=1 << 20)
    n = 64 << 10  # 2·4·64 KiB = 512 KiB fits
    assert leader_phases(n, nc).copy_in_s == pytest.approx(n * 2e-10 / 3)
    assert leader_phases(4 * n, nc).copy_in_s == pytest.approx(4 * 4 * n * 2 / 1e9)  # 2 MiB does not


def test_binomial_rounds_and_chunks():
    assert binomial_pairs(2) == [1] and binomial_pairs(4) == [2, 1] and binomial_pairs(5) == [2, 1, 1]
    assert len(binomial_pairs(48)) == math.ceil(math.log2(48))
    nc = NodeCosts(48)
    assert chunk_lanes(32, nc) == (8, 4)  # 8 floats: 8 ranks of 48 get one each
    assert chunk_lanes(48 * 4 * 10 + 4, nc) == (48, 44)  # 481 floats: chunks of 11 at most
    assert chunk_lanes(0, nc) == (0, 0)
    assert barrier_s(nc) == pytest.approx(6 * 100e-9)


def test_node_phases_grow_with_the_vector_the_ranks_and_a_slower_memory():
    sizes = [1 << e for e in range(5, 30, 3)]
    for k in (2, 4, 16, 48):
        nc = NodeCosts(k)
        for fn in (lambda n, c: leader_phases(n, c).total_s, lambda n, c: c_node_phases(n, c).total_s):
            t = [fn(n, nc) for n in sizes]
            assert all(a <= b for a, b in zip(t, t[1:]))
    n = 64 << 20
    for fn in (leader_phases, c_node_phases):
        t = [fn(n, NodeCosts(k)).total_s for k in (2, 4, 8, 16, 48)]
        assert all(a < b for a, b in zip(t, t[1:]))
        assert fn(n, NodeCosts(8, memory_bytes_per_s=50e9)).total_s > fn(n, NodeCosts(8)).total_s


def test_the_flat_torus_puts_the_nodes_ranks_on_its_links():
    """The torus dims + (K,): K ranks share each node's links, so the wire carries more than one rank puts there."""
    one = analyze("swing-bw", (4, 4)).load()
    for k in (2, 4):
        steps = flat_steps("swing-bw", (4, 4), k)
        assert sum(s.network for s in steps) > one
        assert any(s.node_memory > 0 for s in steps) and all(s.network > 0 or s.hops == 0 for s in steps)
    nc = NodeCosts(4, cache_bytes=0)
    steps = flat_steps("swing-bw", (4, 4), 4)
    t = [flat_time(steps, n, nc, alpha_s=ALPHA, link_bytes_per_s=RATE) for n in (32, 1 << 20, 64 << 20)]
    assert t[0] >= len(steps) * ALPHA and t[0] < t[1] < t[2]


def test_memory_bandwidth_is_written_in_bytes_per_second():
    assert parse_byte_rate("200GB/s") == 200e9 and parse_byte_rate("1.5TB/s") == 1.5e12
    assert parse_byte_rate("80GBps") == 80e9
    for bad in ("200G", "200", "200Gb/s", "0GB/s", "fast"):
        with pytest.raises(ValueError, match="--node-memory"):
            parse_byte_rate(bad, "--node-memory")


def test_model_with_one_rank_per_node_prints_what_it_printed(capsys):
    argv = ["--dims", "8x8", "-a", "swing-bw,swing-lat", "--size", "1M"]
    def strip(text: str) -> str:  # the seconds the model took differ from run to run
        return re.sub(r"\d+\.\d+ s\)", "s)", text)

    assert model_main(argv) == 0
    before = capsys.readouterr().out
    assert model_main(argv + ["--ranks-per-node", "1", "--node-memory", "1GB/s"]) == 0
    assert strip(capsys.readouterr().out) == strip(before)
    assert "ranks per node" not in before


def test_model_prices_the_four_forms(capsys):
    assert model_main(["--dims", "8x8", "-a", "swing-bw", "--ranks-per-node", "4", "--size", "1M",
                       "--node-memory", "100GB/s"]) == 0
    out = capsys.readouterr().out
    assert "4 ranks per node" in out and "flat is the torus 8x8x4" in out and "c-node-aware" in out
    assert "100 GB/s" in out
    assert model_main(["--dims", "8x8", "--ranks-per-node", "4", "--node-memory", "100G"]) == 2
    assert model_main(["--dims", "8x8", "--ranks-per-node", "0"]) == 2


@pytest.mark.skipif(not simgrid_available()[0], reason="SimGrid missing")
def test_simulate_prices_the_forms_on_a_small_torus(capsys):
    import json

    from swing_mpi.netsim.cli import main as sim_main

    assert sim_main(["--dims", "4x4", "--ranks-per-node", "2", "--sizes", "1M", "-a", "swing-bw", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    forms = {r["form"]: r for r in rows}
    assert set(forms) == {"multi-leader", "single-leader", "flat", "c-node-aware"}
    assert forms["flat"]["how"] == "model" and forms["multi-leader"]["how"] == "simulated"
    for r in rows:
        assert r["time_s"] == pytest.approx(r["node_s"] + r["network_s"])
    assert forms["multi-leader"]["lanes"] == 2 and forms["multi-leader"]["chunk_bytes"] == 1 << 19


@pytest.mark.skipif(not simgrid_available()[0], reason="SimGrid missing")
def test_one_lane_at_a_share_of_the_links_is_the_nodes_lanes():
    """What simulate's multi-leader rests on: L identical lanes on links of rate R take what one takes at R/L."""
    from dataclasses import replace

    from swing_mpi.netsim import SimParams
    from swing_mpi.netsim.run import simulate_transfers

    p = SimParams()
    msgs = [(0, 1, 1 << 20), (1, 2, 1 << 20), (2, 0, 3 << 18)]
    for lanes in (2, 4):
        together = simulate_transfers("3", {(lane, 0): msgs for lane in range(lanes)}, params=p)
        one = simulate_transfers("3", {(0, 0): msgs}, params=replace(p, link_bps=p.link_bps / lanes))
        assert together["time_s"] == pytest.approx(one["time_s"], rel=1e-9)
