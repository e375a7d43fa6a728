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
* ``alpha_s``: the same with ``--lanes`` lanes in lockstep (default 4, a 2D
  torus: each lane on its own port), divided by the lanes: the cost of one
  lane's step when one CPU serializes a rank's lanes, as the executor does
  (the simulator's ``engine`` preset charges it per lane and step, lanes in
  series). Several lanes go through the executor's general progress loop,
  which costs more per lane than the one-lane fast path.
* ``alpha_lane_s``: what each further lane adds to a step.
* ``gamma_s_per_byte``: the executor's float64 SUM reduction kernel per byte,
  both ranks reducing at once (:func:`swing_mpi.calibrate.measure_gamma`).
* ``c_gamma_s_per_byte``: numpy's ``add`` per byte on one rank alone (the
  other waits): a C loop over float64, the reduction cost a C MPI pays (the
  ``c`` preset's ``gamma``).

Each number is the median of ``--repeats`` rounds (each a median over calls);
the machine's load average goes into the file, since another process on the
cores inflates every number.

:func:`load_engine_costs` is what the simulator's ``engine`` preset reads:
``$SWING_MPI_ENGINE_COSTS`` if set, else ``~/.config/swing_mpi/engine_costs.json``
if it exists, else the built-in :data:`DEFAULT_ENGINE` (measured on the
development machine; the file it came from is in
``benchmarks/results/scale/engine-probe.json``). ``--from-tuning`` writes the
file from a ``swing-mpi calibrate`` tuning file instead (its fitted α and
measured γ) without measuring.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import rc

__all__ = ["EngineCosts", "DEFAULT_ENGINE", "C_ALPHA_S", "default_engine_path", "load_engine_costs",
           "chain_schedules", "probe", "add_arguments", "run", "main"]

C_ALPHA_S = 1.5e-6
"""The ``c`` preset's cost per step: 1.5 µs, the value the Trivance paper uses when it reruns Swing's simulator."""


@dataclass(frozen=True)
class EngineCosts:
    """Measured software costs: per lane and step (lanes in series), per reduced byte, and the parts."""

    alpha_s: float
    gamma_s_per_byte: float
    alpha_1lane_s: float | None = None
    alpha_lane_s: float | None = None
    c_gamma_s_per_byte: float | None = None
    mpi_step_s: float | None = None
    source: str = "built-in"
    info: dict[str, Any] = field(default_factory=dict, compare=False)


DEFAULT_ENGINE = EngineCosts(alpha_s=27.8e-6, gamma_s_per_byte=0.262e-9, alpha_1lane_s=18.0e-6, alpha_lane_s=31.0e-6,
                             c_gamma_s_per_byte=0.180e-9, mpi_step_s=4.0e-6,
                             source="built-in (benchmarks/results/scale/engine-probe.json)")
"""The development machine's numbers (2 cores, MPICH over shared memory); see the module docstring."""


def default_engine_path() -> Path:
    """``$XDG_CONFIG_HOME/swing_mpi/engine_costs.json`` (``~/.config/swing_mpi/engine_costs.json``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "swing_mpi" / "engine_costs.json"


def _from_dict(data: dict[str, Any], source: str) -> EngineCosts:
    try:
        alpha = float(data["alpha_s"])
        gamma = float(data["gamma_s_per_byte"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{source}: needs numbers alpha_s and gamma_s_per_byte ({e})") from None
    if not (alpha >= 0 and gamma >= 0):
        raise ValueError(f"{source}: alpha_s and gamma_s_per_byte must be >= 0")

    def opt(key: str) -> float | None:
        v = data.get(key)
        return None if v is None else float(v)

    return EngineCosts(alpha_s=alpha, gamma_s_per_byte=gamma, alpha_1lane_s=opt("alpha_1lane_s"),
                       alpha_lane_s=opt("alpha_lane_s"), c_gamma_s_per_byte=opt("c_gamma_s_per_byte"),
                       mpi_step_s=opt("mpi_step_s"),
                       source=source, info=dict(data.get("info") or {}))


def load_engine_costs(path: str | os.PathLike[str] | None = None) -> EngineCosts:
    """Return the engine's costs: ``path``, ``$SWING_MPI_ENGINE_COSTS``, the default file, or :data:`DEFAULT_ENGINE`.

    An explicit path or the environment variable must name a readable file;
    the default file is used only if it exists.
    """
    named = path if path is not None else rc.engine_costs
    p = Path(named) if named is not None else default_engine_path()
    if named is None and not p.exists():
        return DEFAULT_ENGINE
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read engine costs {p}: {e}") from None
    return _from_dict(data, str(p))


# -- the probe --------------------------------------------------------------------------

def chain_schedules(steps: int, *, lanes: int = 1) -> list[Any]:
    """Two ranks' schedules: ``steps`` steps on each of ``lanes`` lanes, each step exchanging one element.

    Lane ``i`` owns element ``i``; every step reduces the peer's copy of it
    (``peer_first`` on rank 1, so both compute the same sum).
    """
    from .schedule.base import REDUCE, Schedule, Step, Transfer

    out = []
    for rank in range(2):
        peer = 1 - rank
        lane_steps = tuple(
            tuple(Step(transfers=(Transfer(peer=peer, send=((i, i + 1),), recv=((i, i + 1),), action=REDUCE,
                                           peer_first=rank == 1),), phase="exchange") for _ in range(steps))
            for i in range(lanes))
        out.append(Schedule(algorithm=f"probe-{lanes}x{steps}", rank=rank, size=2, count=lanes, dims=(2,),
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


def _numpy_add_per_byte(nbytes: int, calls: int) -> float:
    import numpy as np

    count = max(1, nbytes // 8)
    rng = np.random.default_rng(11)
    a = rng.uniform(0.5, 1.5, count)
    b = rng.uniform(0.5, 1.5, count)
    np.add(a, b, out=b)
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        np.add(a, b, out=b)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) / (count * 8)


def probe(comm: Any, *, steps: int = 64, lanes: int = 4, repeats: int = 7, calls: int = 30,
          gamma_bytes: int = 16 << 20) -> dict[str, Any]:
    """Measure the costs on a 2-rank communicator; return the JSON object (the same on both ranks)."""
    from .calibrate import measure_gamma

    if comm.Get_size() != 2:
        raise ValueError(f"the probe runs on exactly 2 ranks, not {comm.Get_size()}")
    if steps < 2 or lanes < 2:
        raise ValueError("--steps and --lanes must be at least 2")
    one = {1: _plan_call(comm, 1, 1), steps: _plan_call(comm, steps, 1)}
    many = {1: _plan_call(comm, 1, lanes), steps: _plan_call(comm, steps, lanes)}
    raw = {1: _sendrecv_call(comm, 1), steps: _sendrecv_call(comm, steps)}
    for fn in (*one.values(), *many.values(), *raw.values()):  # warm-up: plans, MPI connections, caches
        _median_call(comm, fn, 3)
    alpha, alpha1, lane, mpi, gamma, cgamma = [], [], [], [], [], []
    for _ in range(repeats):
        t = {(c, k): _median_call(comm, fns[k], calls) for c, fns in (("one", one), ("many", many), ("raw", raw))
             for k in (1, steps)}
        step1 = (t["one", steps] - t["one", 1]) / (steps - 1)
        round_ = (t["many", steps] - t["many", 1]) / (steps - 1)
        alpha1.append(step1)
        alpha.append(round_ / lanes)
        lane.append((round_ - step1) / (lanes - 1))
        mpi.append((t["raw", steps] - t["raw", 1]) / (steps - 1))
        gamma.append(measure_gamma(comm, gamma_bytes, iters=5))
        comm.Barrier()
        c = _numpy_add_per_byte(gamma_bytes, 9) if comm.Get_rank() == 0 else 0.0
        cgamma.append(float(comm.bcast(c, root=0)))
    med = statistics.median
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "alpha_s": med(alpha), "alpha_1lane_s": med(alpha1), "alpha_lane_s": med(lane),
        "gamma_s_per_byte": med(gamma),
        "c_gamma_s_per_byte": med(cgamma), "mpi_step_s": med(mpi),
        "info": {
            "repeats": {"alpha_s": alpha, "alpha_1lane_s": alpha1, "alpha_lane_s": lane, "gamma_s_per_byte": gamma,
                        "c_gamma_s_per_byte": cgamma, "mpi_step_s": mpi},
            "steps": steps, "lanes": lanes, "calls_per_repeat": calls, "gamma_bytes": gamma_bytes,
            "loadavg": list(load) if load else None, "cpus": os.cpu_count(),
            "wait_policy": rc.wait or "yield",
            "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "how": "alpha_1lane_s: (median call of a 1-lane schedule of `steps` one-element REDUCE steps - the "
                   "same with 1 step) / (steps-1), through executor.Plan, 2 ranks; alpha_s: the same with `lanes` "
                   "lanes in lockstep, divided by `lanes`; alpha_lane_s: what each further lane adds to a step; "
                   "mpi_step_s: the same with bare Sendrecv; gamma_s_per_byte: calibrate.measure_gamma (both ranks "
                   "at once); c_gamma_s_per_byte: numpy add on rank 0 alone; each the median of the repeats",
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
    parser.add_argument("--calls", type=int, default=30, help="calls per schedule per round (default 30)")
    parser.add_argument("--gamma-size", default="16M", metavar="SIZE",
                        help=f"vector for the reduction cost, in {SIZE_HELP} (default 16M)")
    deprecated(parser, "--gamma-mib", dest="gamma_size", new="--gamma-size", convert=lambda v: f"{v}M")
    parser.add_argument("--from-tuning", nargs="?", const="", default=None, metavar="FILE",
                        help="write the file from a calibrate tuning file (default: the one auto reads; an error "
                             "if there is none); no MPI")
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
    given = sys.argv[1:]
    data.setdefault("info", {})["command"] = " ".join(["swing-mpi", *([] if given[:1] == ["probe"] else ["probe"]),
                                                      *given])
    print(f"alpha (per lane and step)  {data['alpha_s'] * 1e6:9.2f} us")
    if data.get("alpha_1lane_s") is not None:
        print(f"  a step of 1 lane alone   {data['alpha_1lane_s'] * 1e6:9.2f} us")
        print(f"  each further lane        {data['alpha_lane_s'] * 1e6:9.2f} us")
    if data.get("mpi_step_s") is not None:
        print(f"bare MPI Sendrecv step     {data['mpi_step_s'] * 1e6:9.2f} us")
    print(f"gamma (engine, 2 ranks)    {data['gamma_s_per_byte'] * 1e9:9.4f} ns/B")
    if data.get("c_gamma_s_per_byte") is not None:
        print(f"gamma (numpy add, 1 rank)  {data['c_gamma_s_per_byte'] * 1e9:9.4f} ns/B")
    if args.dry_run:
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
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

