"""The SimGrid simulator of our schedules: exact times on small tori, routing, semantics, the model."""

from __future__ import annotations

import itertools
import math

import pytest

from swing_mpi.config import rc
from swing_mpi.netsim import SimParams, simgrid_available, simulate
from swing_mpi.netsim.network import Network

OK, WHY = simgrid_available()
pytestmark = pytest.mark.skipif(not OK, reason=f"SimGrid missing: {WHY}")

BW = 1e9  # bytes per second
LINK = 1.5e-6  # seconds per link: 1 µs wire + 0.5 µs router
P0 = SimParams(link_bps=8 * BW, latency_s=1e-6, hop_s=0.5e-6, alpha_s=0.0)
MB = 1_000_000


def run(dims, steps, params=P0, **kw):
    from swing_mpi.netsim.run import simulate_transfers

    return simulate_transfers(dims, steps, params=params, **kw)["time_s"]


@pytest.mark.parametrize("dims,src,dst,hops", [((8,), 0, 3, 3), ((8,), 0, 4, 4), ((8,), 0, 7, 1),
                                                ((4, 4), 0, 6, 3), ((3, 5), 14, 0, 2), ((2, 2, 2), 0, 7, 3)])
def test_one_message_over_k_hops(dims, src, dst, hops):
    assert run(dims, {(0, 0): [(src, dst, MB)]}) == pytest.approx(hops * LINK + MB / BW, rel=1e-9)


def test_two_flows_share_a_link():
    p = SimParams(link_bps=8 * BW, latency_s=0.0, hop_s=0.0, alpha_s=0.0)
    assert run((8,), {(0, 0): [(1, 2, MB)]}, p) == pytest.approx(MB / BW, rel=1e-9)
    assert run((8,), {(0, 0): [(0, 2, MB), (1, 2, MB)]}, p) == pytest.approx(2 * MB / BW, rel=1e-9)


def test_two_directions_of_a_link_do_not_share():
    p = SimParams(link_bps=8 * BW, latency_s=0.0, hop_s=0.0, alpha_s=0.0)
    assert run((8,), {(0, 0): [(0, 1, MB), (1, 0, MB)]}, p) == pytest.approx(MB / BW, rel=1e-9)


def test_alpha_and_gamma():
    p = SimParams(link_bps=8 * BW, latency_s=1e-6, hop_s=0.5e-6, alpha_s=5e-6, gamma_s_per_byte=1e-9)
    # alpha before the step's sends; gamma only for the bytes the receiver reduces
    assert run((8,), {(0, 0): [(0, 1, MB)]}, p) == pytest.approx(5e-6 + LINK + MB / BW, rel=1e-9)
    t = run((8,), {(0, 0): [(0, 1, MB)]}, p, reduce_bytes={(0, 0, 1): MB})
    assert t == pytest.approx(5e-6 + LINK + MB / BW + MB * 1e-9, rel=1e-9)


def test_a_lane_step_waits_for_its_receives():
    # rank 1 forwards at step 1 only once step 0's message is in
    t = run((8,), {(0, 0): [(0, 1, MB)], (0, 1): [(1, 2, MB)]})
    assert t == pytest.approx(2 * (LINK + MB / BW), rel=1e-9)
    p = SimParams(link_bps=8 * BW, latency_s=1e-6, hop_s=0.5e-6, alpha_s=2e-6)
    t = run((8,), {(0, 0): [(0, 1, MB)], (0, 1): [(1, 2, MB)]}, p)
    assert t == pytest.approx(2 * (2e-6 + LINK + MB / BW), rel=1e-9)


def test_lanes_of_a_rank_share_its_cpu_or_not():
    steps = {(0, 0): [(0, 1, 1000)], (1, 0): [(0, 7, 1000)]}
    lane = SimParams(link_bps=8 * BW, latency_s=0.0, hop_s=0.0, alpha_s=1e-5, cpu="lane")
    rank = SimParams(link_bps=8 * BW, latency_s=0.0, hop_s=0.0, alpha_s=1e-5, cpu="rank")
    assert run((8,), steps, lane) == pytest.approx(1e-5 + 1e-6, rel=1e-9)
    assert run((8,), steps, rank) == pytest.approx(2e-5 + 1e-6, rel=1e-9)


def test_lockstep_lanes_wait_for_each_other():
    # lane 0 sends 1 MB at step 0; lane 1 sends 0.1 MB at steps 0 and 1. Free lanes: lane 1 is done
    # long before lane 0 (1 ms). In lockstep (the executor's rounds) lane 1's step 1 waits for lane 0's
    # step 0 to finish, then takes its 0.1 ms.
    steps = {(0, 0): [(0, 1, MB)], (1, 0): [(0, 7, MB // 10)], (1, 1): [(0, 7, MB // 10)]}
    free = SimParams(link_bps=8 * BW, latency_s=0.0, hop_s=0.0, alpha_s=0.0, cpu="rank")
    lock = SimParams(link_bps=8 * BW, latency_s=0.0, hop_s=0.0, alpha_s=0.0, cpu="lockstep")
    assert run((8,), steps, free) == pytest.approx(MB / BW, rel=1e-9)
    assert run((8,), steps, lock) == pytest.approx(1.1 * MB / BW, rel=1e-9)
    # α: one per lane that moves in a round, one after the other on the rank's CPU
    lock_a = SimParams(link_bps=8 * BW, latency_s=0.0, hop_s=0.0, alpha_s=1e-5, cpu="lockstep")
    assert run((8,), steps, lock_a) == pytest.approx(1e-5 + MB / BW + 1e-5 + 0.1 * MB / BW, rel=1e-9)


@pytest.mark.parametrize("dims", [(4, 4), (3, 5), (2, 3, 4), (6,)])
def test_simgrid_routes_as_the_model(dims):
    import numpy as np

    from swing_mpi.netsim.engine import simgrid_torus_routes

    p = math.prod(dims)
    pairs = [(a, b) for a, b in itertools.product(range(p), repeat=2) if a != b]
    got = simgrid_torus_routes(dims, pairs)
    net = Network("torus", dims)
    mi, li = net.links(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]))
    D = len(dims)
    ours: list[list[tuple[int, int]]] = [[] for _ in pairs]
    for m, link in zip(mi.tolist(), li.tolist()):
        u, port = divmod(link, 2 * D)
        c = list(np.unravel_index(u, dims))
        j, back = divmod(port, 2)
        c[j] = (c[j] + (-1 if back else 1)) % dims[j]
        ours[m].append((u, int(np.ravel_multi_index(tuple(c), dims))))
    assert got == ours


def test_figure1_ring16():
    p = SimParams(alpha_s=0.0)
    n = 16 << 20
    rd = simulate("rabenseifner", (16,), n, params=p, collective="reduce_scatter")
    sw = simulate("swing-bw-1port", (16,), n, params=p, collective="reduce_scatter")
    ratio = sum(rd.step_times[:3]) / sum(sw.step_times[:3])
    assert ratio == pytest.approx(1.5, rel=0.02)
    assert [b["messages"] for b in rd.busiest_link[:3]] == [1, 2, 4]
    assert [b["messages"] for b in sw.busiest_link[:3]] == [1, 1, 2]


@pytest.mark.parametrize("alg", ["swing-bw", "swing-bw-1port", "swing-lat", "recdoub", "rabenseifner",
                                 "recdoub-mirrored", "ring", "bucket", "hamiltonian"])
def test_agrees_with_the_model_at_large_vectors(alg):
    """256 MiB, α = 0, the 16-node ring (8x8 and 4x4x4: benchmarks/netsim_model.py, its results stored)."""
    from swing_mpi.model import analyze

    p = SimParams(alpha_s=0.0)
    n = 256 << 20
    model = analyze(alg, (16,)).time(n, alpha=0.0, link_bytes_per_s=p.link_bytes_per_s)
    assert simulate(alg, (16,), n, params=p).time_s == pytest.approx(model, rel=0.05)


def test_tiny_and_uneven_vectors_send_exactly_the_schedules_bytes():
    from swing_mpi.schedule import build_schedule

    got = {}
    for nbytes in (32, 4 * 1001):
        r = got[nbytes] = simulate("swing-bw", (4, 4), nbytes)
        assert r.exact
        want = sum(build_schedule("swing-bw", (4, 4), q, nbytes // 4).sent_elements() for q in range(16)) * 4
        assert r.extra["bytes_sent"] == want
        assert r.time_s > 0
    # 32 B: 8 elements over 4 lanes and 16 ranks leave most blocks empty: fewer messages, no zero-byte ones
    assert got[32].messages < got[4 * 1001].messages


def test_scaled_and_exact_sizes():
    """``sizes``: the count's own schedules or the build count's scaled (16 ranks build 16·lcm(1..4) = 192)."""
    n = 4 * 1001  # 1001 elements: uneven blocks
    exact = simulate("swing-bw", (4, 4), n, message_sizes="exact")
    scaled = simulate("swing-bw", (4, 4), n, message_sizes="scaled")
    assert exact.exact and not scaled.exact and exact.build_count == 1001 and scaled.build_count == 192
    assert simulate("swing-bw", (4, 4), n).time_s == exact.time_s  # auto: built for itself below 64x
    assert scaled.time_s == pytest.approx(exact.time_s, rel=0.02) and scaled.time_s != exact.time_s
    # a multiple of the build count is exact either way
    assert simulate("swing-bw", (4, 4), 4 * 192 * 5, message_sizes="scaled").exact
    # below the build count no scaled message vanishes: rounded up to a whole byte, so every step is kept
    tiny = simulate("swing-bw", (4, 4), 32, message_sizes="scaled")
    assert tiny.messages == simulate("swing-bw", (4, 4), 4 * 192).messages
    assert tiny.time_s == pytest.approx(simulate("swing-bw", (4, 4), 32, message_sizes="exact").time_s, rel=1e-3)
    with pytest.raises(ValueError, match="message_sizes must be one of"):
        simulate("swing-bw", (4, 4), n, message_sizes="fluid")


def test_hyperx_swing_one_message_per_link_per_step():
    r = simulate("swing-bw", (8, 8), 64 << 20, params=SimParams(network="hyperx", alpha_s=0.0))
    assert {b["most_messages"] for b in r.busiest_link} == {1}
    t = simulate("swing-bw", (8, 8), 64 << 20, params=SimParams(alpha_s=0.0)).time_s
    assert r.time_s < t


def test_fattree_swing_equals_recursive_doubling():
    p = SimParams(network="fattree", alpha_s=0.0)
    n = 64 << 20
    sw = simulate("swing-bw-1port", (64,), n, params=p)
    rd = simulate("rabenseifner", (64,), n, params=p)
    assert sw.time_s == pytest.approx(rd.time_s, rel=0.01)


def test_bad_input():
    with pytest.raises(ValueError, match="unknown algorithm"):
        simulate("nope", (4, 4), 1024)
    with pytest.raises(ValueError, match="whole number"):
        simulate("swing-bw", (4, 4), 1023)
    with pytest.raises(ValueError, match="network"):
        SimParams(network="mesh")
    with pytest.raises(ValueError, match="no reduce_scatter"):
        simulate("recdoub", (4, 4), 1024, collective="reduce_scatter")
    assert simulate("swing-bw", (4, 4), 0).time_s == 0.0


def test_command(tmp_path, capsys):
    import json

    from swing_mpi.cli import main

    csv = tmp_path / "out.csv"
    assert main(["simulate", "--dims", "4x4", "--sizes", "1K,1M", "--algorithms", "swing-bw,bucket",
                 "--link", "40M", "--alpha", "0", "--json", "--csv", str(csv)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["algorithm"], r["bytes"]) for r in rows] == [("swing-bw", 1024), ("bucket", 1024),
                                                            ("swing-bw", 1 << 20), ("bucket", 1 << 20)]
    for r in rows:
        assert {"algorithm", "bytes", "time_s", "goodput_bytes_per_s", "network", "dims"} <= set(r)
        assert r["dims"] == "4x4" and r["network"] == "torus" and r["link_bps"] == 40e6
    assert len(csv.read_text().splitlines()) == 5
    assert main(["simulate", "--dims", "4x4", "--sizes", "1K", "--algorithms", "swing-bw,bucket"]) == 0
    out = capsys.readouterr().out
    assert "goodput" in out and "swing-bw" in out and "x" in out
    assert main(["simulate", "--dims", "4x4", "--algorithms", "nope"]) == 2
    assert "unknown algorithm" in capsys.readouterr().err
    assert main(["simulate", "--dims", "4x4", "--link", "fast"]) == 2
    assert main(["simulate", "--dims", "4x4", "--sizes", "3"]) == 2
    assert main(["simulate", "--dims", "4x4", "--alpha", "soon"]) == 2


def _strict(line):
    """Parse one line of JSON as strict JSON (no Infinity or NaN, which other parsers reject)."""
    import json

    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(line, parse_constant=refuse)


@pytest.mark.parametrize("network", ["torus", "hyperx", "fattree"])
def test_command_on_one_node_is_an_error_and_two_nodes_are_strict_json(capsys, network):
    from swing_mpi.cli import main

    for dims in ("1", "1x1"):
        assert main(["simulate", "--dims", dims, "--network", network, "--sizes", "1M"]) == 2
        assert "make one node" in capsys.readouterr().err
    assert main(["simulate", "--dims", "2", "--network", network, "--sizes", "32,1M", "--algorithms", "all",
                 "--json"]) == 0
    rows = [_strict(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all(r["time_s"] > 0 and r["goodput_bytes_per_s"] > 0 for r in rows)


def test_parse_rate_and_presets(tmp_path, monkeypatch):
    import json

    from swing_mpi.netsim import PRESETS, PresetError
    from swing_mpi.netsim.cli import parse_rate

    assert parse_rate("400G") == 400e9 and parse_rate("40M") == 40e6 and parse_rate("1.5e9bps") == 1.5e9
    assert PRESETS["c"] == (1.5e-6, 0.0)
    monkeypatch.setattr(rc, "engine_costs", str(tmp_path / "none.json"))  # $SWING_MPI_ENGINE_COSTS
    with pytest.raises(PresetError, match="cannot read engine costs"):  # a file named but missing
        PRESETS["engine"]
    (tmp_path / "e.json").write_text(json.dumps({"alpha_s": 9e-5, "gamma_s_per_byte": 6e-11}))
    monkeypatch.setattr(rc, "engine_costs", str(tmp_path / "e.json"))  # $SWING_MPI_ENGINE_COSTS
    assert PRESETS["engine"] == (9e-5, 6e-11)
    assert SimParams.preset("engine").cpu == "rank" and SimParams.preset("c").cpu == "lane"


def test_slow_simgrid_note():
    from swing_mpi.netsim.cli import slow_simgrid

    assert "build_simgrid.sh" in (slow_simgrid("SimGrid 3.32.0", 4096) or "")
    assert slow_simgrid("SimGrid 3.32.0", 1024) is None
    assert slow_simgrid("SimGrid 3.35.0", 16384) is None
    assert slow_simgrid("SimGrid ?", 16384) is None


def test_reduction_overlaps_the_transfer_on_threads():
    """Threads and segments: what a step's reduction costs once its data is in (docs: netsim.software)."""
    from dataclasses import replace

    from swing_mpi.netsim.software import exposed_reduction

    mib, g = 1 << 20, 2.0 / BW  # the reduction is twice as slow as the wire
    one = {(0, 0): [(0, 1, 8 * mib)]}
    red = {(0, 0, 1): 8 * mib}
    arrive = LINK + 8 * mib / BW
    serial = replace(P0, gamma_s_per_byte=g)
    assert run((2,), one, serial, reduce_bytes=red) == pytest.approx(arrive + 8 * mib * g, rel=1e-9)
    threads = replace(P0, threads=2, segment_bytes=mib, gamma_threads=(2 * g, g))
    want = arrive + exposed_reduction(8 * mib, g, mib, 2, arrive)
    assert want == pytest.approx(arrive + g * mib + (7 * mib * g - arrive))
    assert run((2,), one, threads, reduce_bytes=red) == pytest.approx(want, rel=1e-9)
    # one thread: no overlap, whatever the segments
    assert run((2,), one, replace(threads, threads=1, gamma_threads=(g,)), reduce_bytes=red) == pytest.approx(
        arrive + 8 * mib * g, rel=1e-9)
    # two lanes into one rank share its threads: every early segment first, then each last one
    two = {(0, 0): [(0, 1, 8 * mib)], (1, 0): [(2, 1, 8 * mib)]}
    red2 = {(0, 0, 1): 8 * mib, (1, 0, 1): 8 * mib}
    lock = replace(threads, cpu="lockstep")
    assert run((4,), two, lock, reduce_bytes=red2) == pytest.approx(max(arrive, 14 * mib * g) + 2 * mib * g,
                                                                    rel=1e-9)
    # a block under the engine's split size is reduced on the rank's own thread, after the data
    small = {(0, 0): [(0, 1, 1000)]}
    assert run((2,), small, threads, reduce_bytes={(0, 0, 1): 1000}) == pytest.approx(
        LINK + 1000 / BW + 1000 * 2 * g, rel=1e-9)
