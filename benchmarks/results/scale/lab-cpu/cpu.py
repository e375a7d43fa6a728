"""How busy the machine's cores are during one allreduce in the lab, beside the simulator's time.

    swing-mpi lab --dims 8x8 --rate-mbit 20 --burst-kib 64 -n 64 -- \
        python benchmarks/results/scale/lab-cpu/cpu.py DIMS RATE_MBIT SIZE:ALG[,ALG...] [SIZE:ALG...] [--calls N]

Every timed call starts on all ranks at one instant (``swing-mpi bench --start sync``'s
:class:`swing_mpi.bench.timing.SyncStart`). Rank 0 reads ``/proc/stat`` (the whole machine's CPU
time, which network namespaces do not split) at that instant and again when every rank has ended
the call (after a barrier), and every rank reads its own ``getrusage`` around its call. Per point
rank 0 prints the medians over the timed calls of:

- the call's time (from the instant to the last rank's end) and the simulator's, as
  ``benchmarks/validate_lab.py`` simulates a lab point (``lab_params`` at the lab's link rate,
  ``simulate_lab_point``);
- ``busy``: the share of the machine's cores not idle from the instant to the barrier's end;
- the CPU seconds of that window, split into user, system and softirq (the kernel's TCP, veth
  and token buckets run in softirq and in the system time of whoever sends);
- ``ranks``: the CPU seconds the 64 ranks themselves used in their calls (``getrusage``);
- ``floor``: the window's CPU seconds divided by the cores, the least time that work takes on
  this machine (``floor/lab`` near 1: the cores, not the links, set the call's time);
- ``polls``: a rank's idle polls in its call, mean over ranks (``swing_mpi.waiting.Idle`` calls).

``--backoff F:MIN:MAX:SPINS`` replaces the backoff wait's constants (``swing_mpi.waiting``) for
an experiment. ``$CPU_JSON`` names a file for one JSON object per point.

One warm-up call per point is left out. Each result is checked (float64 sum of ``rank + 1``).
"""

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

import swing_mpi
from swing_mpi import waiting
from swing_mpi.bench.timing import SyncStart, barrier
from swing_mpi.units import parse_size


def stat() -> tuple[float, ...]:
    """Return the machine's CPU seconds since boot: user, nice, system, idle, iowait, irq, softirq, steal."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:9]
    hz = os.sysconf("SC_CLK_TCK")
    return tuple(int(x) / hz for x in fields)


def own_cpu() -> float:
    """Return this process's user + system CPU seconds."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


ap = argparse.ArgumentParser(description="CPU time of allreduce calls in the lab")
ap.add_argument("dims")
ap.add_argument("rate_mbit", type=float)
ap.add_argument("points", nargs="+", metavar="SIZE:ALG[,ALG...]")
ap.add_argument("--calls", type=int, default=5)
ap.add_argument("--backoff", metavar="FRACTION:MIN_S:MAX_S:SPINS",
                help="the backoff wait's constants instead of swing_mpi.waiting's (an experiment)")
opts = ap.parse_args()
if opts.backoff:
    for name, v in zip(("BACKOFF_FRACTION", "BACKOFF_MIN", "BACKOFF_MAX", "BACKOFF_SPINS"), opts.backoff.split(":")):
        setattr(waiting, name, int(v) if name == "BACKOFF_SPINS" else float(v))
idle_calls = [0]
_idle = waiting.Idle.__call__


def _counted(self):  # type: ignore[no-untyped-def]
    idle_calls[0] += 1
    _idle(self)


waiting.Idle.__call__ = _counted  # type: ignore[method-assign]
dims, rate, calls = opts.dims, opts.rate_mbit, opts.calls
points = [(size, alg) for spec in opts.points for size, algs in [spec.split(":")] for alg in algs.split(",")]
comm = MPI.COMM_WORLD
p = comm.size
cores = os.cpu_count() or 1
start = SyncStart(comm)
rows = []
for size_s, alg in points:
    n = parse_size(size_s) // 8
    a = np.full(n, comm.rank + 1.0)
    b = np.empty_like(a)
    runs = []
    for call in range(calls + 1):
        b[:] = 0
        t0 = start()
        s0 = stat() if comm.rank == 0 else None
        c0 = own_cpu()
        i0 = idle_calls[0]
        swing_mpi.allreduce(comm, a, b, MPI.SUM, algorithm=alg, dims=dims, check=False)
        t1 = time.perf_counter()
        c1 = own_cpu()
        polls = idle_calls[0] - i0
        barrier(comm)
        s1 = stat() if comm.rank == 0 else None
        t2 = time.perf_counter()
        ok = bool(np.all(b == p * (p + 1) / 2))
        every = comm.gather((t1 - t0, c1 - c0, polls, ok))
        if comm.rank == 0:
            if not all(o for *_, o in every):
                raise SystemExit(f"{alg} {size_s}: wrong result")
            if call:  # the first call warms up
                d = [y - x for x, y in zip(s0, s1)]
                total = sum(d)
                busy_s = total - d[3] - d[4]
                runs.append({"lab_s": max(t for t, *_ in every), "window_s": t2 - t0,
                             "busy": busy_s / total if total else float("nan"),
                             "cpu_s": busy_s, "user_s": d[0] + d[1], "system_s": d[2], "softirq_s": d[6] + d[5],
                             "ranks_cpu_s": sum(c for _, c, *_ in every),
                             "idle_polls": sum(n for _, _, n, _ in every) / p})
    if comm.rank == 0:
        med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
        med.update(algorithm=alg, size=size_s, dims=dims, rate_mbit=rate, calls=calls, cores=cores)
        rows.append(med)
        print(f"# {alg} {size_s}: lab {med['lab_s']:.3f} s, busy {100 * med['busy']:.0f} %", flush=True)
if comm.rank == 0:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # benchmarks/
    from validate_lab import lab_params, simulate_lab_point

    params = lab_params(rate * 1e6)
    shape = tuple(int(x) for x in dims.split("x"))
    print(f"{dims} lab at {rate:g} Mbit/s, {p} ranks on {cores} cores; medians of {calls} calls started at one instant")
    print(f"{'algorithm':16s} {'size':>5s} {'lab (s)':>8s} {'sim (s)':>8s} {'sim/lab':>7s} {'busy':>5s} "
          f"{'cpu (s)':>8s} {'user':>6s} {'system':>6s} {'softirq':>7s} {'ranks':>6s} {'floor':>6s} {'floor/lab':>9s} "
          f"{'polls':>6s}")
    for r in rows:
        sim = simulate_lab_point(r["algorithm"], shape, parse_size(r["size"]), params)
        if "error" in sim:
            raise SystemExit(f"{r['algorithm']} {r['size']}: the simulation failed: {sim['error']}")
        r["sim_s"] = sim["time_s"]
        r["floor_s"] = r["cpu_s"] / cores
        print(f"{r['algorithm']:16s} {r['size']:>5s} {r['lab_s']:8.3f} {r['sim_s']:8.3f} "
              f"{r['sim_s'] / r['lab_s']:7.3f} "
              f"{100 * r['busy']:4.0f}% {r['cpu_s']:8.3f} {r['user_s']:6.3f} {r['system_s']:6.3f} "
              f"{r['softirq_s']:7.3f} "
              f"{r['ranks_cpu_s']:6.3f} {r['floor_s']:6.3f} {r['floor_s'] / r['lab_s']:9.3f} "
              f"{r['idle_polls']:6.0f}")
    out = os.environ.get("CPU_JSON")
    if out:
        with open(out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
