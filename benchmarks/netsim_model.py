#!/usr/bin/env python3
"""The SimGrid simulator against the model at large vectors, and its HyperX and fat-tree expectations.

Every registered algorithm on the 16-node ring, 8x8 and 4x4x4 at 256 MiB with
``α = 0``: the simulated time over ``swing-mpi model --alpha 0``'s routed
time (400 Gb/s). Then HyperX 8x8 (Swing's busiest link per step) and a
64-node non-blocking fat tree (Swing against recursive halving/doubling).
Writes ``OUT/model_agreement.json`` (one object per line) and prints a table.

    python benchmarks/netsim_model.py --out benchmarks/results/netsim
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from swing_mpi.model import analyze
from swing_mpi.netsim import SimParams, simulate
from swing_mpi.schedule import ALGORITHMS


def main(argv: list[str] | None = None) -> int:
    """Run the comparisons; return 1 if any algorithm is off the model by more than 5 %."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/netsim")
    ap.add_argument("--size", default=256 << 20, type=int, help="vector bytes (default 256 MiB)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = args.size
    p = SimParams(alpha_s=0.0)
    rows = []
    worst = 0.0
    for dims in [(16,), (8, 8), (4, 4, 4)]:
        for alg in ALGORITHMS:
            t0 = time.perf_counter()
            model = analyze(alg, dims).time(n, alpha=0.0, link_bytes_per_s=p.link_bytes_per_s)
            r = simulate(alg, dims, n, params=p)
            ratio = r.time_s / model
            worst = max(worst, abs(ratio - 1))
            row = {"check": "model", "dims": "x".join(map(str, dims)), "algorithm": alg, "bytes": n,
                   "sim_time_s": r.time_s, "model_time_s": model, "ratio": ratio,
                   "wall_s": round(time.perf_counter() - t0, 2)}
            rows.append(row)
            print(f"{row['dims']:>6} {alg:<17} sim {r.time_s * 1e3:9.4f} ms  model {model * 1e3:9.4f} ms  "
                  f"ratio {ratio:.4f}", flush=True)
    hx = simulate("swing-bw", (8, 8), 64 << 20, params=SimParams(network="hyperx", alpha_s=0.0))
    rows.append({"check": "hyperx", "dims": "8x8", "algorithm": "swing-bw", "bytes": 64 << 20,
                 "time_s": hx.time_s, "most_messages_per_link_per_step": [b["most_messages"] for b in hx.busiest_link]})
    print(f"hyperx 8x8 swing-bw: most messages on a link per step {rows[-1]['most_messages_per_link_per_step']}")
    for n_ft in (64 << 20, 1 << 20):
        ft = {a: simulate(a, (64,), n_ft, params=SimParams(network="fattree", alpha_s=0.0)).time_s
              for a in ("swing-bw-1port", "rabenseifner", "swing-bw", "recdoub-mirrored")}
        rows.append({"check": "fattree", "dims": "64", "bytes": n_ft, "time_s": ft})
        print(f"fattree 64 nodes, {n_ft} B: " + ", ".join(f"{a} {t * 1e3:.4f} ms" for a, t in ft.items()))
    with open(out / "model_agreement.json", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print(f"worst |sim/model - 1| = {worst:.4f}; wrote {out / 'model_agreement.json'}")
    return 1 if worst > 0.05 else 0


if __name__ == "__main__":
    sys.exit(main())
