"""The lab adapts to its host: hosts it is not on, played by replacing what reads /proc and runs commands.

Nothing here needs root or builds a lab: :func:`swing_mpi.lab.system.read_ipv4_sysctl` (the
kernel's congestion-control settings) and :func:`swing_mpi.lab.system.run_command` (the scratch
namespace the availability check builds) are replaced by fakes of a host that lets namespaces
use only ``reno bbr``, one without ``tbf``, and so on.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from swing_mpi.lab import Lab, LabUnavailableError, choose_tcp_cc, lab_available, lab_report, system
from swing_mpi.lab.plan import make_plan

ROOT = Path(__file__).resolve().parents[2]

RENO_BBR = {"tcp_congestion_control": "bbr", "tcp_allowed_congestion_control": "reno bbr",
            "tcp_available_congestion_control": "reno bbr cubic"}
CUBIC_OK = {"tcp_congestion_control": "bbr", "tcp_allowed_congestion_control": "reno cubic bbr",
            "tcp_available_congestion_control": "reno bbr cubic"}


class FakeKernel:
    """Answers the lab's commands as a kernel lacking ``refuse`` would (each: a word of the command line)."""

    def __init__(self, refuse: dict[str, str] | None = None) -> None:
        self.refuse = refuse or {}
        self.calls: list[str] = []

    def __call__(self, cmd, *, timeout: float = 60.0, check: bool = True):
        line = cmd.shell()
        self.calls.append(line)
        for word, err in self.refuse.items():
            if word in line:
                if check:
                    raise system.LabError(f"command failed (exit 2): {line}\n{err}")
                return subprocess.CompletedProcess(list(cmd.argv), 2, "", err + "\n")
        return subprocess.CompletedProcess(list(cmd.argv), 0, "", "")


@pytest.fixture
def host(monkeypatch):
    """Return a function that makes this process see a host with the given sysctls and kernel."""

    def play(sysctls: dict[str, str], kernel: FakeKernel | None = None) -> FakeKernel:
        monkeypatch.setattr(system, "read_ipv4_sysctl", lambda name: sysctls.get(name))
        monkeypatch.setattr(system.sys, "platform", "linux")
        monkeypatch.setattr(system.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
        monkeypatch.setattr(system, "_effective_caps", lambda: (1 << 40) - 1)
        kernel = kernel or FakeKernel()
        monkeypatch.setattr(system, "run_command", kernel)
        return kernel

    return play


def test_cubic_where_namespaces_may_use_it(host):
    host(CUBIC_OK)
    c = choose_tcp_cc()
    assert (c.name, c.setting) == ("cubic", "cubic")
    assert choose_tcp_cc("auto") == c
    assert choose_tcp_cc("reno").setting == "reno"
    h = choose_tcp_cc("host")
    assert (h.name, h.setting) == ("bbr", "host") and "host's default" in h.note


def test_the_host_default_where_namespaces_may_not_use_cubic(host):
    host(RENO_BBR)
    c = choose_tcp_cc()
    assert (c.name, c.setting) == ("bbr", "host")
    assert "bbr, the host's default, in place of cubic" in c.note and "'reno bbr'" in c.note
    lab = Lab("2x2")
    assert lab.tcp_cc == "bbr" and "bbr" in lab.describe()
    assert not any("tcp_congestion_control" in k for r in range(4) for k in lab.plan.sysctl_settings(r))
    ok, why = lab_available()
    assert ok and "TCP congestion control bbr" in why


def test_a_forced_congestion_control_the_kernel_refuses_fails_before_building(host):
    kernel = host(RENO_BBR)
    with pytest.raises(LabUnavailableError, match="--tcp-cc cubic: network namespaces here may not use"):
        choose_tcp_cc("cubic")
    assert choose_tcp_cc("cubic", strict=False).setting == "cubic"  # for --plan: shown, not refused
    assert choose_tcp_cc("reno").name == "reno"
    with pytest.raises(LabUnavailableError, match="no TCP congestion control 'vegas'.*modprobe tcp_vegas"):
        choose_tcp_cc("vegas")
    ok, why = lab_available("cubic")
    assert not ok and "may not use TCP congestion control 'cubic'" in why
    lab = Lab("2x2", tcp_cc="cubic")  # planned; refused by build, before any of its namespaces exists
    with pytest.raises(LabUnavailableError, match="cannot build the emulated torus lab: --tcp-cc cubic"):
        lab.build()
    assert not lab.built
    assert not any("swl" in c and "probe" not in c for c in kernel.calls)


def test_the_command_line_refuses_it_with_the_reason(host, capsys):
    host(RENO_BBR)
    from swing_mpi.lab.cli import main

    assert main(["--dims", "2x2", "--tcp-cc", "cubic", "--check"]) == 2
    err = capsys.readouterr().err
    assert "--tcp-cc cubic" in err and "tcp_allowed_congestion_control is 'reno bbr'" in err
    assert main(["--dims", "2x2", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "TCP as the host" in out and "# TCP congestion control bbr, the host's default" in out
    assert "tcp_congestion_control=" not in out


def test_a_host_without_tbf_says_so(host):
    host(CUBIC_OK, FakeKernel({" tbf ": "Error: Specified qdisc kind is unknown."}))
    report = lab_report()
    assert not report.ok and len(report.problems) == 1
    assert "tbf" in report.reason and "qdisc kind is unknown" in report.reason
    ok, why = lab_available()
    assert not ok and why == report.reason and "\n" not in why


def test_every_missing_piece_is_reported(host):
    kernel = host(RENO_BBR, FakeKernel({"type veth": "Error: Unknown device type.",
                                        " tbf ": "Error: Specified qdisc kind is unknown.",
                                        "rp_filter": "sysctl: permission denied on key"}))
    report = lab_report("cubic")
    assert len(report.problems) == 4, report.problems
    assert [w in report.reason for w in ("'cubic'", "veth", "tbf", "rp_filter")] == [True] * 4
    assert any(" dev lo root tbf " in c for c in kernel.calls), "tbf tried on lo where there is no veth"
    assert kernel.calls[-1].startswith("ip netns del swlprobe"), "the scratch namespace is deleted"


def test_a_congestion_control_refused_inside_a_namespace_is_caught(host):
    """/proc may say yes and the namespace still refuse: the scratch namespace tries the setting."""
    host(CUBIC_OK, FakeKernel({"tcp_congestion_control=cubic": "sysctl: setting key "
                                                                "\"net.ipv4.tcp_congestion_control\": "
                                                                "Operation not permitted"}))
    ok, why = lab_available()
    assert not ok and "Operation not permitted" in why
    assert lab_available("host")[0]


def test_no_namespaces_at_all(host):
    host(CUBIC_OK, FakeKernel({"netns add": "mount --make-shared /run/netns failed: Operation not permitted"}))
    ok, why = lab_available()
    assert not ok and why.count("` failed") == 1 and "netns add" in why


def test_not_root(host, monkeypatch):
    host(CUBIC_OK)
    monkeypatch.setattr(system, "_effective_caps", lambda: 0)
    ok, why = lab_available()
    assert not ok and "CAP_NET_ADMIN and CAP_SYS_ADMIN missing" in why


def test_a_plan_holds_a_chosen_congestion_control():
    with pytest.raises(ValueError, match="resolve it first"):
        make_plan("2x2", tcp_cc="auto")


def _sweep():
    spec = importlib.util.spec_from_file_location("bench_sweep_host", ROOT / "benchmarks" / "sweep.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_sweep_host"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_sweep_whose_lab_cannot_be_built_says_why_for_the_demo(host, tmp_path, capsys):
    host(CUBIC_OK, FakeKernel({" tbf ": "Error: Specified qdisc kind is unknown."}))
    sw = _sweep()
    rc = sw.main(["--dims", "2x2", "--sizes", "1K", "--lab", "--out", str(tmp_path)])
    assert rc == 2
    (line,) = (tmp_path / "lab-unavailable.txt").read_text().splitlines()
    assert "tbf" in line and "qdisc kind is unknown" in line
    assert "no lab here" in capsys.readouterr().err


def test_the_demo_falls_back_to_shared_memory():
    """The demo's fall-back rules, read from the script (running it takes minutes)."""
    text = (ROOT / "scripts" / "demo.sh").read_text()
    assert "lab_available()" in text and 'why="the lab could not be built after all' in text
    assert '"$OUT/lab-unavailable.txt"' in text and '"${DEMO:-auto}" != lab' in text
