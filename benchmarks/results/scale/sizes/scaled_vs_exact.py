"""How far the scaled message sizes are from the exact ones: each point simulated both ways.

    python benchmarks/results/scale/sizes/scaled_vs_exact.py > benchmarks/results/scale/sizes/points.jsonl
    python benchmarks/results/scale/sizes/scaled_vs_exact.py below > benchmarks/results/scale/sizes/below.jsonl

``exact``: every rank's schedule built for the count itself (uneven blocks as the executor sends
them); ``scaled``: the build count's schedules (``p·lcm(1…2D)`` elements, every block whole), sizes
scaled to the count. The paper's network and preset ``c`` (swing_mpi.netsim.SimParams()). Default:
counts at and above the build count, where ``message_sizes="auto"`` built the count's own schedules (below 64
times it); ``below``: counts under the build count (blocks of under an element on average), and
counts that are not a power of two.
"""

import json
import sys
import time

from swing_mpi.model.routing import default_count
from swing_mpi.netsim import SimParams
from swing_mpi.netsim.run import simulate
from swing_mpi.topology import parse_dims

KIB, MIB = 1 << 10, 1 << 20
SHAPES = {"8x8": (8 * KIB, 32 * KIB, 128 * KIB), "16x16": (32 * KIB, 128 * KIB, 512 * KIB),
          "4x4x4": (32 * KIB, 128 * KIB, 512 * KIB), "32x32": (128 * KIB, 2 * MIB), "8x8x8": (128 * KIB, 2 * MIB)}
if sys.argv[1:] == ["below"]:
    SHAPES = {"8x8": (32, 512, 1000), "16x16": (32, 2 * KIB, 10000), "4x4x4": (32, 2 * KIB, 10000),
              "32x32": (32, 8 * KIB, 100000), "8x8x8": (32, 32 * KIB, 100000)}
ALGORITHMS = ("swing-bw", "swing-bw-1port", "rabenseifner", "recdoub-mirrored", "bucket", "trivance-bw")

for dims, sizes in SHAPES.items():
    c0 = default_count(parse_dims(dims))
    for n in sizes:
        for alg in ALGORITHMS:
            rec = {"dims": dims, "algorithm": alg, "bytes": n, "count_over_build": round(n / 4 / c0, 3)}
            for mode in ("exact", "scaled"):
                t = time.perf_counter()
                try:
                    r = simulate(alg, dims, n, params=SimParams(), message_sizes=mode)
                except ValueError as e:
                    rec[mode] = str(e)[:80]
                    continue
                rec[f"{mode}_s"] = r.time_s
                rec[f"{mode}_wall_s"] = round(time.perf_counter() - t, 2)
            if "exact_s" in rec and "scaled_s" in rec:
                rec["scaled_over_exact"] = rec["scaled_s"] / rec["exact_s"]
            print(json.dumps(rec), flush=True)
            print(f"{dims} {alg} {n}: {rec.get('scaled_over_exact')}", file=sys.stderr, flush=True)
