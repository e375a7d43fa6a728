"""The lab's cost per step, from its small-vector runs (run.sh): what benchmarks/validate_lab.py --alpha-lab reads.

    python benchmarks/results/scale/lab-alpha/fit.py     # writes alpha.json and fit.txt beside it

For every algorithm measured at 2 KiB in a lab shape: the lab's median ``T``, the simulator's time
for the same call with no software cost per step (``T0``: the lab's links, the engine's reduction
cost), its steps ``k`` and lanes ``L``. What the lab spent beyond the network is ``T - T0``; per
step it is ``(T - T0)/k``, per lane and step ``(T - T0)/(k L)``. The simulator's CPU models charge
``alpha`` per lane and step in series on one CPU per rank (``cpu="rank"``), or per step with the
lanes side by side (``cpu="lane"``). The shape's ``alpha`` is the median over its algorithms of the
model that spreads least (relative spread over the algorithms, per shape). None of the validated
points (1, 4, 16 MiB) is used.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # benchmarks/
from simrun import preset_params, simulate_point  # noqa: E402

SHAPES = ("4x4", "3x4", "8x8", "16")


def main() -> int:
    from swing_mpi.schedule import build_schedule

    base = {"link_bps": 40e6, "latency_s": 50e-6, "hop_s": 0.0, "network": "torus", "itemsize": 8,
            **preset_params("engine")}
    out: dict[str, dict] = {}
    lines = [f"# params (alpha 0 for T0): {json.dumps(base)}",
             f"{'shape':>5} {'algorithm':<17} {'lab T (ms)':>10} {'T0 (ms)':>8} {'steps':>5} {'lanes':>5} "
             f"{'per step (ms)':>13} {'per lane-step (ms)':>18}"]
    for shape in SHAPES:
        path = HERE / f"lab-{shape}.json"
        if not path.exists():
            continue
        dims = tuple(int(x) for x in shape.split("x"))
        per_step, per_lane = [], []
        for row in json.loads(path.read_text())["rows"]:
            alg, n = row["algorithm"], int(row["size"])
            if alg == "native":
                continue
            t = row["time_median_us"] * 1e-6
            r = simulate_point(alg, dims, n, {**base, "alpha_s": 0.0})
            s = build_schedule(alg, dims, 0, n // 8)
            k, lanes = s.nsteps, len(s.lanes)
            a, b = (t - r["time_s"]) / k, (t - r["time_s"]) / (k * lanes)
            per_step.append(a)
            per_lane.append(b)
            lines.append(f"{shape:>5} {alg:<17} {t * 1e3:10.3f} {r['time_s'] * 1e3:8.3f} {k:5d} {lanes:5d} "
                         f"{a * 1e3:13.3f} {b * 1e3:18.3f}")

        def spread(v: list[float]) -> float:
            return (max(v) - min(v)) / statistics.median(v)

        if spread(per_lane) <= spread(per_step):
            cpu, alpha, sp = "rank", statistics.median(per_lane), spread(per_lane)
        else:
            cpu, alpha, sp = "lane", statistics.median(per_step), spread(per_step)
        out[shape] = {"alpha_s": alpha, "cpu": cpu, "spread": sp, "algorithms": len(per_step),
                      "source": str(path.relative_to(HERE.parents[2].parent))}
        lines.append(f"# {shape}: alpha {alpha * 1e3:.3f} ms, cpu={cpu} (spread {sp:.2f} over {len(per_step)} "
                     f"algorithms; the other model's spread {spread(per_step if cpu == 'rank' else per_lane):.2f})")
    (HERE / "alpha.json").write_text(json.dumps(out, indent=1) + "\n")
    (HERE / "fit.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
