"""Run the commands a lab needs, and say whether this machine can host one.

Everything here talks to the operating system and knows nothing about tori:

* :func:`run_command`/:func:`run_parallel` run :class:`~swing_mpi.lab.plan.Command`
  lines, turning failures into :class:`LabError` with the command and its stderr;
* :func:`lab_available`/:func:`require_lab` check for Linux, iproute2, the
  capabilities, and really create a scratch namespace with a veth pair and a token bucket;
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
from pathlib import Path

from .plan import DEFAULT_PREFIX, HOST_TCP_CC, Command, namespace_pattern

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
    "require_lab",
    "require_tcp_cc",
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


def lab_available() -> tuple[bool, str]:
    """Say whether a lab can be built here, and why not.

    Checks Linux, ``ip``/``tc``, the capabilities, then really creates a scratch
    namespace with a veth pair and a token bucket (and deletes it again): containers
    may grant root yet forbid namespaces or lack the veth/tbf modules.
    """
    if not sys.platform.startswith("linux"):
        return False, f"the lab needs Linux network namespaces (platform is {sys.platform})"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"{tool!r} (iproute2) not found on PATH"
    caps = _effective_caps()
    if caps is not None:
        wanted = (("CAP_NET_ADMIN", _CAP_NET_ADMIN), ("CAP_SYS_ADMIN", _CAP_SYS_ADMIN))
        missing = [n for n, b in wanted if not caps >> b & 1]
        if missing:
            return False, f"the lab needs root ({' and '.join(missing)} missing; euid {os.geteuid()})"
    elif os.geteuid() != 0:
        return False, f"the lab needs root (euid {os.geteuid()})"
    ns = f"swlprobe{os.getpid()}"
    probe = [
        Command(("ip", "netns", "add", ns)),
        Command(("ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb")),
        Command(("tc", "-n", ns, "qdisc", "add", "dev", "pa", "root", "tbf",
                 "rate", "1mbit", "burst", "32kb", "latency", "400ms")),
    ]
    try:
        for c in probe:
            res = run_command(c, check=False, timeout=20)
            if res.returncode != 0:
                return False, f"`{c.shell()}` failed: {(res.stderr or res.stdout).strip()}"
    except LabError as e:
        return False, str(e)
    finally:
        run_command(Command(("ip", "netns", "del", ns)), check=False, timeout=20)
    return True, "network namespaces, veth and tbf work"


def require_lab() -> None:
    """Raise :class:`LabUnavailableError` with the reason when :func:`lab_available` says no."""
    ok, why = lab_available()
    if not ok:
        raise LabUnavailableError(f"cannot build the emulated torus lab: {why}")


_TCP_CC_FILE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")


def require_tcp_cc(name: str) -> None:
    """Raise :class:`LabError` if the kernel has no TCP congestion control ``name`` (``host``: any is fine)."""
    if name == HOST_TCP_CC:
        return
    try:
        available = _TCP_CC_FILE.read_text().split()
    except OSError:
        return  # cannot tell; sysctl will say it when the lab sets it
    if name not in available:
        have = ", ".join(available) or "none listed"
        raise LabError(f"TCP congestion control {name!r} is not available here (the kernel has {have}; "
                       f"try 'modprobe tcp_{name}', or --tcp-cc {HOST_TCP_CC})")


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
