"""Build, check, use and tear down an emulated torus made of network namespaces.

:class:`Lab` executes a :class:`~swing_mpi.lab.plan.LabPlan`::

    with Lab("4x4", rate_mbit=40) as lab:      # builds; always tears down on exit
        lab.check()                             # routes and link rates, printed as a table
        lab.run_mpi(["python", "bench.py"], timeout=120)   # every rank in its own node

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), ``ip`` and ``tc`` from iproute2, and
the ``veth`` and ``sch_tbf`` kernel modules; :func:`lab_available` says whether they
are there and :class:`LabUnavailable` is raised when they are not.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..topology import DimsLike, Torus
from .plan import (
    DEFAULT_MTU,
    DEFAULT_PREFIX,
    DEFAULT_RATE_MBIT,
    Command,
    LabPlan,
    make_plan,
    namespace_pattern,
)

__all__ = [
    "Lab",
    "LabError",
    "LabUnavailable",
    "CheckResult",
    "RateResult",
    "lab_available",
    "require_lab",
    "cleanup_stale",
    "list_namespaces",
    "find_mpiexec",
    "MPI_ENV",
]

#: Environment that makes MPICH talk over the network (TCP through libfabric), never
#: through shared memory, so every byte crosses the emulated links.
MPI_ENV: dict[str, str] = {
    "MPIR_CVAR_NOLOCAL": "1",
    "MPIR_CVAR_CH4_NETMOD": "ofi",
    "FI_PROVIDER": "tcp",
}

_PROBE_RE = re.compile(r"swlprobe(?P<pid>\d+)")
_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21
_AGENT_PORT = 47011


class LabError(RuntimeError):
    """A lab command failed (the message holds the command and its stderr)."""


class LabUnavailable(LabError):
    """This machine cannot host a lab (not root, no ``ip netns``, no veth/tbf...)."""


Log = Callable[[str], None]


def _nolog(msg: str) -> None:
    pass


# ---------------------------------------------------------------------------
# running commands
# ---------------------------------------------------------------------------
def _run(cmd: Command, *, timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess:
    try:
        res = subprocess.run(
            list(cmd.argv),
            input=cmd.stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except FileNotFoundError as e:
        raise LabUnavailable(f"{cmd.argv[0]!r} not found: install iproute2") from e
    except subprocess.TimeoutExpired as e:
        raise LabError(f"timed out after {timeout:g} s: {cmd.shell()}") from e
    if check and res.returncode != 0:
        raise LabError(
            f"command failed (exit {res.returncode}): {cmd.shell()}\n{(res.stderr or res.stdout).strip()}"
        )
    return res


def _run_parallel(cmds: Sequence[Command], *, workers: int = 8, timeout: float = 60.0) -> list[subprocess.CompletedProcess]:
    if not cmds:
        return []
    if len(cmds) == 1:
        return [_run(cmds[0], timeout=timeout)]
    with ThreadPoolExecutor(max_workers=min(workers, len(cmds))) as pool:
        futures = [pool.submit(_run, c, timeout=timeout) for c in cmds]
        return [f.result() for f in futures]


def list_namespaces() -> list[str]:
    """Names of all named network namespaces (``ip netns list``)."""
    res = _run(Command(("ip", "netns", "list")), check=False)
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
    """Whether a lab can be built here, and why not.

    Checks Linux, ``ip``/``tc``, the capabilities, then really creates a scratch
    namespace with a veth pair and a token bucket (and deletes it again).
    """
    if not sys.platform.startswith("linux"):
        return False, f"the lab needs Linux network namespaces (platform is {sys.platform})"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"{tool!r} (iproute2) not found on PATH"
    caps = _effective_caps()
    if caps is not None:
        missing = [n for n, b in (("CAP_NET_ADMIN", _CAP_NET_ADMIN), ("CAP_SYS_ADMIN", _CAP_SYS_ADMIN)) if not caps >> b & 1]
        if missing:
            return False, f"the lab needs root ({' and '.join(missing)} missing; euid {os.geteuid()})"
    elif os.geteuid() != 0:
        return False, f"the lab needs root (euid {os.geteuid()})"
    ns = f"swlprobe{os.getpid()}"
    probe = [
        Command(("ip", "netns", "add", ns)),
        Command(("ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb")),
        Command(("tc", "-n", ns, "qdisc", "add", "dev", "pa", "root", "tbf", "rate", "1mbit", "burst", "32kb", "latency", "400ms")),
    ]
    try:
        for c in probe:
            res = _run(c, check=False, timeout=20)
            if res.returncode != 0:
                return False, f"`{c.shell()}` failed: {(res.stderr or res.stdout).strip()}"
    except LabError as e:
        return False, str(e)
    finally:
        _run(Command(("ip", "netns", "del", ns)), check=False, timeout=20)
    return True, "network namespaces, veth and tbf work"


def require_lab() -> None:
    """Raise :class:`LabUnavailable` with the reason when :func:`lab_available` says no."""
    ok, why = lab_available()
    if not ok:
        raise LabUnavailable(f"cannot build the emulated torus lab: {why}")


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
        pid = int((_marker_dir() / f"{prefix}{run_id}").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    return _pid_alive(pid)


def cleanup_stale(prefix: str = DEFAULT_PREFIX, *, include_live: bool = False, log: Log = _nolog) -> list[str]:
    """Delete namespaces left behind by labs with ``prefix``; returns the deleted names.

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
        log(f"lab: deleting {len(doomed)} stale namespaces ({', '.join(doomed[:4])}{', ...' if len(doomed) > 4 else ''})")
        _run(Command(("ip", "-force", "-batch", "-"), "".join(f"netns del {n}\n" for n in doomed)), check=False)
    for run in runs:
        try:
            (_marker_dir() / f"{prefix}{run}").unlink()
        except OSError:
            pass
    return doomed


# ---------------------------------------------------------------------------
# mpiexec
# ---------------------------------------------------------------------------
def find_mpiexec() -> str:
    """``mpiexec`` next to ``sys.executable`` (the venv's, e.g. from the ``mpich`` wheel), else on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("mpiexec")
    if found is None:
        raise LabUnavailable("mpiexec not found next to the Python interpreter nor on PATH (pip install mpich)")
    return found


# ---------------------------------------------------------------------------
# check results
# ---------------------------------------------------------------------------
@dataclass
class RateResult:
    """One link-rate test: MB/s received on each flow against the configured rate."""

    name: str
    description: str
    flows: list[tuple[int, int]]
    mb_per_s: list[float]
    rate_mb_per_s: float

    @property
    def mean(self) -> float:
        return sum(self.mb_per_s) / len(self.mb_per_s) if self.mb_per_s else 0.0

    @property
    def min(self) -> float:
        return min(self.mb_per_s) if self.mb_per_s else 0.0

    @property
    def max(self) -> float:
        return max(self.mb_per_s) if self.mb_per_s else 0.0

    @property
    def fraction(self) -> float:
        """Mean per-flow rate as a fraction of the configured link rate."""
        return self.mean / self.rate_mb_per_s


@dataclass
class CheckResult:
    """What :meth:`Lab.check` found."""

    pairs_checked: int
    route_errors: list[str] = field(default_factory=list)
    max_hops: int = 0
    rates: list[RateResult] = field(default_factory=list)
    min_fraction: float = 0.5

    @property
    def routes_ok(self) -> bool:
        return not self.route_errors

    @property
    def ok(self) -> bool:
        """Routes all right, and every test's rate at least ``min_fraction`` of the link rate.

        Tests of a few flows are judged by their slowest flow; the test of every
        link at once by its mean: with 64 TCP flows on two cores, single flows
        are starved for moments by CPU scheduling (seen at ~1.6 MB/s next to
        ~5 MB/s ones), which says nothing about the links.
        """
        def good(r: RateResult) -> bool:
            got = r.mean if len(r.flows) > 8 else r.min
            return bool(r.mb_per_s) and got >= self.min_fraction * r.rate_mb_per_s

        return self.routes_ok and all(good(r) for r in self.rates)

    def table(self) -> str:
        """A readable report."""
        lines = [
            f"routes: {self.pairs_checked} ordered pairs walked hop by hop with `ip route get`: "
            + ("all minimal dimension-order" if self.routes_ok else f"{len(self.route_errors)} WRONG")
            + f" (longest {self.max_hops} hops)"
        ]
        lines += [f"  ! {e}" for e in self.route_errors[:10]]
        if self.rates:
            rate = self.rates[0].rate_mb_per_s
            lines.append(f"link rates (configured {rate:.3g} MB/s per direction):")
            lines.append(f"  {'test':<6} {'flows':>5} {'mean MB/s':>10} {'min':>7} {'max':>7} {'% of R':>7}  what")
            for r in self.rates:
                lines.append(
                    f"  {r.name:<6} {len(r.flows):>5} {r.mean:>10.3f} {r.min:>7.3f} {r.max:>7.3f} "
                    f"{100 * r.fraction:>6.1f}%  {r.description}"
                )
        lines.append("check: " + ("OK" if self.ok else "FAILED"))
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pairs_checked": self.pairs_checked,
            "route_errors": list(self.route_errors),
            "max_hops": self.max_hops,
            "rates": [
                {
                    "name": r.name,
                    "description": r.description,
                    "flows": [list(f) for f in r.flows],
                    "mb_per_s": r.mb_per_s,
                    "mean": r.mean,
                    "fraction": r.fraction,
                    "rate_mb_per_s": r.rate_mb_per_s,
                }
                for r in self.rates
            ],
        }


_ROUTE_GET_RE = re.compile(r"^(?P<dst>\d+\.\d+\.\d+\.\d+)\s+(?:via\s+(?P<via>\S+)\s+)?dev\s+(?P<dev>\S+)")


# ---------------------------------------------------------------------------
# the lab
# ---------------------------------------------------------------------------
class Lab:
    """An emulated torus: one namespace per node, one rate-limited veth pair per link.

    Use it as a context manager: ``__enter__`` builds (after checking that it can),
    ``__exit__`` always tears down, also on an exception, Ctrl-C, SIGTERM or SIGHUP
    (those two are turned into ``SystemExit`` while the lab exists, when entered from
    the main thread). :meth:`build`/:meth:`teardown` do the same by hand.
    """

    def __init__(
        self,
        torus: Torus | DimsLike,
        *,
        rate_mbit: float = DEFAULT_RATE_MBIT,
        mtu: int = DEFAULT_MTU,
        prefix: str = DEFAULT_PREFIX,
        run_id: str | None = None,
        log: Log | None = None,
    ) -> None:
        self.torus = torus if isinstance(torus, Torus) else Torus.from_spec(torus)
        self._prefix = prefix
        self._rate_mbit = rate_mbit
        self._mtu = mtu
        self._run_id = run_id
        self._user_log: Log = log or _nolog
        self.plan: LabPlan = make_plan(self.torus, run_id=run_id or "0", prefix=prefix, rate_mbit=rate_mbit, mtu=mtu)
        self.built = False
        self.build_seconds: float | None = None
        self.teardown_seconds: float | None = None
        self._tmpdir: Path | None = None
        self._old_handlers: dict[int, Any] = {}

    def log(self, msg: str) -> None:
        """Progress message to the ``log`` callable; never raises (teardown must go on)."""
        try:
            self._user_log(msg)
        except Exception:
            pass

    # -- names --------------------------------------------------------------
    @property
    def namespaces(self) -> tuple[str, ...]:
        return self.plan.namespaces

    def namespace(self, rank: int) -> str:
        return self.plan.namespace(rank)

    def address(self, rank: int) -> str:
        return self.plan.address(rank)

    # -- lifecycle ------------------------------------------------------------
    def __enter__(self) -> Lab:
        self._install_signal_handlers()
        try:
            self.build()
        except BaseException:
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.teardown()
        finally:
            self._restore_signal_handlers()

    def _pick_run_id(self) -> str:
        taken = {m["run"] for m in map(namespace_pattern(self._prefix).fullmatch, list_namespaces()) if m}
        if self._run_id is not None:
            if self._run_id in taken:
                raise LabError(f"namespaces of lab run {self._prefix}{self._run_id} already exist")
            return self._run_id
        while True:
            rid = secrets.token_hex(2)
            if rid not in taken:
                return rid

    def build(self) -> None:
        """Create the namespaces, links, addresses, token buckets and routes.

        On failure everything built so far is torn down again before raising.
        """
        if self.built:
            raise LabError("lab already built")
        require_lab()
        t0 = time.perf_counter()
        rid = self._pick_run_id()
        self.plan = make_plan(self.torus, run_id=rid, prefix=self._prefix, rate_mbit=self._rate_mbit, mtu=self._mtu)
        self.built = True  # from here on, teardown has something to do
        try:
            (_marker_dir() / f"{self._prefix}{rid}").write_text(f"{os.getpid()}\n")
            self.log(f"lab: building {self.plan.describe()}")
            for phase in self.plan.setup_phases():
                _run_parallel(phase)
            self._tmpdir = Path(tempfile.mkdtemp(prefix=f"swing-mpi-lab-{rid}-"))
            self._write_wrapper()
        except BaseException:
            self.teardown()
            raise
        self.build_seconds = time.perf_counter() - t0
        self.log(f"lab: built in {self.build_seconds:.2f} s")

    def teardown(self) -> None:
        """Delete the lab's namespaces (and so its veths), its wrapper and marker. Idempotent."""
        if not self.built:
            return
        blocked = self._block_signals()
        try:
            t0 = time.perf_counter()
            self.log(f"lab: tearing down {len(self.namespaces)} namespaces")
            for c in self.plan.teardown_commands():
                _run(c, check=False)
            left = [n for n in list_namespaces() if n in set(self.namespaces)]
            if left:  # one more try, one by one
                for n in left:
                    _run(Command(("ip", "netns", "del", n)), check=False)
            if self._tmpdir is not None:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
                self._tmpdir = None
            try:
                (_marker_dir() / f"{self.plan.prefix}{self.plan.run_id}").unlink()
            except OSError:
                pass
            self.built = False
            self.teardown_seconds = time.perf_counter() - t0
            left = [n for n in list_namespaces() if n in set(self.namespaces)]
            if left:
                raise LabError(f"could not delete namespaces {left}")
        finally:
            self._unblock_signals(blocked)

    # -- signals ------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def _raise(signum: int, frame: Any) -> None:
            raise SystemExit(128 + signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._old_handlers[sig] = signal.signal(sig, _raise)
            except (ValueError, OSError):
                pass

    def _restore_signal_handlers(self) -> None:
        for sig, h in self._old_handlers.items():
            try:
                signal.signal(sig, h)
            except (ValueError, OSError):
                pass
        self._old_handlers.clear()

    @staticmethod
    def _block_signals() -> set | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        return set(signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}))

    @staticmethod
    def _unblock_signals(old: set | None) -> None:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    # -- running MPI --------------------------------------------------------
    def _require_built(self) -> None:
        if not self.built:
            raise LabError("the lab is not built (use `with Lab(...) as lab:`)")

    @property
    def wrapper(self) -> Path:
        """The script that runs ``"$@"`` in the namespace of node ``$PMI_RANK``."""
        self._require_built()
        assert self._tmpdir is not None
        return self._tmpdir / "lab-exec.sh"

    def _write_wrapper(self) -> None:
        assert self._tmpdir is not None
        ip = shutil.which("ip") or "ip"
        head = f"{self.plan.prefix}{self.plan.run_id}n"
        path = self._tmpdir / "lab-exec.sh"
        path.write_text(
            "#!/bin/sh\n"
            "# swing_mpi lab: run this MPI rank inside the namespace of its torus node.\n"
            "# hydra sets PMI_RANK; the PMI connection is an inherited fd, so it crosses namespaces.\n"
            'r="${PMI_RANK:?PMI_RANK is not set: run me under MPICH hydra mpiexec}"\n'
            f'exec {ip} netns exec "{head}$r" "$@"\n'
        )
        path.chmod(0o755)

    def exec_argv(self, rank: int, cmd: Sequence[str]) -> list[str]:
        """``cmd`` run inside node ``rank``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(rank), *cmd]

    def mpi_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment every rank gets: :data:`MPI_ENV`, then ``env`` on top."""
        out = dict(MPI_ENV)
        out.update(env or {})
        return out

    def mpiexec_argv(
        self,
        nprocs: int | None,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
        mpiexec: str | None = None,
    ) -> list[str]:
        """The command line running ``cmd`` as ``nprocs`` ranks, rank ``r`` in node ``r``.

        ``env`` is passed to every rank (``-genv``) on top of :data:`MPI_ENV`.
        ``timeout`` becomes ``MPIEXEC_TIMEOUT`` (hydra kills the job after it), set
        through ``env`` at the front of the line. ``nprocs=None`` means the torus size.
        A leading ``python``/``python3`` in ``cmd`` is replaced by ``sys.executable``.
        """
        self._require_built()
        n = self.torus.size if nprocs is None else int(nprocs)
        if not 1 <= n <= self.torus.size:
            raise ValueError(f"nprocs must be within 1..{self.torus.size}, got {nprocs}")
        if not cmd:
            raise ValueError("no command to run")
        cmd = list(cmd)
        if cmd[0] in ("python", "python3"):
            cmd[0] = sys.executable
        argv = ["env", f"MPIEXEC_TIMEOUT={max(1, int(round(timeout)))}", mpiexec or find_mpiexec(), "-n", str(n)]
        for k, v in self.mpi_env(env).items():
            argv += ["-genv", k, str(v)]
        return argv + [str(self.wrapper), *cmd]

    def run_mpi(
        self,
        cmd: Sequence[str],
        *,
        nprocs: int | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
        capture: bool = False,
        check: bool = False,
    ) -> subprocess.CompletedProcess:
        """Run ``cmd`` under :meth:`mpiexec_argv` and wait (at most ``timeout`` + 30 s).

        On a timeout or interruption the whole mpiexec process group is killed.
        ``capture=True`` collects stdout/stderr as text.
        """
        argv = self.mpiexec_argv(nprocs, cmd, env=env, timeout=timeout)
        shown = shlex.join(cmd)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        self.log(f"lab: running {shown} on {nprocs or self.torus.size} ranks (MPIEXEC_TIMEOUT {timeout:g} s)")
        kw: dict[str, Any] = {"text": True}
        if capture:
            kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        try:
            out, err = proc.communicate(timeout=timeout + 30)
        except BaseException:
            _kill_group(proc)
            raise
        res = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if check and res.returncode != 0:
            raise LabError(f"mpiexec exited {res.returncode}: {' '.join(cmd)}\n{(err or '')[-4000:]}")
        return res

    # -- checks -------------------------------------------------------------
    def check(
        self,
        *,
        seconds: float = 1.5,
        rates: bool = True,
        print_table: bool = True,
        min_fraction: float = 0.5,
    ) -> CheckResult:
        """Verify the lab before measuring on it.

        Routes: every node's kernel is asked (``ip route get``) for every destination;
        the answers must match the plan, and the walk from every node to every other
        must take exactly ``Torus.distance`` hops. Rates: TCP blasts (plain Python
        sockets, ``seconds`` each) measure MB/s per flow for ``one`` port alone, for all
        ports of ``node`` 0 at once, for a ``far`` multi-hop pair, and for ``all``
        ports of all nodes at once in both directions (the load of a neighbour
        exchange). Prints :meth:`CheckResult.table` unless ``print_table=False``.
        """
        self._require_built()
        res = self._check_routes()
        res.min_fraction = min_fraction
        if rates and self.plan.links:
            res.rates = self._check_rates(seconds)
        if print_table:
            print(res.table(), flush=True)
        return res

    def _check_routes(self) -> CheckResult:
        plan = self.plan
        n = plan.size
        addr_to_rank = {a: r for r, a in enumerate(plan.addresses)}
        cmds = [
            Command(("ip", "-n", plan.namespace(r), "-batch", "-"), "".join(f"route get {plan.address(d)}\n" for d in range(n) if d != r))
            for r in range(n)
        ]
        nexthop: dict[tuple[int, int], int] = {}
        errors: list[str] = []
        for r, out in enumerate(_run_parallel(cmds)):
            for line in out.stdout.splitlines():
                m = _ROUTE_GET_RE.match(line)
                if not m:
                    continue
                d = addr_to_rank.get(m["dst"])
                if d is None:
                    continue
                via = addr_to_rank.get(m["via"] or m["dst"])
                want = plan.route(r, d)
                if via != want.via or m["dev"] != want.port.name:
                    errors.append(f"node {r} -> {d}: kernel says via {m['via']} dev {m['dev']}, plan says via {want.via_addr} dev {want.port.name}")
                if via is not None:
                    nexthop[(r, d)] = via
        max_hops = 0
        pairs = 0
        for s in range(n):
            for d in range(n):
                if s == d:
                    continue
                pairs += 1
                cur, hops, dims_seen = s, 0, -1
                while cur != d and hops <= n:
                    nxt = nexthop.get((cur, d))
                    if nxt is None:
                        errors.append(f"node {cur} has no route to {d}")
                        break
                    k = next(i for i, (a, b) in enumerate(zip(self.torus.coords(cur), self.torus.coords(nxt))) if a != b)
                    if k < dims_seen:
                        errors.append(f"{s} -> {d}: not in dimension order at {cur} -> {nxt}")
                    dims_seen = k
                    cur, hops = nxt, hops + 1
                else:
                    if hops != self.torus.distance(s, d):
                        errors.append(f"{s} -> {d}: {hops} hops, torus distance {self.torus.distance(s, d)}")
                max_hops = max(max_hops, hops)
        return CheckResult(pairs_checked=pairs, route_errors=errors, max_hops=max_hops)

    def _check_rates(self, seconds: float) -> list[RateResult]:
        plan = self.plan
        t = self.torus
        rate = plan.rate_bytes_per_s / 1e6
        ports0 = plan.ports(0)
        nb = [plan.neighbor(p) for p in ports0]
        far = max(range(t.size), key=lambda r: (t.distance(0, r), -r))
        tests: list[tuple[str, str, list[tuple[int, int]]]] = [
            ("one", f"node 0 -> {nb[0]} over {ports0[0].name} alone", [(0, nb[0])]),
        ]
        if len(ports0) > 1:
            tests.append(("node", f"node 0 -> all {len(ports0)} neighbours at once", [(0, b) for b in nb]))
        if t.distance(0, far) > 1:
            tests.append(("far", f"node 0 -> {far}, {t.distance(0, far)} hops", [(0, far)]))
        all_flows = [(p.node, plan.neighbor(p)) for r in range(t.size) for p in plan.ports(r)]
        tests.append(("all", f"every node -> every neighbour at once ({len(all_flows)} flows)", all_flows))
        out = []
        for name, desc, flows in tests:
            self.log(f"lab: rate test {name!r}: {desc}")
            mbps = self._blast(flows, seconds)
            out.append(RateResult(name, desc, flows, mbps, rate))
        return out

    def _blast(self, flows: Sequence[tuple[int, int]], seconds: float, *, warm: float = 0.5) -> list[float]:
        """Run TCP flows ``(src, dst)`` at once; MB/s each receives in the measured window."""
        plan = self.plan
        nodes = sorted({n for f in flows for n in f})
        start = time.time() + 1.0 + 0.08 * len(nodes)
        procs: dict[int, subprocess.Popen] = {}
        pkg_parent = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            for r in nodes:
                cfg = {
                    "addr": plan.address(r),
                    "port": _AGENT_PORT,
                    "recv_from": [plan.address(s) for s, d in flows if d == r],
                    "send_to": [plan.address(d) for s, d in flows if s == r],
                    "start": start,
                    "warm": warm,
                    "seconds": seconds,
                }
                argv = self.exec_argv(
                    r,
                    [sys.executable, "-c", "from swing_mpi.lab.netns import _agent_main; _agent_main()", json.dumps(cfg)],
                )
                procs[r] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            results: dict[int, dict[str, float]] = {}
            deadline = start + warm + seconds + 20
            for r, p in procs.items():
                out, err = p.communicate(timeout=max(1.0, deadline - time.time()))
                if p.returncode != 0:
                    raise LabError(f"rate agent in {plan.namespace(r)} failed: {err.strip()[-2000:]}")
                results[r] = json.loads(out)
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return [results[d].get(plan.address(s), 0.0) / 1e6 for s, d in flows]


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


# ---------------------------------------------------------------------------
# the rate agent (runs inside one namespace; plain sockets, no MPI)
# ---------------------------------------------------------------------------
def _agent_main() -> None:
    """Entry of the per-node TCP blast agent: config JSON in argv[1], rates JSON on stdout.

    Receives one connection from each ``recv_from`` address and sends to each
    ``send_to`` address from ``start`` until ``start + warm + seconds``; prints the
    bytes per second received from each sender within ``[start + warm, start + warm +
    seconds]``.
    """
    cfg = json.loads(sys.argv[1])
    start, warm, secs = cfg["start"], cfg["warm"], cfg["seconds"]
    w0, w1 = start + warm, start + warm + secs
    counted: dict[str, int] = {}
    errors: list[str] = []
    lock = threading.Lock()

    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((cfg["addr"], cfg["port"]))
    srv.listen(64)
    srv.settimeout(max(5.0, w1 - time.time() + 5))

    def receiver(conn: socket.socket, peer: str) -> None:
        buf = bytearray(1 << 20)
        n_in = 0
        conn.settimeout(w1 - time.time() + 10)
        try:
            while True:
                k = conn.recv_into(buf)
                if not k:
                    break
                now = time.time()
                if w0 <= now <= w1:
                    n_in += k
                if now > w1:
                    break
        except OSError as e:
            with lock:
                errors.append(f"recv from {peer}: {e}")
        finally:
            conn.close()
        with lock:
            counted[peer] = counted.get(peer, 0) + n_in

    def acceptor() -> None:
        threads = []
        try:
            for _ in cfg["recv_from"]:
                conn, (peer, _) = srv.accept()
                th = threading.Thread(target=receiver, args=(conn, peer))
                th.start()
                threads.append(th)
        except OSError as e:
            with lock:
                errors.append(f"accept: {e}")
        for th in threads:
            th.join()

    def sender(dst: str) -> None:
        payload = b"\0" * (256 << 10)
        time.sleep(max(0.0, start - time.time()))
        s = None
        while s is None:
            try:
                s = socket.create_connection((dst, cfg["port"]), timeout=2, source_address=(cfg["addr"], 0))
            except OSError as e:
                if time.time() > start + 3:
                    with lock:
                        errors.append(f"connect to {dst}: {e}")
                    return
                time.sleep(0.05)
        s.settimeout(10)
        try:
            while time.time() < w1 + 0.1:
                s.sendall(payload)
        except OSError:
            pass  # the receiver stops reading once its window is over
        finally:
            s.close()

    acc = threading.Thread(target=acceptor)
    acc.start()
    senders = [threading.Thread(target=sender, args=(d,)) for d in cfg["send_to"]]
    for th in senders:
        th.start()
    for th in senders:
        th.join()
    acc.join()
    srv.close()
    if errors:
        print("; ".join(errors), file=sys.stderr)
        sys.exit(1)
    print(json.dumps({peer: b / secs for peer, b in counted.items()}))
