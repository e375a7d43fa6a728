"""The emulated torus lab as pure data: namespaces, links, addresses, routes.

Nothing here runs a command. :func:`make_plan` turns a :class:`~swing_mpi.topology.Torus`
into a :class:`LabPlan` holding every name, address and route, plus the exact
``ip``/``tc``/``sysctl`` command lines (:class:`Command`) that build and tear the lab
down; :mod:`swing_mpi.lab.lab` only executes them.

Layout (docs/lab.md says why):

* one network namespace per torus node, named ``<prefix><run_id>n<rank>``
  (e.g. ``swl3fa2n5``), so two labs with different run ids never collide;
* node ``r`` owns the address ``10.<net>.<r // 250>.<r % 250 + 1>`` (a /32 carried by
  every port of the node), valid for up to 64000 nodes;
* one veth pair per torus link. Along a side ``d > 2`` each node has a ``+`` port
  ``d<k>p`` (torus port ``2k``) and a ``-`` port ``d<k>m`` (port ``2k + 1``); a side of
  2 has a single link per pair whose ends are both called ``d<k>p`` (port ``2k``, the
  way ties are routed); a side of 1 has no link. Interface names only live inside the
  namespaces, so they never clash with the host's;
* routes: minimal dimension-order routing as :meth:`Torus.port_towards` defines it:
  the first differing coordinate is fixed first, the shorter way round, and a tie
  (distance exactly ``d/2``) goes the ``+`` way. Every destination gets
  ``ip -n NS route add DEST/32 via NEXTHOP dev PORT onlink``;
* every port gets ``tc qdisc add dev PORT root tbf rate R burst 256kb latency 400ms``
  (each direction of a link is then its own ``R``; the burst, in KiB, is ``burst_kib``; the
  queue, as the time its bytes take at ``R``, is ``queue_ms``) and
  the MTU (default 65000);
* every namespace runs TCP with the congestion control ``tcp_cc`` (default ``cubic``), not
  whatever the host's default is (``host`` keeps that; the lab picks ``host`` where the kernel
  does not let a namespace use ``cubic``, :func:`swing_mpi.lab.system.choose_tcp_cc`).

With ``routers=True`` each node is two namespaces, as a machine whose network card routes: the rank
runs in the host namespace ``<prefix><run_id>n<rank>`` (address ``10.<net>...``, one port ``host``, a
default route to its router), and the torus links, token buckets and routes live in the router
namespace ``<prefix><run_id>r<rank>`` (address ``10.<net + 1>...``), joined to its host by an
unshaped veth pair. Every packet then reaches a token bucket as forwarded traffic, so a port
treats the node's own messages like those it passes on (without routers, the node's own TCP
flows see the bucket's queue as local congestion and back off first; docs/lab.md).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from ..topology import DimsLike, Torus

__all__ = [
    "Command",
    "Port",
    "Link",
    "Route",
    "LabPlan",
    "make_plan",
    "node_address",
    "namespace_name",
    "port_name",
    "namespace_pattern",
    "MAX_NODES",
    "DEFAULT_PREFIX",
    "DEFAULT_RATE_MBIT",
    "DEFAULT_MTU",
    "DEFAULT_BURST_KIB",
    "DEFAULT_TCP_CC",
    "PREFERRED_TCP_CC",
    "AUTO_TCP_CC",
    "HOST_TCP_CC",
    "DEFAULT_QUEUE_MS",
    "CARRIED_BYTES_PER_S_PER_CPU",
    "usable_cpus",
]

DEFAULT_PREFIX = "swl"
DEFAULT_RATE_MBIT = 40.0
DEFAULT_MTU = 65000
DEFAULT_BURST_KIB = 256  # tc's "kb" is KiB: a port idle for 50 ms at 40 Mbit/s may send this much at once
PREFERRED_TCP_CC = "cubic"
"""TCP congestion control the lab sets in every namespace where the kernel allows it: ``bbr`` (the
development machine's default) paces each flow at its own estimate of the rate, which left links
short where every port was busy (docs/lab.md)."""
HOST_TCP_CC = "host"
"""``tcp_cc`` value that leaves the host's default congestion control in every namespace."""
AUTO_TCP_CC = "auto"
"""``tcp_cc`` of a :class:`~swing_mpi.lab.lab.Lab` (and ``--tcp-cc``) meaning :data:`PREFERRED_TCP_CC` where the
kernel lets a namespace use it, else the host's default (:func:`swing_mpi.lab.system.choose_tcp_cc`). A plan
holds what was chosen, never this."""
DEFAULT_TCP_CC = AUTO_TCP_CC
"""Default ``tcp_cc`` of the lab, its command line and the sweep."""
_TCP_CC_RE = re.compile(r"[a-z][a-z0-9_]{0,15}")
DEFAULT_QUEUE_MS = 400
"""Depth of every port's queue, as the milliseconds its bytes take at the link rate (tbf's ``latency``)."""
MAX_NODES = 250 * 256
CARRIED_BYTES_PER_S_PER_CPU = 0.65e9
"""About what one core moved, all links of a lab busy at once (TCP through veth pairs and token buckets,
the ranks beside it), on the 2-core development machine: 8x8 at 40 Mbit/s carried 95 % of its 1.28 GB/s,
4x4x4 56 % of 1.92 GB/s. A rough guide for :meth:`LabPlan.cpu_note`, not a limit."""
_IFNAMSIZ = 15  # longest Linux interface name
HOST_PORT = "host"
"""With routers: the interface joining a node's host namespace and its router (same name at both ends)."""


def usable_cpus() -> int:
    """Return how many cores this process may run on (a lab's ranks and its kernel work share them)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux; the lab needs Linux anyway
        return os.cpu_count() or 1

_PREFIX_RE = re.compile(r"[a-z]{1,6}")
_RUN_ID_RE = re.compile(r"[0-9a-f]{1,8}")


def namespace_pattern(prefix: str = DEFAULT_PREFIX) -> re.Pattern[str]:
    """Return a regex matching every namespace name a lab with ``prefix`` creates.

    Group ``run`` is the run id, group ``rank`` the node.
    """
    return re.compile(rf"{re.escape(prefix)}(?P<run>[0-9a-f]{{1,8}})(?P<kind>[nr])(?P<rank>\d+)")


def namespace_name(prefix: str, run_id: str, rank: int, *, router: bool = False) -> str:
    """``<prefix><run_id>n<rank>``, e.g. ``swl3fa2n5`` (``r`` in place of ``n`` for a router)."""
    return f"{prefix}{run_id}{'r' if router else 'n'}{rank}"


def node_address(rank: int, *, net: int = 100) -> str:
    """Return the /32 address of node ``rank``: ``10.<net>.<rank // 250>.<rank % 250 + 1>``."""
    if not 0 <= rank < MAX_NODES:
        raise ValueError(f"node {rank} outside the lab's address range (0..{MAX_NODES - 1})")
    return f"10.{net}.{rank // 250}.{rank % 250 + 1}"


def port_name(torus: Torus, port: int) -> str:
    """Interface name of torus port ``port``: ``d<k>p`` (``+``) or ``d<k>m`` (``-``).

    On a side of 2 both directions share one link, called ``d<k>p`` at both ends.
    """
    k, minus = divmod(port, 2)
    if torus.dims[k] == 2:
        minus = 0
    return f"d{k}{'m' if minus else 'p'}"


def _fmt_rate(rate_mbit: float) -> str:
    return f"{rate_mbit:g}mbit"


@dataclass(frozen=True)
class Command:
    """One command line to run: ``argv``, optionally fed ``stdin`` (for ``-batch -``)."""

    argv: tuple[str, ...]
    stdin: str | None = None
    what: str = ""

    def shell(self) -> str:
        """Render the command for a shell (a here-document for the batch input)."""
        line = " ".join(_quote(a) for a in self.argv)
        if self.stdin is None:
            return line
        return f"{line} <<'EOF'\n{self.stdin.rstrip()}\nEOF"


def _quote(s: str) -> str:
    return s if re.fullmatch(r"[\w@%+=:,./-]+", s) else "'" + s.replace("'", "'\"'\"'") + "'"


@dataclass(frozen=True)
class Port:
    """One end of a link: torus ``port`` of ``node``, interface ``name`` in its namespace."""

    node: int
    port: int
    name: str


@dataclass(frozen=True)
class Link:
    """One veth pair joining ``a`` and ``b`` along dimension ``dim``."""

    dim: int
    a: Port
    b: Port

    def add_line(self, plan: LabPlan) -> str:
        """Return the ``ip -batch`` line creating this pair with each end in its namespace."""
        return (
            f"link add {self.a.name} netns {plan.router_namespace(self.a.node)} type veth "
            f"peer name {self.b.name} netns {plan.router_namespace(self.b.node)}"
        )


@dataclass(frozen=True)
class Route:
    """How ``node`` reaches ``dest``: leave by ``port`` towards neighbour ``via``."""

    node: int
    dest: int
    port: Port
    via: int
    dest_addr: str
    via_addr: str
    namespace: str

    @property
    def line(self) -> str:
        """The route as an ``ip -n NS -batch`` line."""
        return f"route add {self.dest_addr}/32 via {self.via_addr} dev {self.port.name} onlink"

    @property
    def argv(self) -> tuple[str, ...]:
        """The route as one ``ip`` command."""
        return ("ip", "-n", self.namespace, *self.line.split())


@dataclass(frozen=True)
class LabPlan:
    """Everything a lab of ``torus`` consists of; build it with :func:`make_plan`."""

    torus: Torus
    run_id: str
    prefix: str = DEFAULT_PREFIX
    rate_mbit: float = DEFAULT_RATE_MBIT
    mtu: int = DEFAULT_MTU
    net: int = 100
    links: tuple[Link, ...] = field(default=(), repr=False)
    burst_kib: int = DEFAULT_BURST_KIB
    tcp_cc: str = PREFERRED_TCP_CC
    routers: bool = False
    queue_ms: int = DEFAULT_QUEUE_MS

    # -- names and addresses ---------------------------------------------
    @property
    def size(self) -> int:
        """Number of nodes."""
        return self.torus.size

    def namespace(self, rank: int) -> str:
        """Return the namespace of node ``rank``."""
        self._check_rank(rank)
        return namespace_name(self.prefix, self.run_id, rank)

    @cached_property
    def namespaces(self) -> tuple[str, ...]:
        """The namespaces of all nodes, in rank order (where the ranks run)."""
        return tuple(self.namespace(r) for r in range(self.size))

    def router_namespace(self, rank: int) -> str:
        """Return the namespace holding node ``rank``'s links and routes (its own namespace without routers)."""
        self._check_rank(rank)
        return namespace_name(self.prefix, self.run_id, rank, router=self.routers)

    @cached_property
    def all_namespaces(self) -> tuple[str, ...]:
        """Every namespace of the lab: the nodes', then the routers' (if any)."""
        if not self.routers:
            return self.namespaces
        return self.namespaces + tuple(self.router_namespace(r) for r in range(self.size))

    def router_address(self, rank: int) -> str:
        """Return the address of node ``rank``'s router (its own address without routers)."""
        self._check_rank(rank)
        return node_address(rank, net=self.net + 1 if self.routers else self.net)

    def address(self, rank: int) -> str:
        """Return the /32 address of node ``rank`` (on every one of its ports)."""
        self._check_rank(rank)
        return node_address(rank, net=self.net)

    @cached_property
    def addresses(self) -> tuple[str, ...]:
        """The addresses of all nodes, in rank order."""
        return tuple(self.address(r) for r in range(self.size))

    @property
    def rate_bytes_per_s(self) -> float:
        """The configured link rate per direction in bytes per second."""
        return self.rate_mbit * 1e6 / 8

    @property
    def link_directions(self) -> int:
        """Directed links: two per veth pair, each with its own token bucket."""
        return 2 * len(self.links)

    @property
    def demand_bytes_per_s(self) -> float:
        """Bytes per second the kernel must move when every link direction runs at the rate at once."""
        return self.link_directions * self.rate_bytes_per_s

    def cpu_note(self, cpus: int) -> str | None:
        """Say why results would measure the CPUs, not the links, on ``cpus`` cores; ``None`` if they should not.

        When all links run at once (every port busy, as in Swing's or the Hamiltonian rings' steps), the
        kernel must move :attr:`demand_bytes_per_s` through veths and token buckets on the same cores as the
        ranks. Above about :data:`CARRIED_BYTES_PER_S_PER_CPU` per core it cannot, and an algorithm that keeps
        every port busy is capped by the CPUs while one that leaves ports idle is not.
        """
        if cpus < 1:
            raise ValueError(f"cpus must be at least 1, got {cpus}")
        carried = CARRIED_BYTES_PER_S_PER_CPU * cpus
        if self.demand_bytes_per_s <= carried:
            return None
        fits = math.floor(carried / self.link_directions * 8 / 1e6 * 10) / 10  # Mbit/s, rounded down
        rate = f"--link {fits:g}M or less" if fits > 0 else "a far lower --link"
        return (f"{self.link_directions} link directions at {self.rate_mbit:g} Mbit/s ask "
                f"{self.demand_bytes_per_s / 1e9:.2f} GB/s of TCP at once, more than {cpus} "
                f"core{'s' if cpus > 1 else ''} carry (about {CARRIED_BYTES_PER_S_PER_CPU / 1e9:.2f} GB/s each): an "
                f"algorithm that keeps every port busy will measure the CPUs, not the links; {rate} keeps the links "
                f"the bottleneck (--check's 'all' test shows the share carried)")

    @cached_property
    def _ports(self) -> tuple[tuple[Port, ...], ...]:
        per: list[list[Port]] = [[] for _ in range(self.size)]
        for link in self.links:
            per[link.a.node].append(link.a)
            per[link.b.node].append(link.b)
        return tuple(tuple(sorted(p, key=lambda q: q.port)) for p in per)

    def ports(self, rank: int) -> tuple[Port, ...]:
        """Return the ports (link ends) of node ``rank``, by torus port number."""
        self._check_rank(rank)
        return self._ports[rank]

    def port(self, rank: int, port: int) -> Port:
        """Return the :class:`Port` node ``rank`` uses for torus port ``port``.

        On a side of 2 the ``-`` port is the same link as the ``+`` port.
        """
        k = port // 2
        if self.torus.dims[k] == 2:
            port = 2 * k
        for p in self.ports(rank):
            if p.port == port:
                return p
        raise ValueError(f"node {rank} has no link on port {port} (torus {self.torus})")

    def neighbor(self, p: Port) -> int:
        """Return the node at the other end of port ``p``."""
        return self.torus.neighbor(p.node, p.port)

    # -- routing ----------------------------------------------------------
    @cached_property
    def _routes(self) -> dict[tuple[int, int], Route]:
        out: dict[tuple[int, int], Route] = {}
        t = self.torus
        for a in range(self.size):
            for b in range(self.size):
                if a == b:
                    continue
                tp = t.port_towards(a, b)
                assert tp is not None
                port = self.port(a, tp)
                via = t.neighbor(a, tp)
                out[(a, b)] = Route(
                    node=a,
                    dest=b,
                    port=port,
                    via=via,
                    dest_addr=self.address(b),
                    via_addr=self.router_address(via),
                    namespace=self.router_namespace(a),
                )
        return out

    def route(self, node: int, dest: int) -> Route:
        """Return the route ``node`` holds for ``dest`` (``node != dest``)."""
        if node == dest:
            raise ValueError("a node has no route to itself")
        self._check_rank(node)
        self._check_rank(dest)
        return self._routes[(node, dest)]

    def routes(self, node: int | None = None) -> list[Route]:
        """All routes, or those of ``node``, ordered by (node, dest)."""
        if node is None:
            return [self._routes[k] for k in sorted(self._routes)]
        return [self._routes[(node, d)] for d in range(self.size) if d != node]

    def hop_path(self, src: int, dst: int) -> list[int]:
        """Return the nodes a packet from ``src`` to ``dst`` visits following the routes.

        Starts with ``src`` and ends with ``dst``; ``len(path) - 1`` is the hop count.
        Raises ``RuntimeError`` on a routing loop.
        """
        self._check_rank(src)
        self._check_rank(dst)
        path = [src]
        while path[-1] != dst:
            if len(path) > self.size:
                raise RuntimeError(f"routing loop from {src} to {dst}: {path}")
            path.append(self._routes[(path[-1], dst)].via)
        return path

    # -- commands ---------------------------------------------------------
    def sysctl_settings(self, rank: int) -> list[str]:
        """``key=value`` settings for node ``rank``'s namespace: forwarding on, rp_filter off, the TCP cc.

        With routers, forwarding is the router's (:meth:`router_sysctl_settings`).
        """
        keys = [] if self.routers else ["net.ipv4.ip_forward=1"]
        if self.tcp_cc != HOST_TCP_CC:
            keys.append(f"net.ipv4.tcp_congestion_control={self.tcp_cc}")
        return keys + _rp_filter_off((HOST_PORT,) if self.routers else (p.name for p in self.ports(rank)))

    def router_sysctl_settings(self, rank: int) -> list[str]:
        """``key=value`` settings for node ``rank``'s router namespace (routers only): forwarding on, rp_filter off."""
        return ["net.ipv4.ip_forward=1", *_rp_filter_off((HOST_PORT, *(p.name for p in self.ports(rank))))]

    def node_ip_lines(self, rank: int) -> list[str]:
        """``ip -batch`` lines run in node ``rank``'s namespace: interfaces, then routes.

        With routers: its port to the router and a default route through it.
        """
        addr = self.address(rank)
        if self.routers:
            return [*self._port_lines(addr, (HOST_PORT,)),
                    f"route add default via {self.router_address(rank)} dev {HOST_PORT} onlink"]
        return [*self._port_lines(addr, (p.name for p in self.ports(rank))), *(r.line for r in self.routes(rank))]

    def router_ip_lines(self, rank: int) -> list[str]:
        """``ip -batch`` lines of node ``rank``'s router namespace (routers only): ports, routes to its host and on."""
        ports = self._port_lines(self.router_address(rank), (HOST_PORT, *(p.name for p in self.ports(rank))))
        return [*ports, f"route add {self.address(rank)}/32 dev {HOST_PORT}", *(r.line for r in self.routes(rank))]

    def _port_lines(self, addr: str, names: Iterable[str]) -> list[str]:
        """``ip -batch`` lines: loopback up, then each interface of ``names`` at the MTU, holding ``addr``/32, up."""
        lines = ["link set lo up"]
        for name in names:
            lines += [f"link set {name} mtu {self.mtu}", f"addr add {addr}/32 dev {name}", f"link set {name} up"]
        return lines

    def node_tc_lines(self, rank: int) -> list[str]:
        """``tc -batch`` lines for node ``rank``: one token bucket per port."""
        rate = _fmt_rate(self.rate_mbit)
        return [
            f"qdisc add dev {p.name} root tbf rate {rate} burst {self.burst_kib}kb latency {self.queue_ms}ms"
            for p in self.ports(rank)
        ]

    def setup_phases(self, *, batched: bool = True) -> list[list[Command]]:
        """Return the build as phases run in order; commands inside one phase are independent.

        ``batched=True`` (the default) uses one ``ip -batch``/``tc -batch`` process per
        namespace; ``batched=False`` spells out one command per action (readable, slow).
        """
        nss = self.all_namespaces
        link_lines = [ln.add_line(self) for ln in self.links]
        if self.routers:
            link_lines += [
                f"link add {HOST_PORT} netns {self.namespace(r)} type veth "
                f"peer name {HOST_PORT} netns {self.router_namespace(r)}"
                for r in range(self.size)
            ]
        # (namespace, sysctl settings, ip lines, tc lines) of every namespace
        work = [(ns, self.sysctl_settings(r), self.node_ip_lines(r), [] if self.routers else self.node_tc_lines(r))
                for r, ns in enumerate(self.namespaces)]
        work += [(self.router_namespace(r), self.router_sysctl_settings(r), self.router_ip_lines(r),
                  self.node_tc_lines(r)) for r in range(self.size) if self.routers]
        if batched:
            def text(lines: Iterable[str]) -> str:
                return "".join(ln + "\n" for ln in lines)

            nodes: list[Command] = []
            for ns, keys, ip, tc in work:
                nodes.append(Command(("ip", "netns", "exec", ns, "sysctl", "-q", "-w", *keys), None, f"sysctl {ns}"))
                nodes.append(Command(("ip", "-n", ns, "-batch", "-"), text(ip), f"ip {ns}"))
                if tc:
                    nodes.append(Command(("tc", "-n", ns, "-batch", "-"), text(tc), f"tc {ns}"))
            links = [Command(("ip", "-batch", "-"), text(link_lines), "links")] if link_lines else []
            return [[Command(("ip", "-batch", "-"), text(f"netns add {n}" for n in nss), "namespaces")], links, nodes]
        phases: list[list[Command]] = [
            [Command(("ip", "netns", "add", n), None, "namespace") for n in nss],
            [Command(("ip", *ln.split()), None, "link") for ln in link_lines],
        ]
        nodes = []
        for ns, keys, ip, tc in work:
            nodes.append(Command(("ip", "netns", "exec", ns, "sysctl", "-q", "-w", *keys), None, "sysctl"))
            nodes.extend(Command(("ip", "-n", ns, *ln.split()), None, "ip") for ln in ip)
            nodes.extend(Command(("tc", "-n", ns, *ln.split()), None, "tc") for ln in tc)
        phases.append(nodes)
        return phases

    def setup_commands(self, *, batched: bool = True) -> list[Command]:
        """Return :meth:`setup_phases` flattened, in a valid order."""
        return [c for phase in self.setup_phases(batched=batched) for c in phase]

    def teardown_commands(self) -> list[Command]:
        """Delete every namespace (which deletes the veths in it). Errors are skipped."""
        lines = "".join(f"netns del {n}\n" for n in self.all_namespaces)
        return [Command(("ip", "-force", "-batch", "-"), lines, "teardown")]

    def describe(self) -> str:
        """Return a short human summary."""
        return (
            f"torus {self.torus} ({self.size} nodes, {len(self.links)} links), "
            f"{self.rate_mbit:g} Mbit/s per link direction, burst {self.burst_kib} KiB, MTU {self.mtu}, "
            f"TCP {self.tcp_cc if self.tcp_cc != HOST_TCP_CC else 'as the host'}, "
            f"{'' if self.queue_ms == DEFAULT_QUEUE_MS else f'queues {self.queue_ms} ms, '}"
            f"{'routers apart from hosts, ' if self.routers else ''}"
            f"namespaces {self.namespace(0)}..{self.namespace(self.size - 1)}"
        )

    def _check_rank(self, rank: int) -> None:
        if not 0 <= rank < self.size:
            raise ValueError(f"node {rank} is outside a torus of {self.size} nodes")


def _rp_filter_off(devs: Iterable[str]) -> list[str]:
    """``sysctl`` settings turning reverse-path filtering off everywhere and on ``devs`` (routes are not symmetric)."""
    return [f"net.ipv4.conf.{dev}.rp_filter=0" for dev in ("all", "default", "lo", *devs)]


def _make_links(torus: Torus) -> tuple[Link, ...]:
    links: list[Link] = []
    for a in range(torus.size):
        for k, d in enumerate(torus.dims):
            if d == 1:
                continue
            b = torus.shift(a, k, +1)
            if d == 2 and torus.coords(a)[k] == 1:
                continue  # the single link of the pair was made from coordinate 0
            pb = 2 * k if d == 2 else 2 * k + 1
            links.append(
                Link(
                    dim=k,
                    a=Port(a, 2 * k, port_name(torus, 2 * k)),
                    b=Port(b, pb, port_name(torus, pb)),
                )
            )
    return tuple(links)


def make_plan(
    torus: Torus | DimsLike,
    *,
    run_id: str = "0",
    prefix: str = DEFAULT_PREFIX,
    rate_mbit: float = DEFAULT_RATE_MBIT,
    mtu: int = DEFAULT_MTU,
    net: int = 100,
    burst_kib: int = DEFAULT_BURST_KIB,
    tcp_cc: str = PREFERRED_TCP_CC,
    routers: bool = False,
    queue_ms: int = DEFAULT_QUEUE_MS,
) -> LabPlan:
    """Return the :class:`LabPlan` for ``torus`` (a :class:`Torus`, ``"4x4"`` or a dims tuple).

    Args:
        run_id: 1-8 lowercase hex digits making the namespace names unique.
        prefix: 1-6 lowercase letters starting every namespace name.
        rate_mbit: token-bucket rate of every link direction, in Mbit/s.
        mtu: MTU of every veth (65000 keeps per-packet CPU work low).
        net: second octet of the lab's 10.x addresses.
        burst_kib: token-bucket burst of every port, KiB: what a port that was idle may send at
            once, beyond the rate. At least the MTU (a packet larger than the bucket would never
            leave), at most 65536.
        tcp_cc: TCP congestion control set in every namespace (:data:`PREFERRED_TCP_CC`), or
            ``"host"`` for the host's default (``"auto"`` is resolved before a plan is made:
            :func:`swing_mpi.lab.system.choose_tcp_cc`).
        routers: give every node a router namespace of its own apart from the rank's (module docstring).
        queue_ms: depth of every port's queue, as the milliseconds its bytes take at ``rate_mbit``
            (1..10000; packets beyond it are dropped).
    """
    t = torus if isinstance(torus, Torus) else Torus.from_spec(torus)
    if not _PREFIX_RE.fullmatch(prefix):
        raise ValueError(f"prefix must be 1-6 lowercase letters, got {prefix!r}")
    if not _RUN_ID_RE.fullmatch(run_id):
        raise ValueError(f"run_id must be 1-8 lowercase hex digits, got {run_id!r}")
    if t.size > MAX_NODES:
        raise ValueError(f"a lab holds at most {MAX_NODES} nodes, torus {t} has {t.size}")
    if not rate_mbit > 0:
        raise ValueError(f"rate_mbit must be positive, got {rate_mbit}")
    if not 68 <= mtu <= 65535:
        raise ValueError(f"mtu must be within 68..65535, got {mtu}")
    if isinstance(burst_kib, bool) or int(burst_kib) != burst_kib or not 1 <= burst_kib <= 65536:
        raise ValueError(f"burst_kib must be a whole number of KiB within 1..65536, got {burst_kib!r}")
    if int(burst_kib) * 1024 < mtu:
        raise ValueError(f"burst_kib={burst_kib} KiB is less than the MTU ({mtu} bytes): a full-size packet "
                         f"would never leave the token bucket; use at least {-(-mtu // 1024)} KiB or a smaller MTU")
    if isinstance(queue_ms, bool) or int(queue_ms) != queue_ms or not 1 <= queue_ms <= 10000:
        raise ValueError(f"queue_ms must be a whole number of milliseconds within 1..10000, got {queue_ms!r}")
    if not 0 <= net <= (254 if routers else 255):
        raise ValueError(f"net must be an octet{' below 255 (the routers use net + 1)' if routers else ''}, got {net}")
    if tcp_cc == AUTO_TCP_CC:
        raise ValueError(f"tcp_cc {AUTO_TCP_CC!r} depends on the host: resolve it first "
                         "(swing_mpi.lab.system.choose_tcp_cc) and plan with the name it gives")
    if not isinstance(tcp_cc, str) or not _TCP_CC_RE.fullmatch(tcp_cc):
        raise ValueError(f"tcp_cc must name a TCP congestion control (e.g. cubic, reno, bbr) or be "
                         f"{HOST_TCP_CC!r}, got {tcp_cc!r}")
    plan = LabPlan(t, run_id, prefix, float(rate_mbit), int(mtu), net, _make_links(t), int(burst_kib), tcp_cc,
                   bool(routers), int(queue_ms))
    for r in range(t.size):
        for p in plan.ports(r):
            assert len(p.name) <= _IFNAMSIZ
    return plan
