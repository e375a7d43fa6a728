"""When each step of one allreduce ends, in the lab, beside the simulator's step ends.

    swing-mpi lab --dims 8x8 --rate-mbit 20 --burst-kib 64 -n 64 -- \
        python benchmarks/results/scale/lab-steps/steps.py ALGORITHM SIZE DIMS RATE_MBIT [CALLS]

Every rank times its own calls from a barrier; the executor's Plan._apply (run when a lane's step is
complete, its data applied) is wrapped to note the time of each (lane, step). A step of a call ends
when the last lane of the last rank ends it. Rank 0 prints, per step, the median over the timed calls
of that end, and the simulator's (``benchmarks/validate_lab.py``'s ``lab_params`` at the lab's link
rate), and the difference of the two steps' lengths; and for each timed call,
how far apart the ranks entered and left the barrier it was timed from (one clock: all ranks on one host).
"""

import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

import swing_mpi
from swing_mpi.executor import Plan
from swing_mpi.units import parse_size

alg, size, dims, rate = sys.argv[1], parse_size(sys.argv[2]), sys.argv[3], float(sys.argv[4])
calls = int(sys.argv[5]) if len(sys.argv) > 5 else 5
comm = MPI.COMM_WORLD
marks: list[tuple[int, int, float]] = []
_apply = Plan._apply


def _noted(self, lane, step, work):  # type: ignore[no-untyped-def]
    _apply(self, lane, step, work)
    marks.append((lane, step, time.perf_counter()))


Plan._apply = _noted  # type: ignore[method-assign]
n = size // 8
a = np.full(n, comm.rank + 1.0)
b = np.empty_like(a)
ends = []
skews = []
for call in range(calls + 1):
    t_in = time.perf_counter()
    comm.Barrier()
    marks.clear()
    t0 = time.perf_counter()
    swing_mpi.allreduce(comm, a, b, MPI.SUM, algorithm=alg, dims=dims, check=False)
    total = time.perf_counter() - t0
    by_step: dict[int, float] = {}
    for lane, step, t in marks:
        by_step[step] = max(by_step.get(step, 0.0), t - t0)
    every = comm.gather((by_step, total, t0, t_in))
    if call and comm.rank == 0:  # the first call warms up
        steps = sorted({s for d, *_ in every for s in d})
        ends.append(([max(d.get(s, 0.0) for d, *_ in every) for s in steps], max(t for _, t, *_ in every)))
        starts = [t for _, _, t, _ in every]
        entries = [t for *_, t in every]
        first = min(starts)
        s0 = sorted(d[steps[0]] + t - first for d, _, t, _ in every)
        skews.append((max(starts) - first, s0[0], s0[len(s0) // 2], s0[-1], max(entries) - min(entries),
                      first - max(entries)))
assert np.all(b == comm.size * (comm.size + 1) / 2), "wrong result"
if comm.rank == 0:
    from swing_mpi.netsim import SimParams, simulate

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # benchmarks/
    from validate_lab import lab_params

    params = SimParams(**lab_params(rate * 1e6))
    sim = simulate(alg, dims, size, params=params)
    lab_ends = np.median(np.array([e for e, _ in ends]), axis=0)
    lab_total = float(np.median([t for _, t in ends]))
    print(f"{alg} {sys.argv[2]} on {dims} at {rate:g} Mbit/s: lab {lab_total:.4f} s (median of {calls}), "
          f"simulated {sim.time_s:.4f} s")
    for i, (sk, lo, mid, hi, ent, gap) in enumerate(skews):
        print(f"call {i + 1}: ranks entered the barrier within {1e3 * ent:.1f} ms, the first left it {1e3 * gap:.1f} ms "
              f"after the last entered, all within {1e3 * sk:.1f} ms; their first step ended "
              f"{lo:.4f} / {mid:.4f} / {hi:.4f} s (first / median / last rank) after the first left it")
    print(" step   lab end   sim end   lab len   sim len  lab-sim (ms)")
    prev_l = prev_s = 0.0
    for i, (le, se) in enumerate(zip(lab_ends, sim.step_ends)):
        print(f"{i:5d} {le:9.4f} {se:9.4f} {le - prev_l:9.4f} {se - prev_s:9.4f} {1e3 * ((le - prev_l) - (se - prev_s)):10.2f}")
        prev_l, prev_s = le, se
