"""``simulate --ranks-per-node K``: the torus phase among nodes on SimGrid, the node phases priced beside it.

The forms are those of :mod:`swing_mpi.model.node_phases`. Per form:

* **multi-leader**: the node phases (:func:`~swing_mpi.model.node_phases.leader_phases`) plus one simulated
  lane: the algorithm on the torus of nodes for the largest chunk (``⌈n/K⌉`` bytes in whole elements), every
  link at ``1/L`` of its rate, ``L`` the lanes with a chunk, and the software costs of one rank with its
  share of the node's cores (``--cores // K`` threads). The ``L`` lanes of a node are identical copies (same
  peers, sizes and start), and max-min fair sharing gives ``L`` copies of every flow on links of rate ``R``
  exactly what one copy gets on links of rate ``R/L``: one lane at ``1/L`` of the links is the ``L`` lanes,
  their software costs in parallel on their own cores. (Not modelled: a NIC's per-message cost, which
  ``L`` lanes would pay ``L`` times.)
* **single-leader**: the same node phases (one barrier more) plus the algorithm simulated on ``n`` bytes with
  every link whole and the leader reducing on all ``--cores`` of the node.
* **flat**: the cost model's :func:`~swing_mpi.model.node_phases.flat_time` on ``dims + (K,)`` with this
  simulation's software costs: ``α`` per step (per lane with the engine's lanes in series), ``γ`` of a rank's
  share of the cores on every reduced byte. It is not simulated: SimGrid's torus zone has one link rate, and a
  node's shared memory is no link (``how`` says ``model``).
* **c-node-aware**: its node phases (:func:`~swing_mpi.model.node_phases.c_node_phases`) plus the best of
  :data:`~swing_mpi.model.node_phases.C_ALGORITHMS` simulated on ``n`` with a C MPI's costs (with
  ``--alpha engine``: the costs file's ``mpi_step_s`` and ``c_gamma_s_per_byte``, lanes as a C library posts
  them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..model.node_phases import (
    C_ALGORITHMS,
    NodeCosts,
    c_node_phases,
    chunk_lanes,
    flat_steps,
    flat_time,
    leader_phases,
)
from .params import SimParams
from .run import simulate

__all__ = ["NodeRow", "simulate_forms", "simulate_c_node_aware"]


@dataclass(frozen=True)
class NodeRow:
    """One form of one algorithm for one vector size, ``K`` ranks per node."""

    form: str
    algorithm: str
    nbytes: int
    time_s: float
    node_s: float
    """The node phases."""
    network_s: float
    """The phase among nodes."""
    how: str
    """``simulated`` (the phase among nodes on SimGrid) or ``model``."""
    peak_bytes_per_s: float
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def goodput_bytes_per_s(self) -> float:
        """A rank's vector over the time."""
        return self.nbytes / self.time_s if self.time_s > 0 else float("inf")

    def to_dict(self) -> dict[str, object]:
        """Return the row as a flat dict (for JSON and CSV)."""
        return {"form": self.form, "algorithm": self.algorithm, "bytes": self.nbytes, "time_s": self.time_s,
                "node_s": self.node_s, "network_s": self.network_s, "how": self.how,
                "goodput_bytes_per_s": self.goodput_bytes_per_s,
                "peak_fraction": self.goodput_bytes_per_s / self.peak_bytes_per_s, **self.extra}


def _peak(dims: Sequence[int], params: SimParams) -> float:
    return max(1, sum(1 for d in dims if d > 1)) * params.link_bytes_per_s


def simulate_forms(algorithm: str, dims: tuple[int, ...], nbytes: int, nc: NodeCosts, *,
                   params_for: Callable[[int], SimParams], cores: int,
                   message_sizes: str = "auto") -> list[NodeRow]:
    """Return the multi-leader, single-leader and flat forms of ``algorithm`` for a vector of ``nbytes``.

    ``params_for(threads)``: the simulation's parameters for a rank reducing on that many threads;
    ``cores``: the node's cores.
    """
    k = nc.ranks_per_node
    rank_cores = max(1, cores // k)
    lane_params = params_for(rank_cores)
    leader_params = params_for(cores)
    common = {"ranks_per_node": k, "dims": "x".join(map(str, dims)), "link_bps": lane_params.link_bps,
              "alpha_s": lane_params.alpha_s, "cores": cores, **nc.to_dict()}
    peak = _peak(dims, lane_params)
    rows = []
    lanes, chunk = chunk_lanes(nbytes, nc)
    node = leader_phases(nbytes, nc)
    net = 0.0
    if lanes:
        r = simulate(algorithm, dims, chunk, params=replace(lane_params, link_bps=lane_params.link_bps / lanes),
                     message_sizes=message_sizes)
        net = r.time_s
    rows.append(NodeRow("multi-leader", algorithm, nbytes, node.total_s + net, node.total_s, net, "simulated", peak,
                        {**common, "lanes": lanes, "chunk_bytes": chunk, "threads": lane_params.threads,
                         **node.to_dict()}))
    node1 = leader_phases(nbytes, nc, single=True)
    r1 = simulate(algorithm, dims, nbytes, params=leader_params, message_sizes=message_sizes)
    rows.append(NodeRow("single-leader", algorithm, nbytes, node1.total_s + r1.time_s, node1.total_s, r1.time_s,
                        "simulated", peak, {**common, "threads": leader_params.threads, **node1.to_dict()}))
    try:
        steps = flat_steps(algorithm, dims, k)
    except ValueError:  # no schedule, or none readable, on dims + (K,)
        return rows
    t = flat_time(steps, nbytes, nc, alpha_s=lane_params.alpha_s, link_bytes_per_s=lane_params.link_bytes_per_s,
                  gamma_s_per_byte=lane_params.gamma_s_per_byte, alpha_per_lane=lane_params.cpu != "lane",
                  per_link_s=lane_params.per_link_s)
    rows.append(NodeRow("flat", algorithm, nbytes, t, 0.0, t, "model", peak,
                        {**common, "flat_dims": "x".join(map(str, dims + (k,))), "threads": lane_params.threads}))
    return rows


def simulate_c_node_aware(dims: tuple[int, ...], nbytes: int, nc: NodeCosts, *, params: SimParams,
                          message_sizes: str = "auto") -> NodeRow | None:
    """Return a C MPI's node-aware allreduce: its node phases, the best of its algorithms simulated among nodes."""
    best = None
    for name in C_ALGORITHMS:
        try:
            r = simulate(name, dims, nbytes, params=params, message_sizes=message_sizes)
        except ValueError:
            continue
        if best is None or r.time_s < best.time_s:
            best = r
    if best is None:
        return None
    node = c_node_phases(nbytes, nc)
    return NodeRow("c-node-aware", best.algorithm, nbytes, node.total_s + best.time_s, node.total_s, best.time_s,
                   "simulated", _peak(dims, params),
                   {"ranks_per_node": nc.ranks_per_node, "dims": "x".join(map(str, dims)), "link_bps": params.link_bps,
                    "alpha_s": params.alpha_s, "gamma_s_per_byte": params.gamma_s_per_byte, **nc.to_dict(),
                    **node.to_dict()})
