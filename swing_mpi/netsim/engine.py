"""Drive SimGrid through one simulation: build the platform, replay every lane's steps, return the times.

Algorithm:
    One SimGrid actor drives everything with asynchronous host-to-host
    transfers (``Comm.sendto_async``); SimGrid routes and shares them. Every
    (rank, lane) is an *agent* that walks its steps:

    1. Posting step ``k`` at time ``t`` starts each of its messages after
       that message's route latency (``hops·(link + hop)``; see below).
    2. Step ``k`` is complete when it was posted, every message addressed
       to it has arrived (messages may arrive before it is posted: they wait,
       as an unexpected MPI message does) and, with ``wait_sends`` (the
       default), its own messages have been delivered: the executor waits for
       all requests of a step, and a large send completes on delivery.
    3. Then the agent reduces what it received (``γ`` per byte of its
       ``REDUCE`` receives) and pays ``α`` to post its next step that moves
       anything (steps with no message for it are skipped, no ``α``). The
       first step is posted at ``α``. With ``cpu="rank"`` the lanes of one rank
       share one CPU: their ``α`` and ``γ`` run one after the other. With
       ``cpu="lockstep"`` they also advance together, as this library's executor
       runs them: a rank posts step ``k+1`` of its lanes only when every lane of
       it has finished (and reduced) step ``k``.
    4. With reduction threads and segments (``threads >= 2``, ``segment_bytes``;
       :mod:`.software`) a lane step's reduction is split: the work of every
       segment but the last is queued on the rank's pool of reduction threads
       when the step is posted (after whatever the pool already holds, every
       lane's together) and may end before the data is in; the last segment's
       is queued when the data is in. The step is reduced when both are done:
       alone on its rank, ``γ_last·last + max(0, γ_T·(n - last) - transfer)``
       after its data is in. ``α`` stays on the rank's own thread, and so do
       the reductions of blocks under ``SPLIT_BYTES``, which the engine does
       not queue.

    Latency: with CM02, SimGrid shares a link between flows in inverse
    proportion to their route latency (TCP's RTT unfairness), so a 3-hop flow
    would get a third of a 1-hop flow's share. The links are given zero
    latency (equal shares, max-min fair) and each message's route latency
    is waited out before its transfer starts, which is what CM02 does with
    latency on the links, minus the unfairness.

    Event loop: a heap of pending actions (posts after ``α``/``γ``, sends after
    latency); ``Comm.wait_any_for`` until the next of them, and when a
    transfer ends, one sweep of ``test()`` collects every transfer that ended
    at that instant.

This module runs in a process of its own (SimGrid allows one engine per
process): :func:`run_in_child`.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import rc
from .sgload import version_tuple
from .software import SPLIT_BYTES, reduction_seconds

__all__ = ["EngineInput", "run_engine", "run_in_child", "simgrid_torus_routes", "SIMGRID_CONFIG"]

SIMGRID_CONFIG = (
    "--cfg=network/model:CM02",
    "--cfg=network/latency-factor:1",
    "--cfg=network/bandwidth-factor:1",
    "--cfg=network/weight-S:0",
    "--cfg=network/crosstraffic:0",
    "--cfg=surf/precision:1e-12",
    "--cfg=maxmin/precision:1e-9",
    "--log=root.thresh:warning",
)
"""CM02 with latency and bandwidth factors 1, no RTT weight, no reverse (ACK) traffic; SimGrid quiet."""
CONTEXTS_DEFAULT = "raw"
"""SimGrid's context factory for the driver actor where ``$SWING_MPI_SIMGRID_CONTEXTS`` is not set
(``swing_mpi.rc.simgrid_contexts``): ``raw``, the one actor switches stacks with SimGrid's kernel in the
same thread, no OS thread switch per call; ``thread`` is what the Python bindings pick by default, about
twice as slow, far slower on a loaded machine."""


@dataclass
class EngineInput:
    """Everything the child needs, as plain arrays."""

    kind: str
    dims: tuple[int, ...]
    link_bytes_per_s: float
    alpha_s: float
    gamma_s_per_byte: float
    cpu: str
    nlanes: int
    nsteps: int
    steps: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    """``(lane, step)`` → ``(src, dst, bytes, latency_s)`` of its messages (no empty ones)."""
    reduce_bytes: np.ndarray
    """``[lane, step, rank]`` bytes reduced when the step's receives are in."""
    routes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    """Explicit networks: ``(src, dst, offsets, links)``: route ``i`` is ``links[offsets[i]:offsets[i+1]]``."""
    wait_sends: bool = True
    """Whether a step also waits for its own sends to be delivered (else for its receives only)."""
    threads: int = 1
    """Threads a rank reduces with; from 2, with ``segment_bytes``, reductions overlap transfers."""
    segment_bytes: int = 0
    gammas: tuple[float, ...] = ()
    """Seconds per byte on 1..``threads`` threads (empty: ``gamma_s_per_byte`` on one, the old model)."""


def _torus_hosts(sg: Any, root: Any, dims: tuple[int, ...], bw: float) -> dict[int, Any]:
    """Create SimGrid's torus zone under ``root`` (split-duplex links, no latency), seal both; return hosts by id.

    Each element of the torus is a host. SimGrid 3.32's bindings take a callback that returns the host's
    netpoint; 3.35's one that returns a zone, here a star zone holding just the host, its gateway.
    """
    by_id: dict[int, Any] = {}

    def make_host(zone: Any, coords: Any, ident: int) -> tuple[Any, None]:
        h = zone.create_host(f"node-{ident}", 1e9)
        h.seal()
        by_id[ident] = h
        return (h.netpoint, None)

    def make_zone(zone: Any, coords: Any, ident: int) -> Any:
        z = sg.NetZone.create_star_zone(f"zone-{ident}")
        z.set_parent(zone)
        h = z.create_host(f"node-{ident}", 1e9).seal()
        z.set_gateway(h.netpoint)
        z.seal()
        by_id[ident] = h
        return z

    leaf = make_zone if version_tuple(str(getattr(sg, "simgrid_version", ""))) >= (3, 35) else make_host
    zone = sg.NetZone.create_torus_zone("torus", root, list(dims), sg.ClusterCallbacks(leaf, None, None),
                                        bw, 0.0, sg.Link.SharingPolicy.SPLITDUPLEX)
    zone.seal()
    root.seal()
    return by_id


def _platform(sg: Any, inp: EngineInput) -> list[Any]:
    """Create the platform; return the host of every rank."""
    from .network import simgrid_host_id

    root = sg.NetZone.create_full_zone("root")
    p = math.prod(inp.dims)
    bw = inp.link_bytes_per_s
    if inp.kind == "torus":
        by_id = _torus_hosts(sg, root, inp.dims, bw)
        return [by_id[simgrid_host_id(r, inp.dims)] for r in range(p)]
    zone = sg.NetZone.create_full_zone(inp.kind)
    zone.set_parent(root)
    hosts = []
    for r in range(p):
        h = zone.create_host(f"node-{r}", 1e9)
        h.seal()
        hosts.append(h)
    assert inp.routes is not None
    src, dst, off, links = inp.routes
    made: dict[int, Any] = {}
    for i in range(len(src)):
        hop = []
        for lid in links[off[i]:off[i + 1]].tolist():
            ln = made.get(lid)
            if ln is None:
                ln = made[lid] = zone.create_link(f"link-{lid}", bw).set_latency(0.0).seal()
            hop.append(sg.LinkInRoute(ln))
        zone.add_route(hosts[int(src[i])].netpoint, hosts[int(dst[i])].netpoint, None, None, hop, False)
    zone.seal()
    root.seal()
    return hosts


def _wait_any(sg: Any) -> Any:
    """Return ``wait(comms, timeout)``: True when one of ``comms`` ended within ``timeout`` (< 0: no limit).

    SimGrid 3.32 has ``Comm.wait_any_for``; 3.35 has ``ActivitySet.wait_any_for``, which raises
    ``TimeoutException`` instead of returning -1 (a set made per wait: the ended comms are then swept
    with ``test()``, as with 3.32).
    """
    if hasattr(sg.Comm, "wait_any_for"):
        return lambda comms, timeout: sg.Comm.wait_any_for(comms, timeout) >= 0
    timeout_error = sg.TimeoutException

    def wait(comms: list[Any], timeout: float) -> bool:
        try:
            sg.ActivitySet(comms).wait_any_for(timeout)
        except timeout_error:
            return False
        return True

    return wait


def run_engine(inp: EngineInput) -> dict[str, object]:
    """Run the simulation here (once per process) and return its times."""
    from .sgload import load_simgrid

    sg = load_simgrid()
    t_wall = time.perf_counter()
    contexts = rc.simgrid_contexts or CONTEXTS_DEFAULT
    engine = sg.Engine(["swing-mpi-simulate", *SIMGRID_CONFIG, f"--cfg=contexts/factory:{contexts}"])
    hosts = _platform(sg, inp)
    p = len(hosts)
    L, S = inp.nlanes, inp.nsteps
    alpha, gamma = inp.alpha_s, inp.gamma_s_per_byte
    lockstep = inp.cpu == "lockstep"
    shared = inp.cpu in ("rank", "lockstep")
    wait_sends = inp.wait_sends

    # per (lane, step): messages grouped by sender, receive counts per receiver
    first: dict[tuple[int, int], list[int]] = {}
    src_l: dict[tuple[int, int], list[int]] = {}
    dst_l: dict[tuple[int, int], list[int]] = {}
    byt_l: dict[tuple[int, int], list[int]] = {}
    lat_l: dict[tuple[int, int], list[float]] = {}
    left: dict[tuple[int, int], list[int]] = {}
    active = np.zeros((L, S, p), dtype=bool)
    for key, (src, dst, nb, lat) in inp.steps.items():
        order = np.argsort(src, kind="stable")
        src, dst, nb, lat = src[order], dst[order], nb[order], lat[order]
        first[key] = np.searchsorted(src, np.arange(p + 1)).tolist()
        src_l[key], dst_l[key], byt_l[key], lat_l[key] = src.tolist(), dst.tolist(), nb.tolist(), lat.tolist()
        cnt = np.bincount(dst, minlength=p)
        sent = np.bincount(src, minlength=p)
        left[key] = (cnt + sent).tolist() if inp.wait_sends else cnt.tolist()
        active[key[0], key[1]] = (cnt > 0) | (sent > 0)
    overlap = inp.threads >= 2 and inp.segment_bytes > 0 and bool(inp.gammas)
    early: list[list[list[float]]] | None = None
    if inp.gammas:
        early_a, last_a = reduction_seconds(inp.reduce_bytes, tuple(inp.gammas), inp.segment_bytes if overlap else 0)
        red = last_a.tolist() if last_a.any() else None
        early = early_a.tolist() if overlap and early_a.any() else None
    else:
        red = (inp.reduce_bytes * gamma).tolist() if gamma else None
    pool_free = [0.0] * p  # overlap: when the rank's reduction threads are free of the work queued so far
    # overlap: blocks the engine queues on its threads (smaller ones it reduces on the rank's own thread)
    pooled = (inp.reduce_bytes >= SPLIT_BYTES).tolist() if overlap else None
    nxt = np.full((L, S + 1, p), -1, dtype=np.int64)  # next active step at or after k
    for k in range(S - 1, -1, -1):
        nxt[:, k] = np.where(active[:, k], k, nxt[:, k + 1])
    nxt_l = nxt.tolist()
    # lockstep: the rank's next round at or after k (a step where any of its lanes moves anything)
    first_any = np.where(nxt >= 0, nxt, S).min(axis=0)
    nxt_any = np.where(first_any < S, first_any, -1).tolist()
    active_l = active.tolist()
    pending = [0] * p  # lockstep: lanes of the rank's current round not yet finished

    step_end = [[0.0] * S for _ in range(L)]
    finish = [0.0] * (p * L)
    cur = [-1] * (p * L)
    posted = [False] * (p * L)
    cpu_free = [0.0] * p
    heap: list[tuple[float, int, int, int, int]] = []
    seq = 0
    comms: list[Any] = []
    tags: list[tuple[int, int, int]] = []
    sendto = sg.Comm.sendto_async
    wait_any = _wait_any(sg)
    stats = {"messages": 0, "instants": 0}

    def start(ln: int, k: int, i: int) -> None:
        key = (ln, k)
        comms.append(sendto(hosts[src_l[key][i]], hosts[dst_l[key][i]], byt_l[key][i]))
        tags.append((ln, k, i))
        stats["messages"] += 1

    def post(r: int, ln: int, k: int, now: float) -> None:
        nonlocal seq
        a = r * L + ln
        cur[a], posted[a] = k, True
        if early is not None:
            w = early[ln][k][r]
            if w > 0:
                pool_free[r] = max(now, pool_free[r]) + w
        key = (ln, k)
        f = first.get(key)
        if f is not None:
            lats = lat_l[key]
            for i in range(f[r], f[r + 1]):
                if lats[i] > 0:
                    seq += 1
                    heapq.heappush(heap, (now + lats[i], seq, 1, ln * S + k, i))
                else:
                    start(ln, k, i)
            if left[key][r] > 0:
                return
        complete(r, ln, k, now)

    def start_round(r: int, k: int, t: float) -> None:
        """Lockstep: post round ``k`` of rank ``r`` from ``t``: each lane that moves in it, after its α."""
        nonlocal seq
        n = 0
        for ln in range(L):
            if active_l[ln][k][r]:
                a = r * L + ln
                cur[a] = k
                t = max(t, cpu_free[r]) + alpha
                cpu_free[r] = t
                seq += 1
                heapq.heappush(heap, (t, seq, 0, a, k))
                n += 1
        pending[r] = n

    def complete(r: int, ln: int, k: int, now: float) -> None:
        nonlocal seq
        a = r * L + ln
        posted[a] = False
        g = red[ln][k][r] if red is not None else 0.0
        if pooled is not None and pooled[ln][k][r]:  # on the reduction threads, after the work queued before
            done = pool_free[r] = max(now, pool_free[r]) + g
        else:
            done = (max(now, cpu_free[r]) if shared else now) + g
        if done > step_end[ln][k]:
            step_end[ln][k] = done
        if lockstep:  # the CPU only moves forward, so the round's last reduction ends at the latest done
            cpu_free[r] = finish[a] = done
            pending[r] -= 1
            if pending[r] == 0 and nxt_any[k + 1][r] >= 0:
                start_round(r, nxt_any[k + 1][r], done)
            return
        k2 = nxt_l[ln][k + 1][r]
        end = done + (alpha if k2 >= 0 else 0.0)
        if shared:
            cpu_free[r] = end
        if k2 < 0:
            finish[a] = done
            return
        cur[a] = k2
        if end > now:
            seq += 1
            heapq.heappush(heap, (end, seq, 0, a, k2))
        else:
            post(r, ln, k2, now)

    def arrive(ln: int, k: int, i: int, now: float) -> None:
        key = (ln, k)
        cnt = left[key]
        for d in ((dst_l[key][i], src_l[key][i]) if wait_sends else (dst_l[key][i],)):
            cnt[d] -= 1
            if cnt[d] == 0:
                a = d * L + ln
                if cur[a] == k and posted[a]:
                    complete(d, ln, k, now)

    def run_due(t: float) -> None:
        """Run every pending action due at ``t`` (the earliest), including those they add at ``t``."""
        while heap and heap[0][0] <= t:
            _, _, kind, x, y = heapq.heappop(heap)
            if kind == 0:
                r, ln = divmod(x, L)
                post(r, ln, y, t)
            else:
                lk, i = x, y
                start(lk // S, lk % S, i)

    def driver() -> None:
        nonlocal comms, tags
        for r in range(p):  # first steps, after α (one lane after the other with a shared CPU)
            if lockstep:
                if nxt_any[0][r] >= 0:
                    start_round(r, nxt_any[0][r], 0.0)
                continue
            for ln in range(L):
                k = nxt_l[ln][0][r]
                if k < 0:
                    continue
                a = r * L + ln
                cur[a] = k
                t = (cpu_free[r] if shared else 0.0) + alpha
                if shared:
                    cpu_free[r] = t
                heapq.heappush(heap, (t, -a - 1, 0, a, k))
        while heap or comms:
            now = sg.Engine.clock
            if not comms:
                t = heap[0][0]
                if t > now:
                    sg.this_actor.sleep_until(t)
                run_due(t)
                continue
            if heap:
                t = heap[0][0]
                if t <= now or not wait_any(comms, t - now):
                    run_due(t)
                    continue
            else:
                wait_any(comms, -1.0)
            now = sg.Engine.clock
            stats["instants"] += 1
            keep_c, keep_t, ended = [], [], []
            for c, tg in zip(comms, tags):
                if c.test():
                    ended.append(tg)
                else:
                    keep_c.append(c)
                    keep_t.append(tg)
            comms, tags = keep_c, keep_t
            for ln, k, i in ended:
                arrive(ln, k, i, now)
            run_due(now)

    sg.Actor.create("driver", hosts[0], driver)
    engine.run()
    if any(v > 0 for lst in left.values() for v in lst):
        raise RuntimeError("simulation ended with messages never delivered (the schedules do not match)")
    return {"time_s": max(finish) if finish else 0.0, "lane_step_end": step_end,
            "wall_s": time.perf_counter() - t_wall, "simulated_messages": stats["messages"],
            "instants": stats["instants"]}


def _child(conn: Any, inp: EngineInput) -> None:
    try:
        conn.send(("ok", run_engine(inp)))
    except BaseException as e:  # noqa: BLE001 (reported to the parent)
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def run_in_child(inp: EngineInput) -> dict[str, object]:
    """Run :func:`run_engine` in a fresh process (fork where there is one) and return its result."""
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    fork = "fork" in methods
    if fork:  # load the module (seconds of dynamic linking) once, here; each child then only makes its engine
        from .sgload import load_simgrid

        load_simgrid()
    ctx = mp.get_context("fork" if fork else "spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(  # type: ignore[attr-defined]
        target=_child, args=(child, inp), daemon=True)
    proc.start()
    child.close()
    try:
        status, value = parent.recv()
    except EOFError:
        proc.join()
        raise RuntimeError(f"the simulation process died (exit code {proc.exitcode})") from None
    proc.join()
    if status != "ok":
        raise RuntimeError(f"simulation failed: {value}")
    return value


def _torus_routes(dims: tuple[int, ...], pairs: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    from .network import simgrid_host_id
    from .sgload import load_simgrid

    sg = load_simgrid()
    sg.Engine(["swing-mpi-routes", *SIMGRID_CONFIG])
    by_id = _torus_hosts(sg, sg.NetZone.create_full_zone("root"), dims, 1e9)
    rank_of = {simgrid_host_id(r, dims): r for r in range(math.prod(dims))}
    out = []
    for a, b in pairs:
        links, _ = by_id[simgrid_host_id(a, dims)].route_to(by_id[simgrid_host_id(b, dims)])
        hops = []
        for ln in links:  # torus_link_from_X_to_Y_UP goes X -> Y, _DOWN goes Y -> X (SimGrid host ids)
            m = ln.name.rsplit("_", 1)
            x, y = (int(v) for v in m[0].split("from_")[1].split("_to_"))
            hops.append((rank_of[x], rank_of[y]) if m[1] == "UP" else (rank_of[y], rank_of[x]))
        out.append(hops)
    return out


def _routes_child(conn: Any, dims: tuple[int, ...], pairs: list[tuple[int, int]]) -> None:
    try:
        conn.send(("ok", _torus_routes(dims, pairs)))
    except BaseException as e:  # noqa: BLE001 (reported to the parent)
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def simgrid_torus_routes(dims: tuple[int, ...], pairs: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """SimGrid's own route between each pair of our ranks on its torus zone, as ``(from rank, to rank)`` hops.

    Runs in a fresh process; used to check that our host mapping makes SimGrid route as the model does.
    """
    import multiprocessing as mp

    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(  # type: ignore[attr-defined]
        target=_routes_child, args=(child, tuple(dims), list(pairs)), daemon=True)
    proc.start()
    child.close()
    status, value = parent.recv()
    proc.join()
    if status != "ok":
        raise RuntimeError(value)
    return value
