"""Many ranks per node: the node phases (shared memory) priced beside the torus phases.

With ``K`` ranks per node on a torus of *nodes* ``dims``, every rank holding a
vector of ``n`` bytes, an allreduce takes one of these forms:

``multi-leader`` (the library's default for large vectors)
    (1) every rank copies its vector into a shared window (``n`` bytes), barrier,
    rank ``j`` of the node reduces chunk ``j`` (``n/K`` bytes) over the ``K``
    copies: ``K-1`` reductions of ``n/K`` bytes, all ``K`` ranks at once on
    ``K`` cores; (2) among nodes, rank ``j`` of every node runs the torus
    algorithm on its chunk: the ``K`` lanes of a node share the node's links
    (the wire sees the whole vector once per node, as with one rank per node)
    while their software costs run on ``K`` cores in parallel; (3) barrier,
    every rank copies the ``K`` result chunks out (``n`` bytes).
``single-leader``
    the same node phases (one barrier more: the leader waits for every chunk),
    and among nodes only local rank 0 runs the torus algorithm, on ``n`` bytes
    (one rank's software costs, on the node's cores as threads).
``flat``
    every rank is a torus node: the ``K`` ranks of a node form one more
    dimension, the torus ``dims + (K,)``, whose links are shared memory (the
    node's memory bandwidth, no network). This is the honest flat torus: a run
    told the node torus while ``K`` ranks share each node would be a wrong one.
``c-node-aware``
    a C MPI's node-aware allreduce (MPICH's ``smp``, Open MPI's HAN): a
    binomial reduce to local rank 0 over shared memory, each pair's reduction
    on one core (C's single-thread reduction), the leader's allreduce among
    nodes (the best of C's algorithms), a binomial broadcast back.

Node costs (:class:`NodeCosts`): the node's memory bandwidth ``B`` (bytes per
second, shared by its cores), a core's reduction cost ``γ`` (seconds per byte
reduced, as ``swing-mpi probe`` measures one rank alone) and a barrier round
``σ``. A core streams at the rate its ``γ`` says in bytes moved: a reduction
moves 3 bytes per byte (two read, one written), a copy 2, so a copy costs
``2γ/3`` per byte. A phase where ``a`` cores each handle ``b`` bytes moving
``m`` bytes of memory per byte takes ``max(b·c, a·b·m/B)`` (its cores, or the
node's memory, whichever is slower: the streaming bound). A barrier among ``K`` ranks is
``⌈log2 K⌉`` rounds of ``σ`` (a dissemination barrier, one cache line per round).
Where the node's data (``2·K·n``: the vectors and their shared copies) fits in
its last-level cache (``cache_bytes``) a phase runs at its cores' rate alone.

With ``K = 1`` every node phase is 0 and every form is today's allreduce.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..schedule import build_sizes
from ..topology import Torus, parse_dims
from ..units import BYTE_RATE_HELP, SIZE_HELP, format_byte_rate, parse_byte_rate, parse_size, parse_time
from .routing import collect_traffic, default_count, step_arrays

__all__ = ["NodeCosts", "NodePhases", "FlatStep", "FORMS", "DEFAULT_MEMORY_BYTES_PER_S", "DEFAULT_SYNC_S",
           "DEFAULT_CACHE_BYTES",
           "barrier_s", "stream_s", "chunk_lanes", "leader_phases", "c_node_phases", "flat_steps", "flat_time",
           "parse_byte_rate", "format_byte_rate", "add_node_arguments", "node_costs_from_args", "COPY_PHASES",
           "C_ALGORITHMS", "binomial_pairs", "model_forms", "model_c_node_aware"]

FORMS = ("multi-leader", "single-leader", "flat", "c-node-aware")
DEFAULT_MEMORY_BYTES_PER_S = 200e9
"""200 GB/s: what a two-socket DDR4/DDR5 server sustains on a streaming load (its peak is 400-600 GB/s)."""
DEFAULT_CACHE_BYTES = 32 << 20
"""32 MiB: the last-level cache of one socket of such a server (node phases that fit run from cache)."""
DEFAULT_SYNC_S = 100e-9
"""One round of a shared-memory barrier: a cache line handed from one core to another, about 100 ns across
sockets."""
COPY_PHASES = frozenset({"all-gather", "allgather", "unfold"})
"""Schedule phases whose receives are copied (the rest reduce)."""
C_ALGORITHMS = ("recdoub", "rabenseifner", "ring")
"""The C MPI's algorithms among nodes (its node-aware allreduce takes the best)."""


@dataclass(frozen=True)
class NodeCosts:
    """A node of ``ranks_per_node`` ranks: its memory bandwidth, its cores' reduction costs, a barrier round."""

    ranks_per_node: int = 1
    memory_bytes_per_s: float = DEFAULT_MEMORY_BYTES_PER_S
    gamma_s_per_byte: float = 0.0582e-9
    """Our kernel on one core (the engine costs' ``gamma_s_per_byte``)."""
    c_gamma_s_per_byte: float = 0.0517e-9
    """A C MPI's reduction on one core (the engine costs' ``c_gamma_s_per_byte``)."""
    sync_s: float = DEFAULT_SYNC_S
    itemsize: int = 4
    cache_bytes: int = DEFAULT_CACHE_BYTES
    """A node's last-level cache: node phases whose data (``2·K·n``) fits run at their cores' rate."""

    def __post_init__(self) -> None:
        """Check every field."""
        k = self.ranks_per_node
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"ranks_per_node must be an int >= 1, got {k!r}")
        if not (math.isfinite(self.memory_bytes_per_s) and self.memory_bytes_per_s > 0):
            raise ValueError(f"memory_bytes_per_s must be > 0, got {self.memory_bytes_per_s!r}")
        for name in ("gamma_s_per_byte", "c_gamma_s_per_byte", "sync_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if isinstance(self.itemsize, bool) or not isinstance(self.itemsize, int) or self.itemsize < 1:
            raise ValueError(f"itemsize must be an int >= 1, got {self.itemsize!r}")
        if isinstance(self.cache_bytes, bool) or not isinstance(self.cache_bytes, int) or self.cache_bytes < 0:
            raise ValueError(f"cache_bytes must be an int >= 0, got {self.cache_bytes!r}")

    def resident(self, nbytes: float) -> bool:
        """Tell whether the node's data for a vector of ``nbytes`` (``2·K·n``) fits in its cache."""
        return 2 * self.ranks_per_node * nbytes <= self.cache_bytes

    @classmethod
    def from_engine(cls, ranks_per_node: int = 1, **changes: float) -> NodeCosts:
        """Costs with the engine costs file's ``γ`` values (:func:`swing_mpi.engine_costs.load_engine_costs`)."""
        from ..engine_costs import load_engine_costs

        c = load_engine_costs()
        kw: dict = {"gamma_s_per_byte": c.gamma_s_per_byte}
        if c.c_gamma_s_per_byte is not None:
            kw["c_gamma_s_per_byte"] = c.c_gamma_s_per_byte
        kw.update(changes)
        return cls(ranks_per_node, **kw)

    def to_dict(self) -> dict[str, object]:
        """Return the costs as a flat dict (for JSON)."""
        return {"ranks_per_node": self.ranks_per_node, "node_memory_bytes_per_s": self.memory_bytes_per_s,
                "node_gamma_s_per_byte": self.gamma_s_per_byte, "node_c_gamma_s_per_byte": self.c_gamma_s_per_byte,
                "node_sync_s": self.sync_s, "node_cache_bytes": self.cache_bytes}


def barrier_s(nc: NodeCosts) -> float:
    """One barrier among the node's ranks: ``⌈log2 K⌉·σ`` (0 for one rank)."""
    k = nc.ranks_per_node
    return math.ceil(math.log2(k)) * nc.sync_s if k > 1 else 0.0


def stream_s(nc: NodeCosts, cores: int, per_core_bytes: float, moved_per_byte: float, core_s_per_byte: float,
             resident: bool = False) -> float:
    """``cores`` cores each handle ``per_core_bytes``: ``max(b·c, cores·b·m/B)`` (``resident``: ``b·c``)."""
    if per_core_bytes <= 0 or cores <= 0:
        return 0.0
    if resident:
        return per_core_bytes * core_s_per_byte
    return max(per_core_bytes * core_s_per_byte, cores * per_core_bytes * moved_per_byte / nc.memory_bytes_per_s)


def chunk_lanes(nbytes: int, nc: NodeCosts) -> tuple[int, int]:
    """``(lanes, chunk bytes)`` of a multi-leader allreduce: chunks of whole elements, the largest one.

    ``lanes`` = ranks with a non-empty chunk (``min(K, elements)``); ``chunk`` = ``⌈elements/K⌉`` elements.
    """
    count = int(nbytes) // nc.itemsize
    k = nc.ranks_per_node
    if count <= 0:
        return 0, 0
    return min(k, count), -(-count // k) * nc.itemsize


@dataclass(frozen=True)
class NodePhases:
    """The node phases of one allreduce, in seconds."""

    copy_in_s: float = 0.0
    reduce_s: float = 0.0
    copy_out_s: float = 0.0
    barriers_s: float = 0.0

    @property
    def total_s(self) -> float:
        """All node phases."""
        return self.copy_in_s + self.reduce_s + self.copy_out_s + self.barriers_s

    def to_dict(self) -> dict[str, float]:
        """Return the phases (for JSON)."""
        return {"copy_in_s": self.copy_in_s, "reduce_s": self.reduce_s, "copy_out_s": self.copy_out_s,
                "barriers_s": self.barriers_s, "node_s": self.total_s}


def leader_phases(nbytes: int, nc: NodeCosts, *, single: bool = False) -> NodePhases:
    """Node phases of the multi-leader form (``single``: the single-leader form, one barrier more).

    Copy in: ``K`` cores copy ``n`` each; reduce: each of the ``lanes`` cores ``K-1`` reductions of its chunk;
    copy out: ``K`` cores copy ``n`` each; barriers: 2 (3 for the single leader).
    """
    k = nc.ranks_per_node
    if k == 1 or nbytes <= 0:
        return NodePhases()
    lanes, chunk = chunk_lanes(nbytes, nc)
    g = nc.gamma_s_per_byte
    fit = nc.resident(nbytes)
    copy = stream_s(nc, k, nbytes, 2.0, 2.0 * g / 3.0, fit)
    red = stream_s(nc, lanes, (k - 1) * chunk, 3.0, g, fit)
    return NodePhases(copy, red, copy, (3 if single else 2) * barrier_s(nc))


def binomial_pairs(k: int) -> list[int]:
    """Pairs active in each round of a binomial tree over ``k`` ranks (round ``r`` pairs ranks ``2^r`` apart)."""
    out = []
    r = 0
    while (1 << r) < k:
        step = 1 << (r + 1)
        out.append(sum(1 for i in range(0, k, step) if i + (1 << r) < k))
        r += 1
    return out


def c_node_phases(nbytes: int, nc: NodeCosts) -> NodePhases:
    """Price a C MPI's node phases: binomial reduce to the leader, then binomial broadcast, over shared memory.

    Reduce round: the sender copies ``n`` into shared memory while the receiver reduces it into its own
    vector (one core, C's ``γ``; ``5n`` of memory per pair). Broadcast round: a copy in and a copy out
    (``4n`` per pair). Each round also waits one barrier round ``σ`` (the pair's handshake).
    """
    k = nc.ranks_per_node
    if k == 1 or nbytes <= 0:
        return NodePhases()
    gc = nc.c_gamma_s_per_byte
    pairs = binomial_pairs(k)
    fit = nc.resident(nbytes)
    red = sum(stream_s(nc, a, nbytes, 5.0, gc, fit) for a in pairs)
    bcast = sum(stream_s(nc, a, nbytes, 4.0, 2.0 * gc / 3.0, fit) for a in reversed(pairs))
    return NodePhases(0.0, red, bcast, 2 * len(pairs) * nc.sync_s)


@dataclass(frozen=True)
class FlatStep:
    """One global step of an algorithm on the flat torus ``dims + (K,)``, per byte of the vector."""

    phase: str
    network: float
    """Bytes on the busiest network link (the ``dims`` ports): what the node's ``K`` ranks put on it together."""
    node_memory: float
    """Bytes sent over shared memory by the busiest node's ranks together."""
    core: float
    """Bytes sent over shared memory by the busiest rank."""
    received: float
    """Bytes one rank receives at most (network and shared memory): what it reduces in a reducing step."""
    lanes: int
    """Lanes that move anything in this step."""
    hops: int = 0
    """Most network links a message of the step crosses (0: the step stays in shared memory)."""

    @property
    def reduces(self) -> bool:
        """Whether the step's receives are reduced (else copied)."""
        return self.phase not in COPY_PHASES


@lru_cache(maxsize=64)
def flat_steps(algorithm: str, dims: tuple[int, ...], ranks_per_node: int) -> tuple[FlatStep, ...]:
    """Return the steps of ``algorithm`` on ``dims + (K,)``, network and shared-memory loads apart (per byte).

    Messages are routed as :mod:`.routing` routes them (dimension order, the node dimension last); a message
    between two ranks of one node is one shared-memory copy whatever their distance in the node's ring.
    """
    full = tuple(dims) + (ranks_per_node,)
    torus = Torus(parse_dims(full))
    nd = len(full)
    count = default_count(torus.dims)
    traffic = collect_traffic(lambda r: build_sizes(algorithm, torus.dims, r, count), torus.dims, count)
    node_ports = slice(2 * (nd - 1), 2 * nd)
    net_ports = slice(0, 2 * (nd - 1))
    out: list[FlatStep] = []
    for st in step_arrays(traffic):
        k = st.index
        hops = 0
        for li in range(traffic.nlanes):
            for pid in np.unique(traffic.rep_ids[(li, k)]).tolist():
                for delta, _ in traffic.patterns[int(pid)]:
                    hops = max(hops, sum(min(x % d, d - x % d) for x, d in zip(delta[:-1], full[:-1])))
        whole = ranks_per_node // st.period[-1]  # the box holds period[-1] of a node's K ranks
        shm = st.src[..., node_ports].sum(axis=-1)  # per rank of the box, bytes sent over shared memory
        per_node = shm.sum(axis=-1) * whole
        # the K ranks of a node share its links: a network link's load is the sum over the node's ranks
        wire = st.link[..., net_ports].sum(axis=-2) * whole
        out.append(FlatStep(
            phase=traffic.phases[k] if k < len(traffic.phases) else "",
            network=float(wire.max()) / count if nd > 1 else 0.0,
            node_memory=float(per_node.max()) / count,
            core=float(shm.max()) / count,
            received=float(st.src.sum(axis=-1).max()) / count,
            lanes=st.lanes, hops=hops))
    return tuple(out)


def flat_time(steps: Sequence[FlatStep], nbytes: float, nc: NodeCosts, *, alpha_s: float,
              link_bytes_per_s: float, gamma_s_per_byte: float = 0.0, alpha_per_lane: bool = False,
              per_link_s: float = 0.0) -> float:
    """Seconds of the flat form: per step ``α + delay + max(network, node memory, core copies) + γ·received``.

    Network and shared-memory transfers of a step run at once; a shared-memory message of ``b`` bytes is a
    copy in (``2b`` of memory) and a copy out or a reduction (``2b`` or ``3b``). ``gamma_s_per_byte``
    prices the reduction of every byte received in a reducing step (0: the cost model's α-β form, which
    prices no reduction among nodes); ``alpha_per_lane``: ``α`` per lane of the step (a rank's lanes in
    series), else one ``α`` per step. ``delay``: ``hops·per_link_s`` for a step that crosses the network
    (0 in the cost model, whose ``α`` holds it), one barrier round ``σ`` for one that stays in shared memory.
    """
    g = nc.gamma_s_per_byte
    fit = nc.resident(nbytes)
    total = 0.0
    for s in steps:
        recv_m, recv_c = (3.0, g) if s.reduces else (2.0, 2.0 * g / 3.0)
        wire = s.network * nbytes / link_bytes_per_s
        memory = 0.0 if fit else s.node_memory * nbytes * (2.0 + recv_m) / nc.memory_bytes_per_s
        core = s.core * nbytes * (2.0 * g / 3.0 + recv_c)
        red = gamma_s_per_byte * s.received * nbytes if s.reduces else 0.0
        delay = s.hops * per_link_s if s.hops else nc.sync_s
        total += alpha_s * (s.lanes if alpha_per_lane else 1) + delay + max(wire, memory, core) + red
    return total


def model_forms(algorithm: str, dims: Sequence[int], nbytes: int, nc: NodeCosts, *, alpha: float,
                link_bytes_per_s: float, congestion: str = "routed") -> dict[str, object]:
    """Return the cost model's times of ``algorithm``'s three forms on a torus of nodes ``dims`` (seconds).

    ``multi_leader_s``: node phases + the α-β time of one lane's chunk with the node's ``lanes`` lanes
    sharing its links (the wire carries ``lanes·chunk`` bytes, the whole vector); ``single_leader_s``: node
    phases + the α-β time of ``n``; ``flat_s``: :func:`flat_time` on ``dims + (K,)`` (None where the
    algorithm has no schedule there). With ``K = 1`` all three are the α-β time of ``n``.
    """
    from .cost import analyze

    dims_t = parse_dims(dims)
    r = analyze(algorithm, dims_t)
    kw: dict[str, Any] = dict(alpha=alpha, link_bytes_per_s=link_bytes_per_s, congestion=congestion)
    lanes, chunk = chunk_lanes(nbytes, nc)
    multi_net = r.time(lanes * chunk if nc.ranks_per_node > 1 else nbytes, **kw)
    single_net = r.time(nbytes, **kw)
    multi, single = leader_phases(nbytes, nc), leader_phases(nbytes, nc, single=True)
    flat: float | None = single_net
    if nc.ranks_per_node > 1:
        try:
            flat = flat_time(flat_steps(algorithm, dims_t, nc.ranks_per_node), nbytes, nc, alpha_s=alpha,
                             link_bytes_per_s=link_bytes_per_s)
        except ValueError:  # no schedule, or no symmetry to read it by, on dims + (K,)
            flat = None
    return {"algorithm": algorithm, "size": nbytes, "multi_leader_s": multi.total_s + multi_net,
            "multi_leader_node_s": multi.total_s, "single_leader_s": single.total_s + single_net,
            "single_leader_node_s": single.total_s, "flat_s": flat}


def model_c_node_aware(dims: Sequence[int], nbytes: int, nc: NodeCosts, *, alpha: float, link_bytes_per_s: float,
                       congestion: str = "routed") -> dict[str, object]:
    """Return the cost model's C node-aware allreduce: node phases + the best of :data:`C_ALGORITHMS` on ``n``."""
    from .cost import analyze

    dims_t = parse_dims(dims)
    kw: dict[str, Any] = dict(alpha=alpha, link_bytes_per_s=link_bytes_per_s, congestion=congestion)
    best: tuple[float, str] | None = None
    for name in C_ALGORITHMS:
        try:
            t = analyze(name, dims_t).time(nbytes, **kw)
        except ValueError:
            continue
        if best is None or t < best[0]:
            best = (t, name)
    node = c_node_phases(nbytes, nc)
    if best is None:
        return {"size": nbytes, "c_node_aware_s": None, "c_algorithm": None, "c_node_s": node.total_s}
    return {"size": nbytes, "c_node_aware_s": node.total_s + best[0], "c_algorithm": best[1],
            "c_node_s": node.total_s}


# -- units and options ------------------------------------------------------------------------------------

def add_node_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--ranks-per-node`` and the node's costs (``model`` and ``simulate`` share them)."""
    parser.add_argument("--ranks-per-node", type=int, default=1, metavar="K",
                        help="ranks on each node of the torus (default 1); from 2, every allreduce is priced "
                             "in four forms: multi-leader, single-leader, flat (the torus DIMSxK, its last "
                             "dimension shared memory) and a C MPI's node-aware one")
    parser.add_argument("--node-memory", default="200GB/s", metavar="RATE",
                        help=f"with --ranks-per-node: a node's memory bandwidth, {BYTE_RATE_HELP} "
                             "(default 200GB/s), shared by its cores")
    parser.add_argument("--node-gamma", default=None, metavar="S_PER_BYTE",
                        help="with --ranks-per-node: one core's reduction cost in seconds per byte, a bare "
                             "number, e.g. 5.8e-11 (default: the engine's costs file, gamma_s_per_byte); a copy "
                             "costs two thirds of it")
    parser.add_argument("--node-cache", default="32M", metavar="SIZE",
                        help=f"with --ranks-per-node: a node's last-level cache in {SIZE_HELP} (default 32M); node "
                             "phases whose data, 2 x K x the vector, fits run at their cores' rate")
    parser.add_argument("--node-sync", default="100ns", metavar="TIME",
                        help="with --ranks-per-node: one round of a node's barrier, a time with its unit "
                             "(default 100ns); a barrier of K ranks is ceil(log2 K) rounds")


def node_costs_from_args(args: argparse.Namespace, itemsize: int = 4) -> NodeCosts:
    """Return the :class:`NodeCosts` the options name (``ValueError`` with the option's name)."""
    k = args.ranks_per_node
    if k < 1:
        raise ValueError(f"--ranks-per-node must be at least 1, got {k}")
    changes: dict = {"memory_bytes_per_s": parse_byte_rate(args.node_memory, "--node-memory"),
                     "sync_s": parse_time(args.node_sync, "--node-sync"), "itemsize": itemsize,
                     "cache_bytes": parse_size(args.node_cache)}
    if args.node_gamma is not None:
        try:
            g = float(args.node_gamma)
        except ValueError:
            raise ValueError(f"--node-gamma must be seconds per byte, got {args.node_gamma!r}") from None
        if not (math.isfinite(g) and g >= 0):
            raise ValueError(f"--node-gamma must be a finite number >= 0, got {args.node_gamma!r}")
        changes["gamma_s_per_byte"] = g
    return NodeCosts.from_engine(k, **changes)
