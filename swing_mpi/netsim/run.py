"""``simulate``: one collective of one algorithm on one simulated network, for one vector size.

Sizes: the vector is ``nbytes`` of ``itemsize``-byte elements. Schedules are
built once for a small count (the model's :func:`~swing_mpi.model.routing.default_count`,
``p·lcm(1…2D)``, where every lane and block is whole) and message bytes scale
linearly with the vector; that is exact when the element count is a multiple
of it. Other counts below 64 times it, on tori of at most 1,024 nodes, are built for their own count, so
uneven blocks are exactly what the executor sends, and a block of zero
elements is no message at all (no transfer, no latency; a lane step left
with no message is skipped, no α). Above that, a message's size is rounded to
whole elements (off by less than one element in a message of at least 64).
A count whose own schedules admit no symmetry too large to read rank by rank
falls back to the scaled sizes and says ``exact=False``.

``message_sizes="scaled"`` always scales the build count's schedules, ``"exact"`` always
builds the count's own (``"auto"``: the rule above, and scaled on larger tori). Scaled sizes are a fluid
version of the schedule: every block holds ``count/(p·lanes)`` elements, so the
steps the exact schedule skips where a rank's blocks are empty are kept, and
below the build count a message is rounded up to whole bytes rather than
elements (none vanishes). Reading a count's own schedules reads every rank
where its blocks are uneven, and its uneven messages end at many distinct
instants, which SimGrid pays for: 16x16x16 swing-bw at 2 MiB takes 481 s
exact and 16.5 s scaled, 0.13 % apart. Over 168 points (8x8 to 32x32, 4x4x4,
8x8x8; 32 B to 2 MiB; six bandwidth algorithms) scaled times were within
0.4 % of exact ones (``benchmarks/results/scale/sizes``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence

import numpy as np

from ..model.routing import default_count
from ..schedule import algorithm_info
from ..topology import parse_dims
from .engine import EngineInput, run_in_child
from .network import Network
from .params import MESSAGE_SIZES, SimParams
from .result import SimResult
from .traffic import Messages, read_messages

__all__ = ["simulate", "simulate_transfers", "EXACT_LIMIT", "EXACT_NODES"]

EXACT_LIMIT = 64
"""``message_sizes="auto"``: counts below this many times the build count (and not a multiple of it) are built
for their own count."""
EXACT_NODES = 1024
"""``message_sizes="auto"`` on more nodes than this scales every count: there a count's own uneven schedules
are read rank by rank and their messages end at many distinct instants, which costs minutes, while
scaled sizes measured within 0.4 % of them (``benchmarks/results/scale/sizes``)."""


def _messages(algorithm: str, dims: tuple[int, ...], count: int, collective: str,
              sizes: str) -> tuple[Messages, float, bool]:
    """Return the messages to simulate, the elements per built element, and whether sizes are exact."""
    c0 = default_count(dims)
    large = math.prod(dims) > EXACT_NODES
    if count % c0 == 0 or sizes == "scaled" or sizes == "auto" and (large or count >= EXACT_LIMIT * c0):
        return read_messages(algorithm, dims, c0, collective), count / c0, count % c0 == 0
    try:
        return read_messages(algorithm, dims, count, collective), 1.0, True
    except ValueError as e:
        if "no symmetry" not in str(e) or sizes == "exact":
            raise
        return read_messages(algorithm, dims, c0, collective), count / c0, False


def _threading(params: SimParams) -> tuple[int, int, tuple[float, ...]]:
    """Return the engine's ``(threads, segment_bytes, gammas)``; one thread and no table: the old model."""
    if params.threads == 1 and not params.gamma_threads:
        return 1, params.segment_bytes, ()
    return params.threads, params.segment_bytes, params.gammas


def _routes(net: Network, steps: Mapping[tuple[int, int], tuple[np.ndarray, ...]]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Routes of an explicit network for every pair that talks: ``(src, dst, offsets, link ids)``."""
    pairs = np.unique(np.concatenate([np.stack([s[0], s[1]]) for s in steps.values()], axis=1), axis=1)
    mi, li = net.links(pairs[0], pairs[1])
    order = np.argsort(mi, kind="stable")  # by pair, each route's links still in order
    mi, li = mi[order], li[order]
    return pairs[0], pairs[1], np.searchsorted(mi, np.arange(pairs.shape[1] + 1)), li


def simulate(algorithm: str, dims: str | Sequence[int], nbytes: int, *, params: SimParams | None = None,
             collective: str = "allreduce", message_sizes: str = "auto") -> SimResult:
    """Simulate ``collective`` of ``algorithm`` on ``dims`` for a vector of ``nbytes`` on SimGrid.

    ``params``: network and software costs (default :class:`SimParams`: the
    paper's network, preset ``c``). ``message_sizes`` (:data:`MESSAGE_SIZES`):
    how message sizes are read, see the module's docstring. Raises ``ValueError`` for bad
    input and :class:`~.sgload.SimGridMissingError` when SimGrid cannot be imported.
    """
    t0 = time.perf_counter()
    params = params or SimParams()
    if message_sizes not in MESSAGE_SIZES:
        raise ValueError(f"message_sizes must be one of {', '.join(MESSAGE_SIZES)}, got {message_sizes!r}")
    algorithm_info(algorithm)
    dims_t = parse_dims(dims)
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
        raise ValueError(f"nbytes must be an int >= 0, got {nbytes!r}")
    nbytes = int(nbytes)
    if nbytes % params.itemsize:
        raise ValueError(f"{nbytes} bytes is not a whole number of {params.itemsize}-byte elements")
    count = nbytes // params.itemsize
    p = math.prod(dims_t)
    net = Network(params.network, dims_t)
    if count == 0 or p == 1:
        return SimResult(algorithm, collective, dims_t, nbytes, params, 0.0, (), (), (), (), (),
                         wall_s=time.perf_counter() - t0)
    msgs, scale, exact = _messages(algorithm, dims_t, count, collective, message_sizes)
    per_elem = params.itemsize * scale
    steps: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for key, sm in msgs.steps.items():
        if scale >= 1:  # whole elements, off by less than one
            nb = np.rint(sm.elems * scale).astype(np.int64) * params.itemsize
        else:  # below the build count: whole bytes, rounded up, so that no message vanishes
            nb = np.ceil(sm.elems * (scale * params.itemsize) - 1e-9).astype(np.int64)
        keep = nb > 0
        src, dst, nb = sm.src[keep], sm.dst[keep], nb[keep]
        if len(src):
            steps[key] = (src, dst, nb, net.hops(src, dst) * params.per_link_s)
    routes = None
    if params.network != "torus" and steps:
        routes = _routes(net, steps)
    inp = EngineInput(params.network, dims_t, params.link_bytes_per_s, params.alpha_s, params.gamma_s_per_byte,
                      params.cpu, msgs.nlanes, msgs.nsteps, steps, msgs.reduce * per_elem, routes,
                      params.wait_sends, *_threading(params))
    out = run_in_child(inp)
    lane_ends = out["lane_step_end"]
    assert isinstance(lane_ends, list)
    ends, times, busiest, ks, phases = [], [], [], [], []
    last = 0.0
    for k in range(msgs.nsteps):
        here = [steps[(lane, k)] for lane in range(msgs.nlanes) if (lane, k) in steps]
        if not here:
            continue
        end = max(max(lane_ends[lane][k] for lane in range(msgs.nlanes)), last)
        ks.append(k)
        phases.append(msgs.phases[k] if k < len(msgs.phases) else "")
        ends.append(end)
        times.append(end - last)
        last = end
        busiest.append(net.busiest(np.concatenate([h[0] for h in here]), np.concatenate([h[1] for h in here]),
                                   np.concatenate([h[2] for h in here])))
    time_s = float(out["time_s"])  # type: ignore[arg-type]
    return SimResult(algorithm, collective, dims_t, nbytes, params, time_s, tuple(ks), tuple(phases), tuple(ends),
                     tuple(times), tuple(busiest), tuple(tuple(x) for x in lane_ends),
                     int(out["simulated_messages"]), exact, msgs.count,  # type: ignore[call-overload]
                     msgs.symmetry, time.perf_counter() - t0, float(out["wall_s"]),  # type: ignore[arg-type]
                     {"instants": out["instants"], "bytes_sent": int(sum(int(v[2].sum()) for v in steps.values()))})


def simulate_transfers(dims: str | Sequence[int], steps: dict[tuple[int, int], Sequence[tuple[int, int, int]]], *,
                       params: SimParams | None = None, reduce_bytes: dict[tuple[int, int, int], float] | None = None
                       ) -> dict[str, object]:
    """Simulate hand-written messages: ``{(lane, step): [(src, dst, nbytes), …]}`` (for tests and small studies).

    ``reduce_bytes``: ``{(lane, step, rank): bytes}`` reduced when that step's receives are in.
    Returns the engine's raw result (``time_s``, ``lane_step_end``, …).
    """
    params = params or SimParams()
    dims_t = parse_dims(dims)
    p = math.prod(dims_t)
    net = Network(params.network, dims_t)
    nl = 1 + max((lane for lane, _ in steps), default=0)
    ns = 1 + max((k for _, k in steps), default=0)
    arrays: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for key, msgs in steps.items():
        if not msgs:
            continue
        src, dst, nb = (np.array(col, dtype=np.int64) for col in zip(*msgs))
        arrays[key] = (src, dst, nb, net.hops(src, dst) * params.per_link_s)
    red = np.zeros((nl, ns, p))
    for (lane, k, r), b in (reduce_bytes or {}).items():
        red[lane, k, r] = b
    routes = None
    if params.network != "torus" and arrays:
        routes = _routes(net, arrays)
    return run_in_child(EngineInput(params.network, dims_t, params.link_bytes_per_s, params.alpha_s,
                                    params.gamma_s_per_byte, params.cpu, nl, ns, arrays, red, routes,
                                    params.wait_sends, *_threading(params)))
