"""Run the commands a lab needs, and say whether this machine can host one.

Everything here talks to the operating system and knows nothing about tori:

* :func:`run_command`/:func:`run_parallel` run :class:`~swing_mpi.lab.plan.Command`
  lines, turning failures into :class:`LabError` with the command and its stderr;
* :func:`lab_available`/:func:`lab_report`/:func:`require_lab` check for Linux, iproute2, the
  capabilities, and really create a scratch namespace with a veth pair and a token bucket, and
  set in it every ``sysctl`` the lab sets, TCP congestion control included;
* :func:`choose_tcp_cc` picks that congestion control: ``cubic`` where the kernel lets a
  namespace use it, else the host's default (:func:`read_ipv4_sysctl` reads what the kernel allows);
* :func:`list_namespaces`, :func:`cleanup_stale` and the owner markers find (and
  delete) namespaces of labs whose process died;
* :func:`find_mpiexec` and :func:`kill_group` are the launcher helpers shared by the
  lab, the benchmark sweep and the test scripts.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .plan import AUTO_TCP_CC, DEFAULT_PREFIX, HOST_TCP_CC, PREFERRED_TCP_CC, Command, namespace_pattern

__all__ = [
    "LabError",
    "LabUnavailableError",
    "MpiexecNotFoundError",
    "Log",
    "quiet",
    "run_command",
    "run_parallel",
    "list_namespaces",
    "lab_available",
    "lab_report",
    "LabReport",
    "require_lab",
    "require_tcp_cc",
    "choose_tcp_cc",
    "TcpChoice",
    "read_ipv4_sysctl",
    "marker_path",
    "cleanup_stale",
    "find_mpiexec",
    "kill_group",
]

_PROBE_RE = re.compile(r"swlprobe(?P<pid>\d+)")
_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21


class LabError(RuntimeError):
    """A lab command failed (the message holds the command and its stderr)."""


class LabUnavailableError(LabError):
    """This machine cannot host a lab (not root, no ``ip netns``, no veth/tbf, no mpiexec...)."""


class MpiexecNotFoundError(LabUnavailableError, FileNotFoundError):
    """No ``mpiexec`` next to the Python interpreter nor on PATH (also a ``FileNotFoundError``)."""


#: A progress callback: one line of text per call.
Log = Callable[[str], None]


def quiet(msg: str) -> None:
    """Drop a progress message (the default :data:`Log`)."""


# ---------------------------------------------------------------------------
# running commands
# ---------------------------------------------------------------------------
def run_command(cmd: Command, *, timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``cmd`` (its ``stdin`` fed in), capture its output; raise :class:`LabError` on failure if ``check``."""
    try:
        res = subprocess.run(
            list(cmd.argv),
            input=cmd.stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except FileNotFoundError as e:
        raise LabUnavailableError(f"{cmd.argv[0]!r} not found: install iproute2") from e
    except subprocess.TimeoutExpired as e:
        raise LabError(f"timed out after {timeout:g} s: {cmd.shell()}") from e
    if check and res.returncode != 0:
        raise LabError(
            f"command failed (exit {res.returncode}): {cmd.shell()}\n{(res.stderr or res.stdout).strip()}"
        )
    return res


def run_parallel(
    cmds: Sequence[Command], *, workers: int = 8, timeout: float = 60.0
) -> list[subprocess.CompletedProcess]:
    """Run independent commands on a few threads; results in the order of ``cmds``; the first failure raises."""
    if not cmds:
        return []
    if len(cmds) == 1:
        return [run_command(cmds[0], timeout=timeout)]
    with ThreadPoolExecutor(max_workers=min(workers, len(cmds))) as pool:
        futures = [pool.submit(run_command, c, timeout=timeout) for c in cmds]
        return [f.result() for f in futures]


def list_namespaces() -> list[str]:
    """Return the names of all named network namespaces (``ip netns list``)."""
    res = run_command(Command(("ip", "netns", "list")), check=False)
    if res.returncode != 0:
        return []
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


# ---------------------------------------------------------------------------
# availability
# ---------------------------------------------------------------------------
def _effective_caps() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except OSError:
        return None
    return None


_IPV4_SYSCTL_DIR = Path("/proc/sys/net/ipv4")


def read_ipv4_sysctl(name: str) -> str | None:
    """Return ``/proc/sys/net/ipv4/<name>`` stripped, or ``None`` where it cannot be read.

    Read from this process's network namespace (the host's when run from a shell). Tests replace
    this function to play a host they are not on.
    """
    try:
        return (_IPV4_SYSCTL_DIR / name).read_text().strip()
    except OSError:
        return None


def _words(name: str) -> list[str] | None:
    text = read_ipv4_sysctl(name)
    return None if text is None else text.split()


@dataclass(frozen=True)
class TcpChoice:
    """The TCP congestion control a lab runs, and how it came to be chosen.

    ``name`` is what its namespaces run (``None`` where the host's default cannot be read);
    ``setting`` is the plan's ``tcp_cc``: ``name`` set in every namespace, or
    :data:`~swing_mpi.lab.plan.HOST_TCP_CC` (set nothing: a new namespace starts with the
    host's default); ``note`` says it in words, for logs and results.
    """

    name: str | None
    setting: str
    note: str


def namespace_tcp_cc_refusal(name: str) -> str | None:
    """Say why this kernel would refuse congestion control ``name`` in a network namespace; ``None`` if it allows it.

    A namespace may set only what ``net.ipv4.tcp_allowed_congestion_control`` lists and the host's
    default (``net.ipv4.tcp_congestion_control``); the kernel must also have it
    (``tcp_available_congestion_control``). Where a file cannot be read, that check is skipped
    (:func:`lab_available` tries the setting for real).
    """
    host = read_ipv4_sysctl("tcp_congestion_control")
    if name == host:
        return None
    available = _words("tcp_available_congestion_control")
    if available is not None and name not in available:
        return (f"this kernel has no TCP congestion control {name!r} (it has {', '.join(available) or 'none'}; "
                f"try 'modprobe tcp_{name}')")
    allowed = _words("tcp_allowed_congestion_control")
    if allowed is not None and name not in allowed:
        return (f"network namespaces here may not use TCP congestion control {name!r} "
                f"(net.ipv4.tcp_allowed_congestion_control is '{' '.join(allowed)}'"
                f"{f', the host default {host}' if host else ''})")
    return None


def choose_tcp_cc(requested: str | None = None, *, strict: bool = True) -> TcpChoice:
    """Pick the lab's TCP congestion control for ``requested``.

    ``None`` or ``"auto"``: :data:`~swing_mpi.lab.plan.PREFERRED_TCP_CC` (``cubic``) where the kernel
    lets a namespace use it, else the host's default. ``"host"``: the host's default. Any other
    name is forced: where the kernel would refuse it, :class:`LabUnavailableError` says why
    (``strict=False``: the choice is returned anyway, its note saying so).
    """
    host = read_ipv4_sysctl("tcp_congestion_control")
    if requested is None or requested == AUTO_TCP_CC:
        refusal = namespace_tcp_cc_refusal(PREFERRED_TCP_CC)
        if refusal is None:
            return TcpChoice(PREFERRED_TCP_CC, PREFERRED_TCP_CC, PREFERRED_TCP_CC)
        return TcpChoice(host, HOST_TCP_CC, f"{host or 'unknown'}, the host's default, in place of "
                                            f"{PREFERRED_TCP_CC}: {refusal}")
    if requested == HOST_TCP_CC:
        return TcpChoice(host, HOST_TCP_CC, f"{host or 'unknown'}, the host's default (--tcp-cc {HOST_TCP_CC})")
    refusal = namespace_tcp_cc_refusal(requested)
    if refusal is None:
        return TcpChoice(requested, requested, f"{requested} (--tcp-cc {requested})")
    if strict:
        raise LabUnavailableError(f"--tcp-cc {requested}: {refusal}; leave --tcp-cc out to use "
                                  f"{PREFERRED_TCP_CC} where allowed, else the host's default")
    return TcpChoice(requested, requested, f"{requested} (--tcp-cc {requested}), which this host refuses: {refusal}")


def require_tcp_cc(name: str) -> None:
    """Raise :class:`LabUnavailableError` if a namespace may not use congestion control ``name``.

    ``auto`` and ``host`` are always fine.
    """
    choose_tcp_cc(name)


@dataclass(frozen=True)
class LabReport:
    """What :func:`lab_report` found: ``problems`` holds one line per missing piece (none: a lab can be built)."""

    problems: tuple[str, ...]
    tcp: TcpChoice | None = None

    @property
    def ok(self) -> bool:
        """Whether a lab can be built here."""
        return not self.problems

    @property
    def reason(self) -> str:
        """Every missing piece on one line, or what works (the congestion control included)."""
        if self.problems:
            return "; ".join(self.problems)
        tcp = f"; TCP congestion control {self.tcp.note}" if self.tcp is not None else ""
        return f"network namespaces, veth, tbf and the lab's sysctls work{tcp}"


def _failure(c: Command, res: subprocess.CompletedProcess) -> str:
    return f"`{c.shell()}` failed: {(res.stderr or res.stdout).strip() or f'exit {res.returncode}'}"


def lab_report(tcp_cc: str | None = None) -> LabReport:
    """Check everything a lab with congestion control ``tcp_cc`` (:func:`choose_tcp_cc`) needs here.

    Checks Linux, ``ip``/``tc``/``sysctl``, the capabilities, that the kernel lets a namespace use
    the congestion control, then really creates a scratch namespace with a veth pair and a token
    bucket and sets in it the ``sysctl`` settings the lab sets, the congestion control among them
    (and deletes it again): containers may grant root yet forbid namespaces or lack the veth/tbf
    modules. Each missing piece is reported.
    """
    if not sys.platform.startswith("linux"):
        return LabReport((f"the lab needs Linux network namespaces (platform is {sys.platform})",))
    problems: list[str] = []
    tcp: TcpChoice | None = None
    try:
        tcp = choose_tcp_cc(tcp_cc)
    except LabUnavailableError as e:
        problems.append(str(e))
    blockers: list[str] = []  # without these the scratch namespace cannot be tried
    missing_tools = [t for t in ("ip", "tc", "sysctl") if shutil.which(t) is None]
    if missing_tools:
        blockers.append(f"{' and '.join(map(repr, missing_tools))} not found on PATH (iproute2, procps)")
    caps = _effective_caps()
    if caps is not None:
        wanted = (("CAP_NET_ADMIN", _CAP_NET_ADMIN), ("CAP_SYS_ADMIN", _CAP_SYS_ADMIN))
        missing = [n for n, b in wanted if not caps >> b & 1]
        if missing:
            blockers.append(f"the lab needs root ({' and '.join(missing)} missing; euid {os.geteuid()})")
    elif os.geteuid() != 0:
        blockers.append(f"the lab needs root (euid {os.geteuid()})")
    problems += blockers or _probe_namespace(tcp)
    return LabReport(tuple(problems), tcp)


def _probe_namespace(tcp: TcpChoice | None) -> list[str]:
    """Build a scratch namespace as the lab would; return what failed (delete it again)."""
    ns = f"swlprobe{os.getpid()}"
    problems: list[str] = []

    def attempt(c: Command) -> bool:
        try:
            res = run_command(c, check=False, timeout=20)
        except LabError as e:
            problems.append(str(e))
            return False
        if res.returncode != 0:
            problems.append(_failure(c, res))
            return False
        return True

    sysctl = ("ip", "netns", "exec", ns, "sysctl", "-q", "-w")
    try:
        if not attempt(Command(("ip", "netns", "add", ns))):
            return problems
        veth = attempt(Command(("ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb")))
        attempt(Command(("tc", "-n", ns, "qdisc", "add", "dev", "pa" if veth else "lo", "root", "tbf",
                         "rate", "1mbit", "burst", "32kb", "latency", "400ms")))
        attempt(Command((*sysctl, "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
                         "net.ipv4.conf.default.rp_filter=0", "net.ipv4.conf.lo.rp_filter=0")))
        if tcp is not None and tcp.setting != HOST_TCP_CC:
            attempt(Command((*sysctl, f"net.ipv4.tcp_congestion_control={tcp.setting}")))
    finally:
        run_command(Command(("ip", "netns", "del", ns)), check=False, timeout=20)
    return problems


def lab_available(tcp_cc: str | None = None) -> tuple[bool, str]:
    """Say whether a lab (with congestion control ``tcp_cc``) can be built here, and why not.

    The reason lists every missing piece (:func:`lab_report`); when the answer is yes it says what
    works, the congestion control the lab will run included.
    """
    report = lab_report(tcp_cc)
    return report.ok, report.reason


def require_lab(tcp_cc: str | None = None) -> None:
    """Raise :class:`LabUnavailableError` with the reason when :func:`lab_available` says no."""
    ok, why = lab_available(tcp_cc)
    if not ok:
        raise LabUnavailableError(f"cannot build the emulated torus lab: {why}")


# ---------------------------------------------------------------------------
# ownership markers and stale cleanup
# ---------------------------------------------------------------------------
def _marker_dir() -> Path:
    for base in (Path("/run"), Path(tempfile.gettempdir())):
        d = base / "swing-mpi-lab"
        try:
            d.mkdir(exist_ok=True)
            return d
        except OSError:
            continue
    return Path(tempfile.gettempdir())


def marker_path(prefix: str, run_id: str) -> Path:
    """Return the file holding the owner's pid of lab run ``prefix + run_id`` (so stale labs can be told apart)."""
    return _marker_dir() / f"{prefix}{run_id}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_alive(prefix: str, run_id: str) -> bool:
    try:
        pid = int(marker_path(prefix, run_id).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    return _pid_alive(pid)


def cleanup_stale(prefix: str = DEFAULT_PREFIX, *, include_live: bool = False, log: Log = quiet) -> list[str]:
    """Delete namespaces left behind by labs with ``prefix``; return the deleted names.

    Labs whose owning process is still alive are kept unless ``include_live``.
    Scratch namespaces of :func:`lab_available` probes are removed too.
    """
    pat = namespace_pattern(prefix)
    doomed: list[str] = []
    runs = set()
    for ns in list_namespaces():
        m = pat.fullmatch(ns)
        if m:
            if include_live or not _owner_alive(prefix, m["run"]):
                doomed.append(ns)
                runs.add(m["run"])
            continue
        p = _PROBE_RE.fullmatch(ns)
        if p and (include_live or not _pid_alive(int(p["pid"]))) and int(p["pid"]) != os.getpid():
            doomed.append(ns)
    if doomed:
        more = ", ..." if len(doomed) > 4 else ""
        log(f"lab: deleting {len(doomed)} stale namespaces ({', '.join(doomed[:4])}{more})")
        run_command(Command(("ip", "-force", "-batch", "-"), "".join(f"netns del {n}\n" for n in doomed)), check=False)
    for run in runs:
        try:
            marker_path(prefix, run).unlink()
        except OSError:
            pass
    return doomed


# ---------------------------------------------------------------------------
# launcher helpers
# ---------------------------------------------------------------------------
def find_mpiexec() -> str:
    """Return ``mpiexec`` next to ``sys.executable`` (the venv's, e.g. from the ``mpich`` wheel), else on PATH.

    Raises :class:`MpiexecNotFoundError` (a ``FileNotFoundError`` and a :class:`LabUnavailableError`)
    when there is none.
    """
    here = Path(sys.executable).parent / "mpiexec"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("mpiexec")
    if found is None:
        raise MpiexecNotFoundError("mpiexec not found next to the Python interpreter nor on PATH (pip install mpich)")
    return found


def kill_group(proc: subprocess.Popen, *, grace: float = 5.0) -> None:
    """End ``proc``'s whole process group (started with ``start_new_session=True``): SIGTERM, then SIGKILL.

    mpiexec's ranks live in that group; killing only mpiexec could leave polling ranks behind.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
