"""Shared helpers of benchmarks/scale.py and benchmarks/validate_lab.py: one simulation per child process.

SimGrid allows one engine per process, and a child per point also gives each
point its own peak memory (``ru_maxrss``) and a timeout that can kill it.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
import traceback
from typing import Any

__all__ = ["simulate_point", "engine_costs", "preset_params", "messages", "parse_dims", "netsim_revision",
           "schedule_messages"]


def parse_dims(text: str) -> tuple[int, ...]:
    """``"64x64"`` -> ``(64, 64)``."""
    return tuple(int(x) for x in text.lower().split("x"))


def engine_costs() -> dict[str, float]:
    """Return the ``engine`` preset's measured costs (``swing-mpi probe``; see swing_mpi/probe.py)."""
    from swing_mpi.probe import load_engine_costs

    c = load_engine_costs()
    return {"alpha_s": c.alpha_s, "alpha_lane_s": c.alpha_lane_s, "gamma_s_per_byte": c.gamma_s_per_byte,
            "c_gamma_s_per_byte": c.c_gamma_s_per_byte or 0.0, "source": c.source}  # type: ignore[dict-item]


def preset_params(preset: str) -> dict[str, Any]:
    """Software-cost fields of SimParams for a preset name, or a number of seconds per step (gamma 0).

    ``c``: 1.5 us per step, no reduction cost, each lane on its own (the paper's
    network-only setting, the simulator's own ``c`` preset). ``c-reduce``: the
    same plus numpy's add per byte (a C loop, measured by swing-mpi probe),
    what a C MPI pays to reduce. ``engine``: this library's measured costs, a
    rank's lanes in series on one CPU. ``engine-cgamma``: the engine's per-step
    cost with the C reduction cost (the executor reduces with the same numpy
    kernel; its own gamma was measured with both ranks sharing the memory).
    """
    from swing_mpi.probe import C_ALPHA_S

    e = engine_costs()
    if preset == "c":
        return {"alpha_s": C_ALPHA_S, "gamma_s_per_byte": 0.0, "cpu": "lane"}
    if preset == "c-reduce":
        return {"alpha_s": C_ALPHA_S, "gamma_s_per_byte": float(e["c_gamma_s_per_byte"]), "cpu": "lane"}
    if preset == "engine":
        return {"alpha_s": float(e["alpha_s"]), "gamma_s_per_byte": float(e["gamma_s_per_byte"]), "cpu": "rank"}
    if preset == "engine-cgamma":  # the engine's steps, the reduction measured as the C loop's (the same np.add)
        return {"alpha_s": float(e["alpha_s"]), "gamma_s_per_byte": float(e["c_gamma_s_per_byte"]), "cpu": "rank"}
    return {"alpha_s": float(preset), "gamma_s_per_byte": 0.0, "cpu": "lane"}


def messages(algorithm: str, dims: tuple[int, ...]) -> int:
    """Messages of one run of ``algorithm`` on ``dims`` (a rank's sends times p): the simulation's work.

    Ring, Hamiltonian rings and bucket by their step counts (building their
    schedules at 16,384 ranks takes longer than the estimate is worth); any
    other algorithm from rank 0's schedule.
    """
    from math import prod

    from swing_mpi.schedule import build_schedule

    p = prod(dims)
    active = [d for d in dims if d > 1]
    lanes = 2 * len(active) if any(d > 2 for d in active) else len(active)
    if algorithm == "ring":
        return p * 2 * (p - 1)
    if algorithm == "hamiltonian":
        return p * lanes * 2 * (p - 1)
    if algorithm == "bucket":
        return p * lanes * 2 * sum(d - 1 for d in active)
    s = build_schedule(algorithm, dims, 0, max(p * 64, 1 << 16))
    return p * sum(1 for lane in s.lanes for st in lane for t in st.transfers if t.send)


def netsim_revision() -> str:
    """Return a short hash of the simulator's source files: which version of it made a result."""
    import hashlib
    from pathlib import Path

    import swing_mpi.netsim as ns

    h = hashlib.sha256()
    for f in sorted(Path(ns.__file__).parent.glob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def _child(conn: Any, kwargs: dict[str, Any]) -> None:
    try:
        from swing_mpi.netsim import SimParams, simulate

        t0 = time.perf_counter()
        params = SimParams(**kwargs.pop("params"))
        r = simulate(kwargs.pop("algorithm"), tuple(kwargs.pop("dims")), kwargs.pop("nbytes"), params=params,
                     **kwargs)
        wall = time.perf_counter() - t0
        out = dict(r.to_dict()) if hasattr(r, "to_dict") else {"time_s": r.time_s,
                                                                 "goodput_bytes_per_s": r.goodput_bytes_per_s}
        out.update({"wall_s": wall, "sim_wall_s": getattr(r, "sim_wall_s", None),
                    "peak_rss_kib": max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)})
        conn.send(out)
    except BaseException as e:  # report, do not hang the parent
        conn.send({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=3)})
    finally:
        conn.close()


def schedule_messages(algorithm: str, dims: tuple[int, ...], nbytes: int, itemsize: int, *, exact: bool
                      ) -> tuple[dict[tuple[int, int], list[tuple[int, int, int]]], dict[tuple[int, int, int], float]]:
    """Every rank's messages and reduced bytes per (lane, step), read from its schedule built with ``exact``.

    For the schedules the simulator does not build itself: it builds the
    exact (integer) form, and an algorithm whose schedule depends on the op
    (``swing-lat``) runs another one for float sums, as the lab's float64 did.
    """
    from math import prod

    from swing_mpi.schedule import REDUCE, build_schedule

    count = nbytes // itemsize
    steps: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    red: dict[tuple[int, int, int], float] = {}
    for rank in range(prod(dims)):
        s = build_schedule(algorithm, dims, rank, count, exact=exact)
        for lane, lane_steps in enumerate(s.lanes):
            for k, st in enumerate(lane_steps):
                msgs = steps.setdefault((lane, k), [])
                r = 0
                for t in st.transfers:
                    if t.send_count:
                        msgs.append((rank, t.peer, t.send_count * itemsize))
                    if t.recv_count and t.action == REDUCE:
                        r += t.recv_count
                if st.combine:
                    r += (s.slots - 1) * s.count
                if r:
                    red[(lane, k, rank)] = float(r * itemsize)
    return steps, red


def _child_schedules(conn: Any, kwargs: dict[str, Any]) -> None:
    try:
        from swing_mpi.netsim import SimParams
        from swing_mpi.netsim.run import simulate_transfers

        t0 = time.perf_counter()
        params = SimParams(**kwargs["params"])
        steps, red = schedule_messages(kwargs["algorithm"], tuple(kwargs["dims"]), kwargs["nbytes"],
                                       params.itemsize, exact=kwargs["exact"])
        r = simulate_transfers(tuple(kwargs["dims"]), steps, params=params, reduce_bytes=red)
        conn.send({"time_s": float(r["time_s"]), "wall_s": time.perf_counter() - t0,  # type: ignore[arg-type]
                   "exact": kwargs["exact"]})
    except BaseException as e:
        conn.send({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=3)})
    finally:
        conn.close()


def simulate_point(algorithm: str, dims: tuple[int, ...], nbytes: int, params: dict[str, Any], *,
                   timeout: float = 600.0, exact: bool | None = None, **options: Any) -> dict[str, Any]:
    """Run one simulation in a fresh child process; return its result fields, or ``{"error": ...}``.

    ``exact`` (True or False): simulate the schedules built with it, rank by
    rank (:func:`schedule_messages`), instead of the simulator's own reading.
    """
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    kwargs = {"algorithm": algorithm, "dims": list(dims), "nbytes": int(nbytes), "params": dict(params), **options}
    if exact is not None:
        kwargs["exact"] = exact
    # not a daemon: the simulator forks its own child
    proc = ctx.Process(target=_child if exact is None else _child_schedules, args=(send, kwargs))
    proc.start()
    send.close()
    out: dict[str, Any]
    if recv.poll(timeout):
        try:
            out = recv.recv()
        except EOFError:
            out = {"error": "the simulation process died"}
    else:
        out = {"error": f"timeout after {timeout:.0f} s"}
        proc.kill()
    proc.join(5)
    if proc.exitcode not in (0, None) and "error" not in out:
        out["error"] = f"exit code {proc.exitcode}"
    return out
