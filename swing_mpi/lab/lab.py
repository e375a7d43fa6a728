r"""Build, check, use and tear down an emulated torus made of network namespaces.

:class:`Lab` executes a :class:`~swing_mpi.lab.plan.LabPlan`::

    with Lab("4x4", rate_mbit=40) as lab:      # builds; always tears down on exit
        lab.check()                             # routes and link rates, printed as a table
        lab.run_mpi(["python", "bench.py"], timeout=120)   # every rank in its own node

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), ``ip`` and ``tc`` from iproute2, and
the ``veth`` and ``sch_tbf`` kernel modules; :func:`~swing_mpi.lab.system.lab_available`
says whether they are there and :class:`~swing_mpi.lab.system.LabUnavailableError` is raised
when they are not.

Every rank is started by ``mpiexec`` through a small wrapper script that reads the
rank from the launcher's environment (``PMI_RANK`` under MPICH's hydra,
``OMPI_COMM_WORLD_RANK`` or ``PMIX_RANK`` under Open MPI) and ``exec``\\ s the program
inside that node's namespace. :data:`MPI_ENV` makes MPICH send every byte over TCP, so
through the emulated links, never through shared memory.

With ``ranks_per_node=K > 1`` each namespace holds ``K`` ranks: consecutive ranks
``b*K .. b*K+K-1`` run in node ``b`` (or ``placement[b]``), and MPICH's hydra is told so
(``-launcher fork -hosts <namespace>:K,...``: every namespace a host of its own, all started
on this machine). The ranks of a node then talk through shared memory and the nodes over
the links (:func:`lab_mpi_env` leaves out ``MPIR_CVAR_NOLOCAL``). Only hydra can do that
(:func:`launcher_kind`).
"""

from __future__ import annotations

import functools
import os
import random
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..topology import DimsLike, Torus
from .checks import CheckResult, check_rates, check_routes
from .plan import (
    DEFAULT_BURST_KIB,
    DEFAULT_MTU,
    DEFAULT_PREFIX,
    DEFAULT_QUEUE_MS,
    DEFAULT_RATE_MBIT,
    DEFAULT_TCP_CC,
    Command,
    LabPlan,
    make_plan,
    namespace_pattern,
)
from .system import (
    LabError,
    LabUnavailableError,
    Log,
    TcpChoice,
    choose_tcp_cc,
    find_mpiexec,
    kill_group,
    lab_report,
    list_namespaces,
    marker_path,
    quiet,
    run_command,
    run_parallel,
)

__all__ = ["Lab", "MPI_ENV", "RANK_VARIABLES", "wrapper_script", "parse_placement", "lab_mpi_env", "hosts_argument",
           "launch_argv", "launcher_kind", "check_ranks_per_node", "NODE_VARIABLES"]

#: Environment that makes MPICH talk over the network (TCP through libfabric), never
#: through shared memory, so every byte crosses the emulated links. How our ranks wait is
#: left to the library's own rule (:func:`swing_mpi.waiting.node_policy`): the lab's ranks
#: share one host name and more ranks than cores, so they wait sleeping (``backoff``).
MPI_ENV: dict[str, str] = {
    "MPIR_CVAR_NOLOCAL": "1",
    "MPIR_CVAR_CH4_NETMOD": "ofi",
    "FI_PROVIDER": "tcp",
}

#: Where launchers put a rank's number, tried in this order by the namespace wrapper:
#: MPICH's hydra (PMI), Open MPI's mpirun, and any PMIx launcher.
RANK_VARIABLES: tuple[str, ...] = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")

#: What the namespace wrapper tells every rank: its node (row-major), and with several ranks per
#: node its index inside the node and its place ``node * K + local`` on the flat torus ``dims + (K,)``.
NODE_VARIABLES: tuple[str, ...] = ("SWING_LAB_NODE", "SWING_LAB_LOCAL", "SWING_LAB_SLOT")


def check_ranks_per_node(k: object) -> int:
    """Return ``k`` as a whole number of ranks per node (at least 1), else raise ``ValueError``."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"ranks per node must be a whole number of at least 1, got {k!r}")
    return k


def lab_mpi_env(ranks_per_node: int = 1, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment every rank gets: :data:`MPI_ENV`, then ``env`` on top.

    With several ranks per node ``MPIR_CVAR_NOLOCAL`` is left out: the ranks of one node then
    talk through shared memory (hydra puts them on one host), the nodes still over TCP.
    """
    out = dict(MPI_ENV)
    if check_ranks_per_node(ranks_per_node) > 1:
        del out["MPIR_CVAR_NOLOCAL"]
    out.update(env or {})
    return out


def hosts_argument(plan: LabPlan, ranks_per_node: int, placement: Sequence[int] | None = None) -> str:
    """Return hydra's ``-hosts`` value: one made-up host per node, named after its namespace, ``K`` slots each.

    Hydra fills the hosts in order, so ranks ``b*K .. b*K+K-1`` share the ``b``-th host: node
    ``placement[b]`` (default ``b``), the node :func:`wrapper_script` puts them in.
    """
    k = check_ranks_per_node(ranks_per_node)
    order = range(plan.size) if placement is None else placement
    return ",".join(f"{plan.namespace(int(node))}:{k}" for node in order)


@functools.lru_cache(maxsize=8)
def launcher_kind(mpiexec: str) -> str:
    """Say which launcher ``mpiexec`` is: ``hydra`` (MPICH's), ``openmpi`` or ``other`` (from ``--version``)."""
    try:
        res = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "other"
    text = res.stdout + res.stderr
    if "HYDRA" in text:
        return "hydra"
    return "openmpi" if "Open MPI" in text or "OpenRTE" in text or "PRRTE" in text else "other"


def launch_argv(
    plan: LabPlan,
    cmd: Sequence[str],
    *,
    wrapper: str | os.PathLike[str],
    mpiexec: str,
    nprocs: int | None = None,
    ranks_per_node: int = 1,
    placement: Sequence[int] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
    launcher: str | None = None,
) -> list[str]:
    """Return the command line running ``cmd`` as ``nprocs`` ranks of ``plan`` through ``wrapper``.

    ``nprocs=None`` means every slot: the torus size times ``ranks_per_node``. ``env`` is passed
    to every rank (``-genv``) on top of :func:`lab_mpi_env`; ``timeout`` becomes
    ``MPIEXEC_TIMEOUT``; a leading ``python``/``python3`` in ``cmd`` becomes ``sys.executable``.
    With ``ranks_per_node > 1`` the line names one host per node (:func:`hosts_argument`) and
    hydra's ``fork`` launcher; ``launcher`` is :func:`launcher_kind` of ``mpiexec`` (asked when
    ``None``), and anything but ``hydra`` raises :class:`LabError`.
    """
    k = check_ranks_per_node(ranks_per_node)
    slots = plan.size * k
    n = slots if nprocs is None else int(nprocs)
    if not 1 <= n <= slots:
        raise ValueError(f"nprocs must be within 1..{slots}, got {nprocs}")
    if not cmd:
        raise ValueError("no command to run")
    cmd = list(cmd)
    if cmd[0] in ("python", "python3"):
        cmd[0] = sys.executable
    argv = ["env", f"MPIEXEC_TIMEOUT={max(1, int(round(timeout)))}", mpiexec]
    if k > 1:
        kind = launcher if launcher is not None else launcher_kind(mpiexec)
        if kind != "hydra":
            raise LabError(
                f"{k} ranks per node need MPICH's mpiexec (hydra), which runs the ranks of made-up hosts on this "
                f"machine (-launcher fork -hosts) and puts ranks of one host on shared memory; {mpiexec} is "
                f"{'Open MPI' if kind == 'openmpi' else 'another launcher'}"
                f"{', whose mpirun starts a host it is not on through ssh' if kind == 'openmpi' else ''}: "
                "use the mpich wheel's mpiexec, or one rank per node")
        argv += ["-launcher", "fork", "-hosts", hosts_argument(plan, k, placement)]
    argv += ["-n", str(n)]
    for key, v in lab_mpi_env(k, env).items():
        argv += ["-genv", key, str(v)]
    return argv + [str(wrapper), *cmd]


def wrapper_script(plan: LabPlan, *, ip: str = "ip", placement: Sequence[int] | None = None,
                   ranks_per_node: int = 1) -> str:
    """Return the shell script that runs ``"$@"`` as this rank inside its node's namespace of ``plan``.

    The rank comes from the first of :data:`RANK_VARIABLES` that is set; with none set
    the script says so and exits 127. Rank ``r`` runs in node ``placement[r]`` (default:
    node ``r``), and finds its node's number in ``$SWING_LAB_NODE`` (``swing-mpi bench
    --node-env SWING_LAB_NODE`` turns it into torus coordinates). With ``ranks_per_node=K > 1``
    rank ``r`` runs in node ``placement[r // K]`` (default ``r // K``) and also finds
    ``$SWING_LAB_LOCAL`` (``r % K``) and ``$SWING_LAB_SLOT`` (``node * K + r % K``, its place on the
    flat torus ``dims + (K,)``). The launcher's connection to the rank is an inherited file
    descriptor (or a socket path), so it crosses the namespace switch.
    """
    k = check_ranks_per_node(ranks_per_node)
    rank = "".join("${" + v + ":-" for v in RANK_VARIABLES) + "}" * len(RANK_VARIABLES)
    names = " or ".join(RANK_VARIABLES)
    head = shlex.quote(f"{plan.prefix}{plan.run_id}n")
    block = "r" if k == 1 else "b"
    node = f'n="${block}"\n'
    if placement is not None:
        table = " ".join(str(int(x)) for x in placement)
        node = (f'n=$(echo "{table}" | cut -d" " -f$(({block} + 1)))\n'
                '[ -n "$n" ] || { echo "lab-exec.sh: rank $r has no node in the placement" >&2; exit 127; }\n')
    if k > 1:
        node = (f"b=$((r / {k}))\n" + node
                + f"SWING_LAB_LOCAL=$((r % {k}))\nSWING_LAB_SLOT=$((n * {k} + SWING_LAB_LOCAL))\n"
                "export SWING_LAB_LOCAL SWING_LAB_SLOT\n")
    return (
        "#!/bin/sh\n"
        "# swing_mpi lab: run this MPI rank inside the network namespace of its torus node.\n"
        f'r="{rank}"\n'
        f'[ -n "$r" ] || {{ echo "lab-exec.sh: no rank in the environment ({names}): '
        'run me under mpiexec" >&2; exit 127; }\n'
        + node +
        "SWING_LAB_NODE=$n\nexport SWING_LAB_NODE\n"
        f'exec {shlex.quote(ip)} netns exec {head}"$n" "$@"\n'
    )


def parse_placement(spec: str | None, size: int) -> tuple[int, ...] | None:
    """Read ``--placement``: ``ordered`` (None), ``shuffled[:SEED]`` or a comma list of the node of each rank.

    Raises ``ValueError`` unless the result is a permutation of ``0 … size−1``.
    """
    if spec is None or spec == "ordered":
        return None
    if spec == "shuffled" or spec.startswith("shuffled:"):
        seed = spec.partition(":")[2]
        try:
            rng = random.Random(int(seed) if seed else 1)
        except ValueError:
            raise ValueError(f"--placement {spec!r}: the seed must be an integer") from None
        nodes = list(range(size))
        rng.shuffle(nodes)
        return tuple(nodes)
    try:
        nodes = [int(x) for x in spec.split(",")]
    except ValueError:
        raise ValueError(f"--placement {spec!r}: expected ordered, shuffled[:SEED] or a comma list of nodes") from None
    if sorted(nodes) != list(range(size)):
        raise ValueError(f"--placement: {len(nodes)} nodes given, need each of 0..{size - 1} exactly once")
    return tuple(nodes)


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
        placement: Sequence[int] | None = None,
        burst_kib: int = DEFAULT_BURST_KIB,
        tcp_cc: str = DEFAULT_TCP_CC,
        routers: bool = False,
        queue_ms: int = DEFAULT_QUEUE_MS,
        ranks_per_node: int = 1,
    ) -> None:
        """Plan a lab of ``torus`` (a :class:`Torus`, ``"4x4"`` or a dims tuple); nothing is built yet.

        ``placement[r]`` is the node rank ``r`` runs in (default: node ``r``), a permutation.
        ``ranks_per_node=K`` runs ``K`` ranks in every node, ranks ``b*K .. b*K+K-1`` in node
        ``placement[b]`` (default ``b``), talking through shared memory (MPICH only).
        ``tcp_cc`` is ``"auto"`` (``cubic`` where the kernel lets a namespace use it, else the
        host's default), ``"host"`` or a name to force (:func:`~swing_mpi.lab.system.choose_tcp_cc`;
        a name the kernel refuses fails :meth:`build` before anything is built).
        """
        self.torus = torus if isinstance(torus, Torus) else Torus.from_spec(torus)
        if placement is not None and sorted(placement) != list(range(self.torus.size)):
            raise ValueError(f"placement must list each node 0..{self.torus.size - 1} once, got {list(placement)}")
        self.placement = None if placement is None else tuple(int(x) for x in placement)
        self.ranks_per_node = check_ranks_per_node(ranks_per_node)
        self._prefix = prefix
        self._run_id = run_id
        self._user_log: Log = log or quiet
        self._tcp_requested = tcp_cc
        self.tcp_choice: TcpChoice = choose_tcp_cc(tcp_cc, strict=False)
        """The congestion control chosen for this host (checked again, strictly, by :meth:`build`)."""
        self._tcp_seen: str | None = None
        self.plan: LabPlan = make_plan(self.torus, run_id=run_id or "0", prefix=prefix, rate_mbit=rate_mbit, mtu=mtu,
                                       burst_kib=burst_kib, tcp_cc=self.tcp_choice.setting, routers=routers,
                                       queue_ms=queue_ms)
        self.built = False
        self.build_seconds: float | None = None
        self.teardown_seconds: float | None = None
        self._tmpdir: Path | None = None
        self._old_handlers: dict[int, Any] = {}

    def log(self, msg: str) -> None:
        """Send a progress message to the ``log`` callable; never raise (teardown must go on)."""
        try:
            self._user_log(msg)
        except Exception:
            pass

    @property
    def tcp_cc(self) -> str | None:
        """The TCP congestion control the lab's namespaces run: read back from node 0 once built, else as chosen."""
        return self._tcp_seen or self.tcp_choice.name

    def describe(self) -> str:
        """Return :meth:`LabPlan.describe` with the congestion control named, as chosen for this host."""
        return self.plan.describe() + f"; TCP congestion control {self.tcp_choice.note}"

    # -- names --------------------------------------------------------------
    @property
    def namespaces(self) -> tuple[str, ...]:
        """The namespaces of all nodes, in rank order."""
        return self.plan.namespaces

    def namespace(self, rank: int) -> str:
        """Return the namespace of node ``rank``."""
        return self.plan.namespace(rank)

    def address(self, rank: int) -> str:
        """Return the address of node ``rank``."""
        return self.plan.address(rank)

    # -- lifecycle ------------------------------------------------------------
    def __enter__(self) -> Lab:
        """Build the lab (tearing down whatever was built if that fails)."""
        self._install_signal_handlers()
        try:
            self.build()
        except BaseException:
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        """Tear the lab down, whatever happened inside the ``with``."""
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
        report = lab_report(self._tcp_requested)  # everything the build will need, congestion control included
        if not report.ok:
            raise LabUnavailableError(f"cannot build the emulated torus lab: {report.reason}")
        assert report.tcp is not None
        self.tcp_choice = report.tcp
        t0 = time.perf_counter()
        rid = self._pick_run_id()
        p = self.plan  # the same settings under the run id just picked
        self.plan = make_plan(self.torus, run_id=rid, prefix=p.prefix, rate_mbit=p.rate_mbit, mtu=p.mtu, net=p.net,
                              burst_kib=p.burst_kib, tcp_cc=self.tcp_choice.setting, routers=p.routers,
                              queue_ms=p.queue_ms)
        self.built = True  # from here on, teardown has something to do
        try:
            marker_path(self._prefix, rid).write_text(f"{os.getpid()}\n")
            self.log(f"lab: building {self.plan.describe()}")
            self.log(f"lab: TCP congestion control {self.tcp_choice.note}")
            for phase in self.plan.setup_phases():
                run_parallel(phase)
            seen = run_command(Command(("ip", "netns", "exec", self.plan.namespace(0), "sysctl", "-n",
                                        "net.ipv4.tcp_congestion_control")), check=False)
            self._tcp_seen = (seen.stdout.strip() or None) if seen.returncode == 0 else None
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
            every = set(self.plan.all_namespaces)
            self.log(f"lab: tearing down {len(every)} namespaces")
            for c in self.plan.teardown_commands():
                run_command(c, check=False)
            left = [n for n in list_namespaces() if n in every]
            if left:  # one more try, one by one
                for n in left:
                    run_command(Command(("ip", "netns", "del", n)), check=False)
            if self._tmpdir is not None:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
                self._tmpdir = None
            try:
                marker_path(self.plan.prefix, self.plan.run_id).unlink()
            except OSError:
                pass
            self.built = False
            self.teardown_seconds = time.perf_counter() - t0
            left = [n for n in list_namespaces() if n in every]
            if left:
                raise LabError(f"could not delete namespaces {left}")
        finally:
            self._unblock_signals(blocked)

    # -- signals ------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def _raise(signum: int, frame: object) -> None:
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
    def _block_signals() -> set[int | signal.Signals] | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})

    @staticmethod
    def _unblock_signals(old: set[int | signal.Signals] | None) -> None:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    # -- running MPI --------------------------------------------------------
    def _require_built(self) -> None:
        if not self.built:
            raise LabError("the lab is not built (use `with Lab(...) as lab:`)")

    @property
    def wrapper(self) -> Path:
        """The script that runs ``"$@"`` in the namespace of the node of this rank (see :data:`RANK_VARIABLES`)."""
        self._require_built()
        assert self._tmpdir is not None
        return self._tmpdir / "lab-exec.sh"

    def _write_wrapper(self) -> None:
        assert self._tmpdir is not None
        path = self._tmpdir / "lab-exec.sh"
        path.write_text(wrapper_script(self.plan, ip=shutil.which("ip") or "ip", placement=self.placement,
                                       ranks_per_node=self.ranks_per_node))
        path.chmod(0o755)

    def exec_argv(self, rank: int, cmd: Sequence[str]) -> list[str]:
        """Return ``cmd`` run inside node ``rank``'s namespace."""
        return ["ip", "netns", "exec", self.namespace(rank), *cmd]

    @property
    def ranks(self) -> int:
        """The ranks the lab holds: the torus size times :attr:`ranks_per_node`."""
        return self.torus.size * self.ranks_per_node

    def mpi_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """Return the environment every rank gets: :func:`lab_mpi_env` of :attr:`ranks_per_node`, then ``env``."""
        return lab_mpi_env(self.ranks_per_node, env)

    def mpiexec_argv(
        self,
        nprocs: int | None,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
        mpiexec: str | None = None,
    ) -> list[str]:
        """Return the command line running ``cmd`` as ``nprocs`` ranks, rank ``r`` in node ``r`` (or its placement).

        ``env`` is passed to every rank (``-genv``) on top of :data:`MPI_ENV`.
        ``timeout`` becomes ``MPIEXEC_TIMEOUT`` (hydra kills the job after it), set
        through ``env`` at the front of the line. ``nprocs=None`` means :attr:`ranks`.
        A leading ``python``/``python3`` in ``cmd`` is replaced by ``sys.executable``.
        With several ranks per node, rank ``r`` runs in node ``r // K`` (:func:`launch_argv`).
        """
        self._require_built()
        return launch_argv(self.plan, cmd, wrapper=self.wrapper, mpiexec=mpiexec or find_mpiexec(), nprocs=nprocs,
                           ranks_per_node=self.ranks_per_node, placement=self.placement, env=env, timeout=timeout)

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
        per = f", {self.ranks_per_node} per node" if self.ranks_per_node > 1 else ""
        self.log(f"lab: running {shown} on {nprocs or self.ranks} ranks{per} (MPIEXEC_TIMEOUT {timeout:g} s)")
        kw: dict[str, Any] = {"text": True}
        if capture:
            kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        try:
            out, err = proc.communicate(timeout=timeout + 30)
        except BaseException:
            kill_group(proc)
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
        """Verify the lab before measuring on it (see :mod:`swing_mpi.lab.checks`).

        Routes: every node's kernel is asked (``ip route get``) for every destination;
        the answers must match the plan, and the walk from every node to every other
        must take exactly ``Torus.distance`` hops. Rates: TCP blasts (plain Python
        sockets, ``seconds`` each) measure MB/s per flow for ``one`` port alone, for all
        ports of ``node`` 0 at once, for a ``far`` multi-hop pair, and for ``all``
        ports of all nodes at once in both directions (the load of a neighbour
        exchange). Prints :meth:`CheckResult.table` unless ``print_table=False``.
        """
        self._require_built()
        res = check_routes(self.plan)
        res.min_fraction = min_fraction
        if rates and self.plan.links:
            res.rates = check_rates(self.plan, seconds, log=self.log)
        if print_table:
            print(res.table(), flush=True)
        return res
