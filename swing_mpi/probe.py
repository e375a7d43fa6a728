"""``swing-mpi probe``: measure this library's own per-step and per-byte costs (the simulator's ``engine`` preset).

Run under mpiexec with 2 ranks on the machine whose costs you want::

    mpiexec -n 2 python -m mpi4py -m swing_mpi probe            # writes ~/.config/swing_mpi/engine_costs.json
    mpiexec -n 2 python -m mpi4py -m swing_mpi probe --out costs.json --repeats 9

What it measures (rank 0 prints it and writes the JSON file):

* ``alpha_1lane_s``: the executor's fixed cost of one step of one lane: post
  the step's Irecv/Isend, wait for them, apply the received data,
  bookkeeping. Two synthetic schedules between the 2 ranks, 1 step and
  ``--steps`` steps, each step exchanging one float64 (REDUCE), run through
  :class:`swing_mpi.executor.Plan` as an allreduce would be; the cost per step
  is the difference of their medians divided by the extra steps (so the
  per-call constant cancels). It includes the MPI library's own latency over
  shared memory (``mpi_step_s`` reports that part alone: the same steps as
  bare ``Sendrecv`` calls).
* ``alpha_s``: the same with ``--lanes`` lanes (default 4, a 2D torus's ports), divided by the
  lanes (``step_s``: the whole step; the compiled core posts every lane's messages at once);
  ``alpha_lane_s``: what each further lane adds to a step.
* ``gamma_s_per_byte``: the engine's float64 SUM kernel per byte on rank 0 alone (rank 1 sleeps);
  ``c_gamma_s_per_byte``: numpy's ``add`` there (a C loop, the reduction a C MPI pays: the ``c``
  preset's ``gamma``); ``*_pair_*``: both ranks at once. ``gamma_threads_s_per_byte``: our kernel on
  ``k`` threads, the thread counts in turns of 4 calls, the later 3 of each turn (the pool's threads
  awake, as between a plan's reductions); ``gamma_threads_first_s_per_byte``: each turn's first call.
* ``overlap``: one REDUCE step of ``--gamma-size`` bytes in 1 MiB segments, each reduced as it
  arrives: how much of its reduction the transfer hides, with one overlapped run's trace.
  ``--overlap-only`` measures just that (``--segment``, ``--threads``), printed and written only
  to a named ``--out``: run it where a wire moves the bytes (``swing-mpi lab --dims 2 --link 4G --
  python -m mpi4py -m swing_mpi probe --overlap-only``); over shared memory the receiving rank's
  CPU copies them and nothing can hide.

Each number is the median of ``--repeats`` rounds (each a median over calls); the machine's
load average goes into the file, since another process on the cores inflates every number.

:func:`~swing_mpi.engine_costs.load_engine_costs` (re-exported here) is what the
simulator's ``engine`` preset reads: ``$SWING_MPI_ENGINE_COSTS`` if set, else
``~/.config/swing_mpi/engine_costs.json`` if it exists, else the built-in
:data:`DEFAULT_ENGINE` (measured on the development machine; the file it came
from is in ``benchmarks/results/scale/engine-probe.json``). ``--from-tuning``
writes the file from a ``swing-mpi calibrate`` tuning file instead (its fitted
α and measured γ) without measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from .config import rc
from .engine_costs import DEFAULT_ENGINE, EngineCosts, default_engine_path, load_engine_costs

__all__ = ["EngineCosts", "DEFAULT_ENGINE", "C_ALPHA_S", "default_engine_path", "load_engine_costs",
           "chain_schedules", "probe", "overlap", "add_arguments", "run", "main"]

C_ALPHA_S = 1.5e-6
"""The ``c`` preset's cost per step: 1.5 µs, the value the Trivance paper uses when it reruns Swing's simulator."""


# -- the probe --------------------------------------------------------------------------

def chain_schedules(steps: int, *, lanes: int = 1, count: int = 1) -> list[Any]:
    """Two ranks' schedules: ``steps`` steps on each of ``lanes`` lanes, each step exchanging ``count`` elements.

    Lane ``i`` owns elements ``i*count`` to ``(i+1)*count``; every step reduces the peer's copy of
    them (``peer_first`` on rank 1, so both compute the same sum).
    """
    from .schedule.base import REDUCE, Schedule, Step, Transfer

    out = []
    for rank in range(2):
        peer = 1 - rank
        lane_steps = tuple(
            tuple(Step(transfers=(Transfer(peer=peer, send=((i * count, (i + 1) * count),),
                                           recv=((i * count, (i + 1) * count),), action=REDUCE,
                                           peer_first=rank == 1),), phase="exchange") for _ in range(steps))
            for i in range(lanes))
        out.append(Schedule(algorithm=f"probe-{lanes}x{steps}", rank=rank, size=2, count=lanes * count, dims=(2,),
                            lanes=lane_steps, lane_names=tuple(f"lane-{i}" for i in range(lanes))))
    return out


def _median_call(comm: Any, fn: Any, calls: int) -> float:
    """Median seconds of ``fn()`` over ``calls`` calls, each from a barrier; max over ranks."""
    from mpi4py import MPI

    ts = []
    for _ in range(calls):
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(comm.allreduce(statistics.median(ts), op=MPI.MAX))


def _plan_call(comm: Any, steps: int, lanes: int) -> Any:
    import numpy as np
    from mpi4py import MPI

    from .executor import Plan

    plan = Plan(comm, chain_schedules(steps, lanes=lanes)[comm.Get_rank()], MPI.DOUBLE, MPI.SUM)
    vec = np.ones(lanes, np.float64)
    seq = [0]

    def call() -> None:
        vec[:] = 1.0
        plan.run(vec.view(np.uint8), seq=seq[0])
        seq[0] = (seq[0] + 1) % 256

    return call


def _sendrecv_call(comm: Any, steps: int) -> Any:
    import numpy as np

    peer = 1 - comm.Get_rank()
    a = np.ones(1, np.float64)
    b = np.empty(1, np.float64)

    def call() -> None:
        for _ in range(steps):
            comm.Sendrecv(a, dest=peer, sendtag=7, recvbuf=b, source=peer, recvtag=7)

    return call


def _operands(count: int) -> tuple[Any, Any]:
    """Two float64 vectors of ``count`` elements, the same values on every call (the probe's reductions)."""
    import numpy as np

    rng = np.random.default_rng(11)
    return rng.uniform(0.5, 1.5, count), rng.uniform(0.5, 1.5, count)


def _reduce_fn(kind: str, count: int, threads: int, arrays: Any = None) -> Any:
    """Return a float64 SUM of ``count`` elements into a buffer: ``ours`` (the engine's kernel) or ``numpy``.

    ``arrays``: the operands ``(a, b)`` (``b`` takes the sum), shared by functions compared side by side
    so that each finds the caches as the other left them; new ones where None.
    """
    import numpy as np

    from . import native
    from .program import kernel_for

    a, b = arrays if arrays is not None else _operands(count)
    core = native.load()
    if kind == "numpy":
        return lambda: np.add(a, b, out=b)
    if core is None:
        from mpi4py import MPI

        from .reducer import Reducer

        red = Reducer(MPI.SUM, MPI.DOUBLE)
        av, bv = a.view(np.uint8), b.view(np.uint8)
        return lambda: red(av, bv, True)
    kernel = kernel_for("SUM", np.dtype(np.float64), True)
    from .executor import REDUCE_MIN_BYTES

    return lambda: core.reduce(kernel, b, a, b, threads, REDUCE_MIN_BYTES)


def _medians(fns: list[Any], calls: int, streak: int = 1) -> tuple[list[float], list[float]]:
    """Median seconds of each of ``fns``, their calls in turn, ``streak`` calls a turn, after one call of each.

    Returns the medians of the turns' later calls (all calls where ``streak`` is 1) and of their first
    calls, each right after another function's turn (with threads: the pool's threads asleep).
    """
    times: list[list[float]] = [[] for _ in fns]
    firsts: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(calls):
        for fn, ts, fs in zip(fns, times, firsts):
            for i in range(streak):
                t0 = time.perf_counter()
                fn()
                (fs if i == 0 and streak > 1 else ts).append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times], [statistics.median(fs or ts) for fs, ts in zip(firsts, times)]


def _alone(comm: Any, fns: list[Any], nbytes: int, calls: int, streak: int = 1) -> list[list[float]]:
    """Seconds per byte of each of ``fns`` on rank 0 while rank 1 sleeps (its core free), their calls in turn.

    Alternating the calls puts every function under the same conditions (this VM's memory bandwidth
    moves with its neighbours from one second to the next), so their ratios are side by side. Returns
    :func:`_medians`' two lists, per byte.
    """
    comm.Barrier()
    got = [[t / nbytes for t in m] for m in _medians(fns, calls, streak)] if comm.Get_rank() == 0 else None
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(1e-3)
    return [[float(t) for t in m] for m in comm.bcast(got, root=0)]


def _reductions(comm: Any, nbytes: int, thread_counts: list[int], calls: int = 7) -> dict[str, Any]:
    """Ours and numpy's float64 SUM per byte, on rank 0 alone and on both ranks at once; ours with k threads alone."""
    from mpi4py import MPI

    count = max(1, nbytes // 8)
    out: dict[str, Any] = {}
    for kind in ("ours", "numpy"):
        fn = _reduce_fn(kind, count, 1)
        alone = _alone(comm, [fn], count * 8, calls)[0][0]
        comm.Barrier()
        both = _medians([fn], calls)[0][0] / (count * 8)
        out[kind] = (alone, float(comm.allreduce(both, op=MPI.MAX)))
    shared = _operands(count)
    per_k, first = _alone(comm, [_reduce_fn("ours", count, k, shared) for k in thread_counts], count * 8, calls, 4)
    out["threads"] = {str(k): t for k, t in zip(thread_counts, per_k)}
    out["threads_first"] = {str(k): t for k, t in zip(thread_counts, first)}
    return out


def _big_step(comm: Any, nbytes: int, segment: int, threads: int, engine: str | None) -> tuple[Any, Any]:
    """One 2-rank REDUCE step of ``nbytes`` (float64) with ``segment``-byte messages: (call, its plan)."""
    import numpy as np
    from mpi4py import MPI

    from . import executor

    count = max(1, nbytes // 8)
    old = rc.segment
    rc.segment = segment
    try:
        plan = executor.Plan(comm, chain_schedules(1, count=count)[comm.Get_rank()], MPI.DOUBLE, MPI.SUM,
                             threads=threads, engine=engine)
    finally:
        rc.segment = old
    vec = np.ones(count)
    view = vec.view(np.uint8)

    def call() -> None:  # the values double each call, up to inf: the time of an IEEE add does not change
        plan.run(view)

    return call, plan


def _overlap(comm: Any, nbytes: int, segment: int, threads: int, calls: int) -> dict[str, Any]:
    """How much of a large step's reduction hides behind its transfer (the compiled core only).

    ``serial``: the step with one thread and no segments (transfer, then reduce); ``overlapped``:
    segments of ``segment`` bytes, each reduced on ``threads`` worker threads while the next
    arrives; ``wire``: the same bytes as one bare ``Sendrecv``; ``reduce``: the reduction alone,
    both ranks at once. ``hidden`` = (wire + reduce - overlapped) / reduce: 1 when the reduction
    costs nothing beyond the transfer, 0 when it follows it. The trace is one overlapped run's.
    """
    import numpy as np

    count = max(1, nbytes // 8)
    serial, _ = _big_step(comm, nbytes, 0, 1, "c")
    overlapped, plan = _big_step(comm, nbytes, segment, threads, "c")
    peer = 1 - comm.Get_rank()
    a, b = np.ones(count), np.empty(count)

    def wire() -> None:
        comm.Sendrecv(a, dest=peer, sendtag=9, recvbuf=b, source=peer, recvtag=9)

    red = _reduce_fn("ours", count, 1)
    t: dict[str, Any] = {name: _median_call(comm, fn, calls) for name, fn in
                         (("wire", wire), ("reduce", red), ("serial", serial), ("overlapped", overlapped))}
    plan.trace(4096)
    overlapped()
    events = plan.trace(0)
    kinds = {0: "post", 1: "message", 2: "reduce-start", 3: "reduce-end", 4: "done", 5: "copy-back-ahead"}
    t["hidden"] = (t["wire"] + t["reduce"] - t["overlapped"]) / t["reduce"] if t["reduce"] > 0 else 0.0
    t.update(_trace_summary(events))
    t["trace"] = [[round(e[0] * 1e6, 1), kinds.get(e[1], e[1]), e[4]] for e in events]
    t.update(bytes=count * 8, segment=segment, threads=threads)
    return t


def _trace_summary(events: list[tuple[float, int, int, int, int]]) -> dict[str, float]:
    """From one run's trace (this rank's): its reductions' time, the part after the last message, the tail.

    ``trace_reduce_s``: the reductions' summed time; ``trace_reduce_after_wire_s``: the part of it after the
    step's last message (a receive or a send) completed, the reduction the wire did not hide;
    ``trace_tail_s``: from that last message to the step's end; ``trace_hidden``: 1 - after / summed;
    ``trace_copies_ahead``: reduced chunks copied back into their sent blocks ahead of the other sums (threads).
    """
    last = max((e[0] for e in events if e[1] == 1), default=0.0)
    total = after = 0.0
    open_: list[float] = []  # reduction starts not yet ended (parts on worker threads can interleave)
    for e in events:
        if e[1] == 2:
            open_.append(e[0])
        elif e[1] == 3 and open_:
            start = open_.pop(0)
            total += e[0] - start
            after += max(0.0, e[0] - max(start, last))
    done = max((e[0] for e in events if e[1] == 4), default=last)
    return {"trace_reduce_s": total, "trace_reduce_after_wire_s": after, "trace_tail_s": max(0.0, done - last),
            "trace_hidden": 1.0 - after / total if total > 0 else 0.0,
            "trace_copies_ahead": sum(1 for e in events if e[1] == 5)}


def _conditions() -> dict[str, Any]:
    """Return the machine's state when a probe ran: load average, cores, the wait policy set, the time (UTC)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"loadavg": list(load) if load else None, "cpus": os.cpu_count(),
            "wait_policy": rc.wait or "the machine's rule",
            "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def overlap(comm: Any, *, nbytes: int = 16 << 20, segment: int = 1 << 20, threads: tuple[int, ...] = (1, 2),
            calls: int = 5) -> dict[str, Any]:
    """Measure only how much of a large step's reduction hides behind its transfer (``--overlap-only``).

    For each thread count, :func:`_overlap`'s timings (``wire``, ``reduce``, ``serial``, ``overlapped``, each a
    median of ``calls`` calls) and one overlapped run's trace with what it says (``trace_*``). Meant for a real
    wire, where MPI's bytes do not take the ranks' own cores: two ranks across the lab's link
    (``swing-mpi lab --dims 2 --link 2G -- python -m mpi4py -m swing_mpi probe --overlap-only``).
    """
    from . import native

    if comm.Get_size() != 2:
        raise ValueError(f"the probe runs on exactly 2 ranks, not {comm.Get_size()}")
    if native.load() is None:
        raise ValueError(f"the overlap is the compiled core's, which is not available here: {native.why_not()}")
    if segment <= 0 or segment >= nbytes:
        raise ValueError(f"--segment must be above 0 and below the step's {nbytes} bytes, not {segment}")
    if not threads or min(threads) < 1:
        raise ValueError(f"--threads must be counts of at least 1, not {threads}")
    steps = [_overlap(comm, nbytes, segment, k, calls) for k in threads]
    return {"overlap_steps": steps, "engine": "c", "segment_bytes": segment, "gamma_bytes": nbytes,
            "info": {**_conditions(),
                     "how": "per thread count: wire = one bare Sendrecv of the step's bytes; reduce = the engine's "
                            "kernel over them, both ranks at once; serial = the step with 1 thread and no segments; "
                            "overlapped = the step in segments, each reduced as it arrives on that many threads; "
                            "each the median of `calls` calls from a barrier, the slower rank's; hidden = (wire + "
                            "reduce - overlapped) / reduce; trace_* from one overlapped run's trace on rank 0: the "
                            "reductions' summed time, the part after the step's last message completed, the time "
                            "from that message to the end, trace_hidden = 1 - after / summed, "
                            "trace_copies_ahead = sums copied back into their sent blocks ahead of the others"}}


def probe(comm: Any, *, steps: int = 64, lanes: int = 4, repeats: int = 7, calls: int = 30,
          gamma_bytes: int = 16 << 20, segment: int = 1 << 20) -> dict[str, Any]:
    """Measure the costs on a 2-rank communicator; return the JSON object (the same on both ranks)."""
    from . import native

    if comm.Get_size() != 2:
        raise ValueError(f"the probe runs on exactly 2 ranks, not {comm.Get_size()}")
    if steps < 2 or lanes < 2:
        raise ValueError("--steps and --lanes must be at least 2")
    engine = "c" if native.load() is not None else "python"
    one = {1: _plan_call(comm, 1, 1), steps: _plan_call(comm, steps, 1)}
    many = {1: _plan_call(comm, 1, lanes), steps: _plan_call(comm, steps, lanes)}
    raw = {1: _sendrecv_call(comm, 1), steps: _sendrecv_call(comm, steps)}
    for fn in (*one.values(), *many.values(), *raw.values()):  # warm-up: plans, MPI connections, caches
        _median_call(comm, fn, 3)
    alpha, alpha1, lane, mpi, step4 = [], [], [], [], []
    for _ in range(repeats):
        t = {(c, k): _median_call(comm, fns[k], calls) for c, fns in (("one", one), ("many", many), ("raw", raw))
             for k in (1, steps)}
        step1 = (t["one", steps] - t["one", 1]) / (steps - 1)
        round_ = (t["many", steps] - t["many", 1]) / (steps - 1)
        alpha1.append(step1)
        step4.append(round_)
        alpha.append(round_ / lanes)
        lane.append((round_ - step1) / (lanes - 1))
        mpi.append((t["raw", steps] - t["raw", 1]) / (steps - 1))
    cpus = os.cpu_count() or 1
    thread_counts = sorted({1, 2, min(cpus, 4), cpus} - {0})
    reds = [_reductions(comm, gamma_bytes, thread_counts) for _ in range(max(3, repeats // 2))]
    med = statistics.median
    ours_alone = med(r["ours"][0] for r in reds)
    gamma_threads, gamma_first = ({k: med(r[key][k] for r in reds) for k in reds[0][key]}
                                  for key in ("threads", "threads_first"))
    # the overlap with the threads this node gives a rank (waiting.node_info: 1 where the ranks fill the cores),
    # and with 2 (on a 2-core machine with 2 ranks: more threads than cores)
    from .waiting import node_info

    own = node_info(comm)[1]
    overlap = _overlap(comm, gamma_bytes, segment, own, 5) if engine == "c" else None
    overlap2 = _overlap(comm, gamma_bytes, segment, 2, 5) if engine == "c" and own != 2 else None
    return {
        "alpha_s": med(alpha), "alpha_1lane_s": med(alpha1), "alpha_lane_s": med(lane),
        "gamma_s_per_byte": ours_alone,
        "c_gamma_s_per_byte": med(r["numpy"][0] for r in reds), "mpi_step_s": med(mpi),
        "step_s": med(step4), "lanes": lanes, "lanes_together": engine == "c",
        "gamma_threads_s_per_byte": gamma_threads, "gamma_threads_first_s_per_byte": gamma_first,
        "gamma_pair_s_per_byte": med(r["ours"][1] for r in reds),
        "c_gamma_pair_s_per_byte": med(r["numpy"][1] for r in reds),
        "overlap": None if overlap is None else round(max(0.0, min(1.0, overlap["hidden"])), 3),
        "segment_bytes": segment, "engine": engine,
        "info": {
            "repeats": {"alpha_s": alpha, "alpha_1lane_s": alpha1, "alpha_lane_s": lane, "mpi_step_s": mpi,
                        "step_s": step4, "reductions": reds},
            "overlap_step": overlap, "overlap_step_2_threads": overlap2,
            "steps": steps, "calls_per_repeat": calls, "gamma_bytes": gamma_bytes,
            **_conditions(),
            "how": "alpha_1lane_s: (median call of a 1-lane schedule of `steps` one-element REDUCE steps - the "
                   "same with 1 step) / (steps-1), through executor.Plan, 2 ranks; step_s: the same with `lanes` "
                   "lanes, a whole step; alpha_s = step_s / lanes; alpha_lane_s: what each further lane adds to a "
                   "step; mpi_step_s: the same with bare Sendrecv; gamma_s_per_byte: the engine's float64 SUM "
                   "kernel (the compiled core's, 1 thread) on rank 0 alone; c_gamma_s_per_byte: numpy add on rank "
                   "0 alone (the same conditions); *_pair_*: both ranks at once; gamma_threads_s_per_byte: ours "
                   "with k threads, rank 0 alone, the thread counts in turns of 4 calls, the later 3 (_first_: the "
                   "turns' first calls, the pool's threads asleep after the other counts' turns); overlap: 1 step "
                   "of gamma_bytes in segments of segment_bytes, "
                   "each reduced as it arrives with the node's threads per rank (overlap_step_2_threads: with 2), "
                   "(wire + reduce - step) / reduce, clipped to 0..1; each a median",
        },
    }


def _from_tuning(path: str | None) -> dict[str, Any]:
    from .tuning import load_tuning

    t = load_tuning(path)
    if t.source == "defaults":
        raise ValueError("no tuning file found (run `swing-mpi calibrate` first, or name one)")
    return {"alpha_s": t.alpha, "gamma_s_per_byte": t.gamma,
            "info": {"from_tuning": t.source, "how": "alpha fitted by swing-mpi calibrate over its measured points "
                     "(per step, network effects of that run included); gamma its measured reduction kernel"}}


# -- command line -----------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``swing-mpi probe``'s options."""
    from .cliargs import deprecated
    from .units import SIZE_HELP

    parser.add_argument("--out", "-o", default=None,
                        help="JSON file to write (default ~/.config/swing_mpi/engine_costs.json)")
    parser.add_argument("--steps", type=int, default=64, help="steps of the long chain (default 64)")
    parser.add_argument("--lanes", type=int, default=4, help="lanes in lockstep for alpha_s (default 4, a 2D torus)")
    parser.add_argument("--repeats", type=int, default=7, help="rounds; each number is their median (default 7)")
    parser.add_argument("--calls", type=int, default=30,
                        help="calls per schedule per round (default 30); with --overlap-only, per measurement")
    parser.add_argument("--gamma-size", default="16M", metavar="SIZE",
                        help=f"vector for the reduction cost, in {SIZE_HELP} (default 16M)")
    deprecated(parser, "--gamma-mib", dest="gamma_size", new="--gamma-size", convert=lambda v: f"{v}M")
    parser.add_argument("--from-tuning", nargs="?", const="", default=None, metavar="FILE",
                        help="write the file from a calibrate tuning file (default: the one auto reads; an error "
                             "if there is none); no MPI")
    parser.add_argument("--overlap-only", action="store_true",
                        help="measure only how much of a --gamma-size step's reduction its transfer hides, in "
                             "--segment segments on each of --threads; writes --out only if given (not a costs file)")
    parser.add_argument("--segment", default="1M", metavar="SIZE",
                        help=f"with --overlap-only: the segment, in {SIZE_HELP} (default 1M)")
    parser.add_argument("--threads", default="1,2", metavar="LIST",
                        help="with --overlap-only: the thread counts to run, comma-separated (default 1,2)")
    parser.add_argument("--dry-run", action="store_true", help="print, do not write")


def run(args: argparse.Namespace) -> int:
    """Run ``swing-mpi probe``."""
    from .cliargs import say
    from .units import parse_size

    out = Path(args.out) if args.out else default_engine_path()
    try:
        gamma_bytes = parse_size(args.gamma_size)
    except ValueError as e:
        say(f"swing-mpi probe: --gamma-size: {e}")
        return 2
    if args.overlap_only:
        return _run_overlap(args, gamma_bytes)
    if args.from_tuning is not None:
        try:
            if not args.from_tuning and _builtin_tuning():
                raise ValueError("no tuning file found: neither $SWING_MPI_TUNING nor the config file names one, "
                                 "so only the built-in defaults are there (run swing-mpi calibrate first, or "
                                 "name a file: --from-tuning FILE)")
            data = _from_tuning(args.from_tuning or None)
        except ValueError as e:
            print(f"swing-mpi probe: {e}", file=sys.stderr)
            return 2
        rank = 0
    else:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        rank = comm.Get_rank()
        try:
            data = probe(comm, steps=args.steps, lanes=args.lanes, repeats=args.repeats, calls=args.calls,
                         gamma_bytes=gamma_bytes)
        except ValueError as e:
            if rank == 0:
                print(f"swing-mpi probe: {e}", file=sys.stderr)
            return 2
    if rank != 0:
        return 0
    data.setdefault("info", {})["command"] = _command()
    print(f"alpha (per lane and step)  {data['alpha_s'] * 1e6:9.2f} us")
    if data.get("alpha_1lane_s") is not None:
        print(f"  a step of 1 lane alone   {data['alpha_1lane_s'] * 1e6:9.2f} us")
        print(f"  each further lane        {data['alpha_lane_s'] * 1e6:9.2f} us")
    if data.get("mpi_step_s") is not None:
        print(f"bare MPI Sendrecv step     {data['mpi_step_s'] * 1e6:9.2f} us")
    if data.get("step_s") is not None:
        print(f"a step of {data['lanes']} lanes          {data['step_s'] * 1e6:9.2f} us"
              f"  (lanes {'together' if data.get('lanes_together') else 'one after another'}, {data['engine']} engine)")
    print(f"gamma (engine, 1 rank)     {data['gamma_s_per_byte'] * 1e9:9.4f} ns/B")
    if data.get("c_gamma_s_per_byte") is not None:
        print(f"gamma (numpy add, 1 rank)  {data['c_gamma_s_per_byte'] * 1e9:9.4f} ns/B")
    if data.get("gamma_pair_s_per_byte") is not None:
        print(f"  both ranks at once       {data['gamma_pair_s_per_byte'] * 1e9:9.4f} ns/B (engine), "
              f"{data['c_gamma_pair_s_per_byte'] * 1e9:.4f} ns/B (numpy)")
    first = data.get("gamma_threads_first_s_per_byte") or {}
    for k, g in (data.get("gamma_threads_s_per_byte") or {}).items():
        print(f"  {k} thread{'s' if k != '1' else ' '}, 1 rank       {g * 1e9:9.4f} ns/B"
              f"  ({data['gamma_threads_s_per_byte']['1'] / g:.2f}x one thread"
              + (f"; a turn's first call {first['1'] / first[k]:.2f}x)" if k in first and k != "1" else ")"))
    info = data.get("info") or {}
    for ov in (info.get("overlap_step"), info.get("overlap_step_2_threads")):
        if ov:
            _print_overlap(ov)
    if not args.dry_run:
        _write(out, data)
    return 0


def _command() -> str:
    """Return the command line that ran the probe, as ``swing-mpi probe ...`` however it was started."""
    given = sys.argv[1:]
    return " ".join(["swing-mpi", *([] if given[:1] == ["probe"] else ["probe"]), *given])


def _write(out: Path, data: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def _print_overlap(ov: dict[str, Any]) -> None:
    print(f"overlap: a {ov['bytes'] >> 20} MiB step in {ov['segment'] >> 10} KiB segments, {ov['threads']} "
          f"thread{'s' if ov['threads'] > 1 else ''}: {ov['overlapped'] * 1e3:.2f} ms; transfer alone "
          f"{ov['wire'] * 1e3:.2f} ms, reduction alone {ov['reduce'] * 1e3:.2f} ms, serial step "
          f"{ov['serial'] * 1e3:.2f} ms: {max(0.0, min(1.0, ov['hidden'])):.0%} of the reduction hidden")
    if "trace_reduce_s" in ov:
        print(f"  its trace (rank 0): reductions {ov['trace_reduce_s'] * 1e3:.2f} ms in all, "
              f"{ov['trace_reduce_after_wire_s'] * 1e3:.2f} ms of them after the last message "
              f"({ov['trace_hidden']:.0%} under the wire); last message to the end {ov['trace_tail_s'] * 1e3:.2f} ms"
              + (f"; {ov['trace_copies_ahead']} copies back ahead" if ov.get("trace_copies_ahead") else ""))


def _run_overlap(args: argparse.Namespace, nbytes: int) -> int:
    """``--overlap-only``: the overlap steps alone, printed; written only to an --out that is named."""
    from mpi4py import MPI

    from .cliargs import say
    from .units import parse_size

    comm = MPI.COMM_WORLD
    try:
        segment = parse_size(args.segment)
        try:
            threads = tuple(int(v) for v in args.threads.split(","))
        except ValueError:
            raise ValueError(f"--threads takes counts separated by commas, like 1,2; not {args.threads!r}") from None
        if args.calls < 1:
            raise ValueError(f"--calls must be at least 1, not {args.calls}")
        data = overlap(comm, nbytes=nbytes, segment=segment, threads=threads, calls=args.calls)
    except ValueError as e:
        say(f"swing-mpi probe: {e}")
        return 2
    if comm.Get_rank() != 0:
        return 0
    data["info"]["command"] = _command()
    for ov in data["overlap_steps"]:
        _print_overlap(ov)
    if args.out and not args.dry_run:
        _write(Path(args.out), data)
    return 0


def _builtin_tuning() -> bool:
    """Tell whether the tuning ``auto`` reads here is the built-in defaults (no file)."""
    from .tuning import DEFAULT_TUNING, load_tuning

    return load_tuning(None).source.startswith(DEFAULT_TUNING.source.split(" ")[0])


def main(argv: list[str] | None = None) -> int:
    """Run as ``python -m mpi4py -m swing_mpi.probe``."""
    from .cliargs import Parser

    parser = Parser(prog="swing-mpi probe", description="measure this library's per-step and per-byte costs for "
                    "the simulator (mpiexec -n 2)")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

