"""The 8x8 lab's times beside the simulator's and beside the ranks' own CPU seconds over the cores (README.md).

    python benchmarks/results/scale/lab-cpu/table.py > benchmarks/results/scale/lab-cpu/table.txt

Reads the ``*.jsonl`` that ``cpu.py`` wrote here (``run.sh``). For each point: the lab's median time,
the simulator's, and ``cpu/cores``: the CPU seconds the ranks used in their calls (``getrusage``),
divided by the machine's cores, the least time that work takes on them. Then ``max``, the larger of
the simulated time and ``cpu/cores``, over the lab's time.

The second part asks whether a smaller lab predicts that CPU work: per-rank CPU seconds of the 4x4
lab fitted to lane-steps and bytes sent per rank (least squares), then applied to the 8x8 points.
"""

import json
from pathlib import Path

import numpy as np

from swing_mpi.netsim.traffic import read_messages
from swing_mpi.units import parse_size

HERE = Path(__file__).parent
TOL = 0.15


def load(name: str) -> list[dict]:
    """Return the rows of one ``cpu.py`` output."""
    return [json.loads(line) for line in (HERE / name).read_text().splitlines() if line.strip()]


def per_rank(r: dict) -> tuple[int, float]:
    """Return the (lane, step)s a rank runs and the bytes it sends, for one point."""
    dims = tuple(int(x) for x in r["dims"].split("x"))
    m = read_messages(r["algorithm"], dims, parse_size(r["size"]) // 8)
    p = int(np.prod(dims))
    return len(m.steps), sum(int(s.elems.sum()) for s in m.steps.values()) * 8 / p


def ranks(r: dict) -> int:
    """Return the point's number of ranks."""
    return int(np.prod([int(x) for x in r["dims"].split("x")]))


runs = {"all points": "8x8-20M.jsonl", "again, default wait": "var-default.jsonl"}
print("8x8 lab, 20 Mbit/s, one-packet burst, 64 ranks on 2 cores: medians of 5 calls started at one instant")
print(f"{'run':20s} {'algorithm':16s} {'size':>4s} {'lab (s)':>8s} {'sim (s)':>8s} {'sim/lab':>7s} "
      f"{'busy':>5s} {'cpu/cores':>9s} {'max/lab':>7s}")
inside = {"sim": 0, "max": 0, "n": 0}
for label, name in runs.items():
    for r in load(name):
        floor = r["ranks_cpu_s"] / r["cores"]
        both = max(r["sim_s"], floor) / r["lab_s"]
        sim = r["sim_s"] / r["lab_s"]
        inside["n"] += 1
        inside["sim"] += abs(sim - 1) <= TOL
        inside["max"] += abs(both - 1) <= TOL
        print(f"{label:20s} {r['algorithm']:16s} {r['size']:>4s} {r['lab_s']:8.3f} {r['sim_s']:8.3f} {sim:7.3f} "
              f"{100 * r['busy']:4.0f}% {floor:9.3f} {both:7.3f}")
print(f"# within 15 %: the simulated time at {inside['sim']} of {inside['n']}, "
      f"the larger of it and cpu/cores at {inside['max']} of {inside['n']}")

small = load("4x4-40M.jsonl")
A = np.array([per_rank(r) for r in small], dtype=float)
y = np.array([r["ranks_cpu_s"] / ranks(r) for r in small])
coef, *_ = np.linalg.lstsq(A, y, rcond=None)
print(f"\n4x4 lab (40 Mbit/s, 16 ranks) fitted: {1e6 * coef[0]:.1f} us per lane-step, "
      f"{1e9 * coef[1]:.2f} ns per byte sent (CPU a rank uses)")
print(f"{'algorithm':16s} {'size':>4s} {'8x8 cpu/rank (ms)':>17s} {'from 4x4 (ms)':>13s} {'ratio':>6s}")
for r in load("8x8-20M.jsonl"):
    pred = float(np.array(per_rank(r)) @ coef)
    got = r["ranks_cpu_s"] / ranks(r)
    print(f"{r['algorithm']:16s} {r['size']:>4s} {1e3 * got:17.1f} {1e3 * pred:13.1f} {pred / got:6.2f}")
