"""Combine run.sh's per-run JSON files into e2e.json and print the README's table.

For each MPI, checkout, size and algorithm: the median over the alternations of each run's
median time and of its ratio to ``comm.Allreduce`` measured in the same run; first calls too.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys

raw = sys.argv[1] if len(sys.argv) > 1 else "/tmp/engine-e2e"
here = os.path.dirname(os.path.abspath(__file__))
runs = []
for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    mpi = os.path.basename(path).split("-")[0]
    runs.append((f"{mpi} p={d['meta']['ranks']}", d))
cells: dict[tuple, dict[str, list[float]]] = {}
for mpi, d in runs:
    for r in d["rows"]:
        c = cells.setdefault((mpi, d["meta"]["label"], r["bytes"], r["algorithm"]),
                             {"t": [], "x": [], "f": [], "s": []})
        c["t"].append(r["median_s"])
        c["x"].append(r["ratio_to_native"])
        c["f"].append(r["first_call_s"])
        if "settle_mean_s" in r:
            c["s"].append(r["settle_mean_s"])
med = statistics.median
summary = [{"mpi": k[0], "checkout": k[1], "bytes": k[2], "algorithm": k[3], "median_s": med(v["t"]),
            "ratio_to_native": med(v["x"]), "first_call_s": med(v["f"]), "runs": len(v["t"]),
            **({"first_calls_mean_s": med(v["s"])} if v["s"] else {})}
           for k, v in sorted(cells.items())]
with open(os.path.join(here, "e2e.json"), "w", encoding="utf-8") as f:
    json.dump({"runs": [d["meta"] for _, d in runs], "summary": summary}, f, indent=1)
algs = ["recdoub", "swing-lat", "swing-bw", "auto"]
for mpi in sorted({k[0] for k in cells}):
    print(f"\n{mpi}: time / comm.Allreduce's (before -> after); after: the fastest of ours over comm.Allreduce, "
          "auto over the fastest of the row, the first call and the mean of the first calls (us)\n")
    print("| bytes | comm.Allreduce (us) | " + " | ".join(algs) + " | fastest / MPI | auto / fastest | "
          "first call (native, " + ", ".join(algs) + ") | mean of the first calls (same) |")
    print("|---:|---:|" + "---|" * len(algs) + "---:|---:|---|---|")
    for nbytes in sorted({k[2] for k in cells if k[0] == mpi}):
        def get(label, alg, field):
            c = cells.get((mpi, label, nbytes, alg))
            return med(c[field]) if c and c[field] else float("nan")
        row = [f"{get('before', a, 'x'):.2f} -> **{get('after', a, 'x'):.2f}**" for a in algs]
        ours = min(get("after", a, "x") for a in algs if a != "auto")
        best = min(ours, 1.0)
        first = ", ".join(f"{get('after', a, 'f') * 1e6:.0f}" for a in ["native", *algs])
        early = ", ".join(f"{get('after', a, 's') * 1e6:.1f}" for a in ["native", *algs])
        print(f"| {nbytes} | {get('after', 'native', 't') * 1e6:.2f} | " + " | ".join(row)
              + f" | {ours:.2f} | {get('after', 'auto', 'x') / best:.2f} | {first} | {early} |")
