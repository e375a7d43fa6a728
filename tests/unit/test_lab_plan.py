"""The lab plan is pure data: names, addresses, links and routes checked without root."""

from __future__ import annotations

import ipaddress
import itertools
import re

import pytest

from swing_mpi.lab.plan import MAX_NODES, make_plan, namespace_pattern, node_address
from swing_mpi.topology import Torus

SHAPES = [(4, 4), (3, 5), (2, 2, 2), (16,), (2, 2), (2, 4), (1, 4), (3,), (2,), (4, 2, 3), (1,)]


def n_links(t: Torus) -> int:
    """Torus links: a side d > 2 has d links per line, a side of 2 one, a side of 1 none."""
    total = 0
    for d in t.dims:
        lines = t.size // d
        total += lines * (d if d > 2 else d - 1)
    return total


@pytest.mark.parametrize(
    "dims,links",
    [((4, 4), 32), ((2, 2), 4), ((16,), 16), ((2,), 1), ((1,), 0), ((2, 2, 2), 12), ((3, 5), 30), ((1, 4), 4)],
)
def test_link_count(dims, links):
    plan = make_plan(dims)
    assert len(plan.links) == links == n_links(Torus(dims))


@pytest.mark.parametrize("dims", SHAPES)
def test_links_join_torus_neighbours(dims):
    t = Torus(dims)
    plan = make_plan(t)
    pairs = set()
    for link in plan.links:
        a, b = link.a, link.b
        assert t.neighbor(a.node, a.port) == b.node
        assert t.neighbor(b.node, b.port) == a.node
        assert a.port // 2 == b.port // 2 == link.dim
        key = (frozenset((a.node, b.node)), link.dim)
        assert key not in pairs, "one veth pair per torus link"
        pairs.add(key)
    for r in range(t.size):
        names = [p.name for p in plan.ports(r)]
        assert len(names) == len(set(names)), "port names unique inside a namespace"
        expected = sum(2 if d > 2 else (1 if d == 2 else 0) for d in t.dims)
        assert len(names) == expected


@pytest.mark.parametrize("dims", SHAPES)
def test_names_and_addresses(dims):
    plan = make_plan(dims, run_id="3fa2")
    assert len(set(plan.namespaces)) == plan.size
    assert len(set(plan.addresses)) == plan.size
    pat = namespace_pattern("swl")
    for r, ns in enumerate(plan.namespaces):
        m = pat.fullmatch(ns)
        assert m and m["run"] == "3fa2" and int(m["rank"]) == r
    for a in plan.addresses:
        ip = ipaddress.ip_address(a)
        assert ip in ipaddress.ip_network("10.0.0.0/8") and ip.is_private
        assert not a.endswith(".0") and not a.endswith(".255")
    for link in plan.links:
        for p in (link.a, link.b):
            assert len(p.name) <= 15 and re.fullmatch(r"[a-z0-9]+", p.name)


def test_addresses_unique_up_to_4096_and_beyond():
    addrs = [node_address(r) for r in range(MAX_NODES)]
    assert len(set(addrs)) == MAX_NODES
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network("10.100.0.0/16") for a in addrs)
    with pytest.raises(ValueError):
        node_address(MAX_NODES)


def test_two_labs_never_share_names():
    a = make_plan("2x2", run_id="a1")
    b = make_plan("2x2", run_id="a10")
    assert not set(a.namespaces) & set(b.namespaces)
    assert not set(make_plan("12", run_id="1").namespaces) & set(make_plan("12", run_id="11").namespaces)


@pytest.mark.parametrize(
    "bad",
    [dict(run_id="xyz"), dict(run_id=""), dict(prefix="SWL"), dict(prefix="s1"), dict(rate_mbit=0), dict(mtu=10),
     dict(burst_kib=0), dict(burst_kib=1.5), dict(burst_kib=True), dict(burst_kib=65537)],
)
def test_bad_options(bad):
    with pytest.raises(ValueError):
        make_plan("2x2", **bad)


@pytest.mark.parametrize("dims", [(4, 4), (3, 5), (2, 2, 2), (16,), (2, 2), (2, 4), (1, 4), (4, 2, 3)])
def test_every_route_is_minimal_and_in_dimension_order(dims):
    t = Torus(dims)
    plan = make_plan(t)
    for s, d in itertools.permutations(range(t.size), 2):
        path = plan.hop_path(s, d)
        assert path[0] == s and path[-1] == d
        assert len(path) - 1 == t.distance(s, d)
        changed = []
        for u, v in zip(path, path[1:]):
            assert t.distance(u, v) == 1, "every hop crosses one link"
            diff = [k for k, (x, y) in enumerate(zip(t.coords(u), t.coords(v))) if x != y]
            assert len(diff) == 1
            changed.append(diff[0])
        assert changed == sorted(changed), f"{s}->{d} not in dimension order: {path}"


@pytest.mark.parametrize("dims", [(4, 4), (3, 5), (2, 2, 2)])
def test_route_fields_agree_with_torus(dims):
    t = Torus(dims)
    plan = make_plan(t)
    for r in plan.routes():
        tp = t.port_towards(r.node, r.dest)
        assert r.via == t.neighbor(r.node, tp)
        assert r.port.node == r.node and r.port.port // 2 == tp // 2
        assert plan.neighbor(r.port) == r.via
        assert r.dest_addr == plan.address(r.dest) and r.via_addr == plan.address(r.via)
        assert r.argv == ("ip", "-n", plan.namespace(r.node), "route", "add", f"{r.dest_addr}/32",
                          "via", r.via_addr, "dev", r.port.name, "onlink")
    assert len(plan.routes()) == t.size * (t.size - 1)


def test_tie_goes_plus_way():
    # distance exactly d/2: the + way. On a ring of 4, 0 -> 2 goes through 1, 2 -> 0 through 3.
    plan = make_plan((4,))
    assert plan.hop_path(0, 2) == [0, 1, 2]
    assert plan.hop_path(2, 0) == [2, 3, 0]
    assert plan.hop_path(1, 3) == [1, 2, 3]
    assert plan.route(0, 2).port.name == "d0p"
    # shorter way is taken when there is one
    assert plan.hop_path(0, 3) == [0, 3]
    assert plan.route(0, 3).port.name == "d0m"
    # on 4x4, (0,0) -> (2,2): dimension 0 first, both ties the + way
    t = Torus((4, 4))
    p = make_plan(t)
    assert [t.coords(r) for r in p.hop_path(0, 10)] == [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2)]
    # ring of 16: 0 -> 8 is a tie, goes up
    assert make_plan((16,)).hop_path(0, 8) == list(range(9))


def test_side_of_two_has_one_link_named_plus_at_both_ends():
    plan = make_plan((2,))
    (link,) = plan.links
    assert (link.a.name, link.b.name) == ("d0p", "d0p")
    assert plan.route(0, 1).port.name == "d0p" and plan.route(1, 0).port.name == "d0p"
    assert plan.port(1, 1) == plan.port(1, 0)


def test_commands_are_pure_data():
    plan = make_plan("2x3", run_id="beef", rate_mbit=40, mtu=65000)
    phases = plan.setup_phases()
    assert [c.argv for c in phases[0]] == [("ip", "-batch", "-")]
    assert phases[0][0].stdin.splitlines() == [f"netns add {n}" for n in plan.namespaces]
    assert len(phases[1][0].stdin.splitlines()) == len(plan.links)
    text = "\n".join(c.shell() for c in plan.setup_commands())
    for r in range(plan.size):
        ns = plan.namespace(r)
        for p in plan.ports(r):
            assert f"qdisc add dev {p.name} root tbf rate 40mbit burst 256kb latency 400ms" in text
            assert f"link set {p.name} mtu 65000" in text
            assert f"net.ipv4.conf.{p.name}.rp_filter=0" in text
        assert f"ip -n {ns} -batch -" in text and f"tc -n {ns} -batch -" in text
    assert "net.ipv4.ip_forward=1" in text
    # unbatched: one argv per action, and every route appears verbatim
    flat = [c.argv for c in plan.setup_commands(batched=False)]
    for r in plan.routes():
        assert r.argv in flat
    assert all(c.stdin is None for c in plan.setup_commands(batched=False))
    (td,) = plan.teardown_commands()
    assert td.stdin.splitlines() == [f"netns del {n}" for n in plan.namespaces]


def test_hop_path_rejects_bad_ranks():
    plan = make_plan("2x2")
    with pytest.raises(ValueError):
        plan.hop_path(0, 4)
    with pytest.raises(ValueError):
        plan.route(1, 1)
    assert plan.hop_path(3, 3) == [3]


def test_burst_is_an_option_and_never_below_the_mtu(capsys):
    plan = make_plan("2x2", burst_kib=64, mtu=65000)
    assert plan.burst_kib == 64 and "burst 64 KiB" in plan.describe()
    text = "\n".join(c.shell() for c in plan.setup_commands(batched=False))
    assert "tbf rate 40mbit burst 64kb latency 400ms" in text and "burst 256kb" not in text
    assert make_plan("2x2").burst_kib == 256
    with pytest.raises(ValueError, match="less than the MTU"):
        make_plan("2x2", burst_kib=63, mtu=65000)  # 63 KiB = 64512 bytes < 65000
    assert make_plan("2x2", burst_kib=2, mtu=1500).burst_kib == 2

    from swing_mpi.lab.cli import main

    assert main(["--dims", "2x2", "--burst-kib", "128", "--plan"]) == 0
    assert "burst 128kb" in capsys.readouterr().out
    assert main(["--dims", "2x2", "--burst-kib", "32", "--plan"]) == 2
    assert "less than the MTU" in capsys.readouterr().err


def test_cpu_note_when_all_links_at_once_ask_more_than_the_cores_carry(capsys, monkeypatch):
    from swing_mpi.lab import cli
    from swing_mpi.lab.plan import CARRIED_BYTES_PER_S_PER_CPU

    cube = make_plan("4x4x4")  # 192 links, 384 directions at 5 MB/s
    assert cube.link_directions == 384 and cube.demand_bytes_per_s == pytest.approx(1.92e9)
    note = cube.cpu_note(2)
    assert note and "384 link directions at 40 Mbit/s ask 1.92 GB/s" in note and "--link 27M " in note
    assert cube.cpu_note(4) is None  # four cores carry it
    assert make_plan("4x4x4", rate_mbit=20).cpu_note(2) is None
    assert make_plan("4x4").cpu_note(1) is None and make_plan("8x8").cpu_note(2) is None
    assert make_plan("2x2").link_directions == 8  # a side of 2: one pair per neighbour, two directions
    # just over the line on one core: the suggested rate brings it back under
    tight = make_plan("16", rate_mbit=CARRIED_BYTES_PER_S_PER_CPU / 32 * 8 / 1e6 * 1.01)
    suggested = float(tight.cpu_note(1).split("--link ")[1].split()[0].removesuffix("M"))
    assert make_plan("16", rate_mbit=suggested).cpu_note(1) is None
    with pytest.raises(ValueError, match="cpus"):
        cube.cpu_note(0)

    monkeypatch.setattr(cli, "usable_cpus", lambda: 2)
    assert cli.main(["--dims", "4x4x4", "--plan"]) == 0
    assert "# note: 384 link directions" in capsys.readouterr().out
    assert cli.main(["--dims", "4x4x4", "--link", "20M", "--plan"]) == 0
    assert "note" not in capsys.readouterr().out


def test_cli_plan_needs_no_root(capsys):
    from swing_mpi.lab.cli import main

    assert main(["--dims", "2x2", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "netns add swl0n3" in out and "netns del swl0n0" in out
    assert main(["--dims", "0x2", "--plan"]) == 2


# -- the pieces around the plan that need no root ---------------------------------------


@pytest.mark.parametrize(
    "env,want",
    [
        ({"PMI_RANK": "5"}, "5"),  # MPICH hydra
        ({"OMPI_COMM_WORLD_RANK": "7", "PMIX_RANK": "7"}, "7"),  # Open MPI
        ({"PMIX_RANK": "3"}, "3"),  # any PMIx launcher
        ({"PMI_RANK": "2", "PMIX_RANK": "9"}, "2"),  # PMI_RANK first
    ],
)
def test_wrapper_takes_the_rank_from_any_launcher(tmp_path, env, want):
    import os
    import subprocess

    from swing_mpi.lab.lab import wrapper_script

    fake_ip = tmp_path / "ip"
    fake_ip.write_text('#!/bin/sh\necho "$@"\n')
    fake_ip.chmod(0o755)
    script = tmp_path / "lab-exec.sh"
    script.write_text(wrapper_script(make_plan("4x4", run_id="ab"), ip=str(fake_ip)))
    script.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")}
    out = subprocess.run([str(script), "prog", "a b"], env={**clean, **env}, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["netns", "exec", f"swlabn{want}", "prog", "a", "b"]
    none = subprocess.run([str(script), "prog"], env=clean, capture_output=True, text=True)
    assert none.returncode == 127 and "PMI_RANK" in none.stderr and not none.stdout


def test_wrapper_places_ranks_and_exports_the_node(tmp_path):
    import os
    import subprocess

    from swing_mpi.lab.lab import wrapper_script

    fake_ip = tmp_path / "ip"
    fake_ip.write_text('#!/bin/sh\necho "$SWING_LAB_NODE" "$@"\n')
    fake_ip.chmod(0o755)
    placement = (2, 0, 3, 1)
    clean = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")}
    for place, want in ((None, [0, 1, 2, 3]), (placement, list(placement))):
        script = tmp_path / "lab-exec.sh"
        script.write_text(wrapper_script(make_plan("2x2", run_id="ab"), ip=str(fake_ip), placement=place))
        script.chmod(0o755)
        for r in range(4):
            out = subprocess.run([str(script), "prog"], env={**clean, "PMI_RANK": str(r)}, capture_output=True,
                                 text=True)
            assert out.returncode == 0, out.stderr
            assert out.stdout.split() == [str(want[r]), "netns", "exec", f"swlabn{want[r]}", "prog"]


def test_parse_placement():
    from swing_mpi.lab.lab import parse_placement

    assert parse_placement(None, 4) is None and parse_placement("ordered", 4) is None
    a = parse_placement("shuffled", 16)
    assert sorted(a) == list(range(16)) and a != tuple(range(16))
    assert parse_placement("shuffled", 16) == a and parse_placement("shuffled:1", 16) == a
    assert parse_placement("shuffled:7", 16) != a
    assert parse_placement("1,0,3,2", 4) == (1, 0, 3, 2)
    for bad in ("1,1,2,3", "0,1,2", "a,b", "shuffled:x"):
        with pytest.raises(ValueError):
            parse_placement(bad, 4)


@pytest.mark.parametrize("dims", [(4, 4), (3, 4), (2, 2), (8,), (4, 4, 4), (2,)])
def test_rate_tests_cover_every_port(dims):
    from swing_mpi.lab.checks import rate_tests

    plan = make_plan(dims)
    t = plan.torus
    tests = {name: flows for name, _, flows in rate_tests(plan)}
    assert tests["one"] == [(0, plan.neighbor(plan.ports(0)[0]))]
    every = tests["all"]
    assert len(every) == sum(len(plan.ports(r)) for r in range(t.size)) == len(set(every))
    assert all(t.distance(a, b) == 1 for a, b in every)
    assert ("node" in tests) == (len(plan.ports(0)) > 1)
    if "far" in tests:
        (src, dst), = tests["far"]
        assert src == 0 and t.distance(0, dst) == max(t.distance(0, r) for r in range(t.size)) > 1


def test_check_result_judges_small_tests_by_their_slowest_flow():
    from swing_mpi.lab.checks import CheckResult, RateResult

    few = RateResult("node", "", [(0, 1), (0, 2)], [5.0, 2.0], 5.0)
    many = RateResult("all", "", [(i, i + 1) for i in range(16)], [2.0] + [5.0] * 15, 5.0)
    assert not CheckResult(12, rates=[few]).ok  # slowest 2.0 < 0.5 * 5
    assert CheckResult(12, rates=[many]).ok  # mean 4.8 is fine
    assert not CheckResult(12, route_errors=["x"]).ok
    assert "FAILED" in CheckResult(12, route_errors=["x"]).table()


def test_find_mpiexec_prefers_the_interpreters_own(tmp_path, monkeypatch):
    import sys

    from swing_mpi.lab import MpiexecNotFoundError, find_mpiexec

    exe = tmp_path / "python"
    mine = tmp_path / "mpiexec"
    mine.write_text("#!/bin/sh\n")
    mine.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(exe))
    assert find_mpiexec() == str(mine)
    mine.unlink()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(MpiexecNotFoundError, match="mpiexec not found"):
        find_mpiexec()
    with pytest.raises(FileNotFoundError):
        find_mpiexec()


def test_kill_group_ends_children(tmp_path):
    import subprocess
    import time

    from swing_mpi.lab import kill_group

    pidfile = tmp_path / "child"
    proc = subprocess.Popen(["sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], start_new_session=True)
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    kill_group(proc)
    assert proc.poll() is not None
    for _ in range(100):
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the grandchild outlived kill_group")


def test_ranks_talk_over_tcp_and_wait_as_the_library_decides_unless_told_otherwise():
    from swing_mpi.lab import Lab

    env = Lab((2, 2)).mpi_env()
    assert env["MPIR_CVAR_NOLOCAL"] == "1" and env["FI_PROVIDER"] == "tcp"
    assert "SWING_MPI_WAIT" not in env  # waiting.node_policy picks backoff: many ranks, one host name
    assert Lab((2, 2)).mpi_env({"SWING_MPI_WAIT": "yield"})["SWING_MPI_WAIT"] == "yield"


def test_tcp_congestion_control_is_set_in_every_namespace(capsys):
    plan = make_plan("2x2")
    assert plan.tcp_cc == "cubic" and "TCP cubic" in plan.describe()
    text = "\n".join(c.shell() for c in plan.setup_commands(batched=False))
    assert text.count("net.ipv4.tcp_congestion_control=cubic") == plan.size
    reno = "\n".join(c.shell() for c in make_plan("2x2", tcp_cc="reno").setup_commands(batched=False))
    assert reno.count("net.ipv4.tcp_congestion_control=reno") == 4 and "=cubic" not in reno
    host = make_plan("2x2", tcp_cc="host")
    assert not any("tcp_congestion_control" in k for r in range(host.size) for k in host.sysctl_settings(r))
    assert "TCP as the host" in host.describe()
    for bad in ("", "Cubic", "cubic; reboot", 3, "x" * 17):
        with pytest.raises(ValueError, match="tcp_cc"):
            make_plan("2x2", tcp_cc=bad)

    from swing_mpi.lab.cli import main

    assert main(["--dims", "2x2", "--tcp-cc", "reno", "--plan"]) == 0
    assert "tcp_congestion_control=reno" in capsys.readouterr().out
    assert main(["--dims", "2x2", "--tcp-cc", "no such", "--plan"]) == 2
    assert "tcp_cc must name" in capsys.readouterr().err


def test_an_unknown_congestion_control_is_refused_before_the_lab_is_built(monkeypatch):
    from swing_mpi.lab import system

    kernel = {"tcp_available_congestion_control": "reno cubic", "tcp_congestion_control": "reno"}
    monkeypatch.setattr(system, "read_ipv4_sysctl", kernel.get)
    system.require_tcp_cc("cubic")
    system.require_tcp_cc("host")
    system.require_tcp_cc("auto")
    with pytest.raises(system.LabUnavailableError, match="no TCP congestion control 'bbr'.*reno, cubic"):
        system.require_tcp_cc("bbr")
    monkeypatch.setattr(system, "read_ipv4_sysctl", lambda name: None)
    system.require_tcp_cc("anything")  # cannot tell: lab_available's scratch namespace tries it


@pytest.mark.parametrize("dims", [(4, 4), (3, 5), (2, 2, 2), (8,), (2, 4)])
def test_routers_carry_the_links_and_routes_apart_from_the_hosts(dims):
    plain = make_plan(dims, run_id="ab")
    plan = make_plan(dims, run_id="ab", routers=True)
    n = plan.size
    assert plan.namespaces == plain.namespaces  # ranks run where they ran
    routers = [plan.router_namespace(r) for r in range(n)]
    assert set(plan.all_namespaces) == set(plan.namespaces) | set(routers) and len(plan.all_namespaces) == 2 * n
    pat = namespace_pattern("swl")
    assert all(pat.fullmatch(ns) and pat.fullmatch(ns)["kind"] == "r" for ns in routers)  # cleanup finds them
    assert not set(routers) & set(plain.all_namespaces)
    assert len({plan.router_address(r) for r in range(n)} | set(plan.addresses)) == 2 * n
    # the hops a packet takes are the plain lab's; only the next hop's address is the router's
    for s in range(n):
        for d in range(n):
            if s != d:
                assert plan.hop_path(s, d) == plain.hop_path(s, d)
                r = plan.route(s, d)
                assert r.namespace == routers[s] and r.via_addr == plan.router_address(r.via)
                assert r.dest_addr == plan.address(d)
    text = "\n".join(c.shell() for c in plan.setup_commands(batched=False))
    for r in range(n):
        host, router = plan.namespace(r), routers[r]
        assert f"link add host netns {host} type veth peer name host netns {router}" in text
        assert f"ip -n {host} route add default via {plan.router_address(r)} dev host onlink" in text
        assert f"ip -n {router} route add {plan.address(r)}/32 dev host" in text
        assert f"ip -n {host} route add {plan.address((r + 1) % n)}" not in text
        for p in plan.ports(r):  # token buckets on the routers' torus ports only
            assert f"tc -n {router} qdisc add dev {p.name} root tbf" in text
        assert f"tc -n {host} " not in text
        assert f"ip netns exec {router} sysctl -q -w net.ipv4.ip_forward=1" in text
    assert text.count("tcp_congestion_control=cubic") == n  # TCP runs in the hosts only
    assert "routers apart from hosts" in plan.describe()
    (td,) = plan.teardown_commands()
    assert sorted(td.stdin.splitlines()) == sorted(f"netns del {ns}" for ns in plan.all_namespaces)
    # batched and unbatched build the same things
    batched = [ln for c in plan.setup_commands() for ln in (c.stdin or "").splitlines()]
    assert sum(ln.startswith("route add") for ln in batched) == n * (n - 1) + 2 * n


def test_routers_need_a_free_second_octet():
    make_plan("2x2", net=254, routers=True)
    with pytest.raises(ValueError, match="net"):
        make_plan("2x2", net=255, routers=True)


def test_queue_depth_is_an_option(capsys):
    text = "\n".join(c.shell() for c in make_plan("2x2", queue_ms=50).setup_commands())
    assert "tbf rate 40mbit burst 256kb latency 50ms" in text and "latency 400ms" not in text
    assert "queues 50 ms" in make_plan("2x2", queue_ms=50).describe()
    assert "queues" not in make_plan("2x2").describe()
    for bad in (0, 10001, 1.5, True, "50"):
        with pytest.raises(ValueError, match="queue_ms"):
            make_plan("2x2", queue_ms=bad)

    from swing_mpi.lab.cli import main

    assert main(["--dims", "2x2", "--queue-ms", "100", "--routers", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "latency 100ms" in out and "netns add swl0r3" in out


# -- several ranks per node ------------------------------------------------------------------


def _fake_launcher(tmp_path, name: str, version: str):
    script = tmp_path / name
    script.write_text(f"#!/bin/sh\necho '{version}'\n")
    script.chmod(0o755)
    return str(script)


def test_wrapper_puts_each_block_of_k_ranks_in_one_node(tmp_path):
    import os
    import subprocess

    from swing_mpi.lab.lab import wrapper_script

    fake_ip = tmp_path / "ip"
    fake_ip.write_text('#!/bin/sh\necho "$SWING_LAB_NODE" "$SWING_LAB_LOCAL" "$SWING_LAB_SLOT" "$@"\n')
    fake_ip.chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")}
    k = 3
    for place in (None, (2, 0, 3, 1)):
        script = tmp_path / "lab-exec.sh"
        script.write_text(wrapper_script(make_plan("2x2", run_id="ab"), ip=str(fake_ip), placement=place,
                                         ranks_per_node=k))
        script.chmod(0o755)
        for r in range(4 * k):
            node = r // k if place is None else place[r // k]
            out = subprocess.run([str(script), "prog"], env={**clean, "PMI_RANK": str(r)}, capture_output=True,
                                 text=True)
            assert out.returncode == 0, out.stderr
            assert out.stdout.split() == [str(node), str(r % k), str(node * k + r % k), "netns", "exec",
                                          f"swlabn{node}", "prog"]
        past = subprocess.run([str(script), "prog"], env={**clean, "PMI_RANK": str(4 * k)}, capture_output=True,
                              text=True)
        if place is not None:
            assert past.returncode == 127 and "no node in the placement" in past.stderr


def test_one_rank_per_node_keeps_the_wrapper_and_the_environment():
    from swing_mpi.lab.lab import MPI_ENV, lab_mpi_env, wrapper_script

    plan = make_plan("2x2", run_id="ab")
    one = wrapper_script(plan, placement=(1, 0, 3, 2), ranks_per_node=1)
    assert one == wrapper_script(plan, placement=(1, 0, 3, 2)) and "SWING_LAB_LOCAL" not in one
    assert lab_mpi_env(1) == MPI_ENV and MPI_ENV["MPIR_CVAR_NOLOCAL"] == "1"
    shared = lab_mpi_env(4)
    assert "MPIR_CVAR_NOLOCAL" not in shared, "ranks of one node talk through shared memory"
    assert shared["MPIR_CVAR_CH4_NETMOD"] == "ofi" and shared["FI_PROVIDER"] == "tcp", "nodes still over TCP"
    assert lab_mpi_env(2, {"MPIR_CVAR_NOLOCAL": "1"})["MPIR_CVAR_NOLOCAL"] == "1"  # -e still wins
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError):
            lab_mpi_env(bad)


def test_hosts_name_one_host_per_node_in_rank_order():
    from swing_mpi.lab.lab import hosts_argument

    plan = make_plan("2x2", run_id="ab")
    assert hosts_argument(plan, 2) == "swlabn0:2,swlabn1:2,swlabn2:2,swlabn3:2"
    assert hosts_argument(plan, 4, (2, 0, 3, 1)) == "swlabn2:4,swlabn0:4,swlabn3:4,swlabn1:4"


def test_launch_line_with_and_without_ranks_per_node():
    import sys

    from swing_mpi.lab import LabError
    from swing_mpi.lab.lab import launch_argv

    plan = make_plan("2x2", run_id="ab")

    def line(**kw):
        return launch_argv(plan, ["python", "x.py"], wrapper="/w/lab-exec.sh", mpiexec="mpiexec", timeout=60, **kw)

    one = line()
    assert one[:5] == ["env", "MPIEXEC_TIMEOUT=60", "mpiexec", "-n", "4"] and "-hosts" not in one
    assert one[-3:] == ["/w/lab-exec.sh", sys.executable, "x.py"]
    assert "MPIR_CVAR_NOLOCAL" in one
    two = line(ranks_per_node=2, launcher="hydra", placement=(3, 2, 1, 0))
    assert two[2:9] == ["mpiexec", "-launcher", "fork", "-hosts", "swlabn3:2,swlabn2:2,swlabn1:2,swlabn0:2",
                        "-n", "8"]
    assert "MPIR_CVAR_NOLOCAL" not in two and "FI_PROVIDER" in two
    assert line(ranks_per_node=2, launcher="hydra", nprocs=5)[8] == "5"
    for n in (0, 9):
        with pytest.raises(ValueError, match="1..8"):
            line(ranks_per_node=2, launcher="hydra", nprocs=n)
    with pytest.raises(LabError, match="Open MPI.*ssh"):
        line(ranks_per_node=2, launcher="openmpi")
    with pytest.raises(LabError, match="hydra"):
        line(ranks_per_node=2, launcher="other")
    assert line(launcher="openmpi") == one  # one rank per node works with any launcher


def test_launcher_kind_reads_the_version(tmp_path):
    from swing_mpi.lab.lab import launcher_kind

    assert launcher_kind(_fake_launcher(tmp_path, "hydra", "HYDRA build details:")) == "hydra"
    assert launcher_kind(_fake_launcher(tmp_path, "ompi", "mpirun (Open MPI) 5.0.11")) == "openmpi"
    assert launcher_kind(_fake_launcher(tmp_path, "what", "something else")) == "other"
    assert launcher_kind(str(tmp_path / "missing")) == "other"


def test_lab_counts_every_rank_of_every_node():
    from swing_mpi.lab import Lab

    lab = Lab((2, 2), ranks_per_node=4)
    assert lab.ranks == 16 and "MPIR_CVAR_NOLOCAL" not in lab.mpi_env()
    assert Lab((2, 2)).ranks == 4
    with pytest.raises(ValueError):
        Lab((2, 2), ranks_per_node=0)


def test_cli_ranks_per_node(capsys, tmp_path, monkeypatch):
    from swing_mpi.lab import cli

    assert cli.main(["--dims", "2x2", "--ranks-per-node", "2", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "# 8 ranks, 2 per node: mpiexec -launcher fork -hosts swl0n0:2,swl0n1:2,swl0n2:2,swl0n3:2" in out
    assert cli.main(["--dims", "2x2", "--plan"]) == 0
    assert "per node" not in capsys.readouterr().out
    assert cli.main(["--dims", "2x2", "--ranks-per-node", "0", "--plan"]) == 2
    # a launcher that cannot is refused before anything is built (no root needed to get here)
    monkeypatch.setattr(cli, "find_mpiexec", lambda: _fake_launcher(tmp_path, "ompi", "mpirun (Open MPI) 5.0.11"))
    assert cli.main(["--dims", "2x2", "--ranks-per-node", "2", "--", "python", "x.py"]) == 2
    assert "Open MPI" in capsys.readouterr().err
    monkeypatch.setattr(cli, "find_mpiexec", lambda: _fake_launcher(tmp_path, "hydra", "HYDRA build details:"))
    assert cli.main(["--dims", "2x2", "--ranks-per-node", "2", "-n", "9", "--", "python", "x.py"]) == 2
    assert "1..8" in capsys.readouterr().err
