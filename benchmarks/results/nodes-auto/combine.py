"""Combine run.sh's per-run JSON files into runs.json and print the README's tables.

For each MPI, setup (ranks, torus of nodes), size and case: the median over the alternations of each
run's ratio to ``comm.Allreduce`` measured in the same run; the after checkout's first call and the
mean of its 120 settling calls (``auto``'s trial included) beside.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys

raw = sys.argv[1] if len(sys.argv) > 1 else "/tmp/nodes-auto"
here = os.path.dirname(os.path.abspath(__file__))
runs = []
for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    mpi, p = os.path.basename(path).split("-")[:2]
    runs.append((mpi, p, d))
cells: dict[tuple, dict[str, list[float]]] = {}
for mpi, p, d in runs:
    for r in d["rows"]:
        name, _, dims = r["algorithm"].partition("@")  # p2: nodes 1, flat 2; p4: nodes 2, flat 2x2
        case = name if not dims else f"{name}@{'flat' if dims == {'p2': '2', 'p4': '2x2'}[p] else 'nodes'}"
        c = cells.setdefault((mpi, p, d["meta"]["label"], r["bytes"], case), {"t": [], "x": [], "f": [], "s": []})
        c["t"].append(r["median_s"])
        c["x"].append(r["ratio_to_native"])
        c["f"].append(r["first_call_s"])
        c["s"].append(r.get("settle_mean_s", float("nan")))
med = statistics.median
with open(os.path.join(here, "runs.json"), "w", encoding="utf-8") as f:
    json.dump({"runs": [{"mpi": m, "setup": p, **d} for m, p, d in runs]}, f, indent=1)
cases = ["auto@nodes", "swing-bw@nodes", "auto@flat"]
for mpi in sorted({k[0] for k in cells}):
    for p in sorted({k[1] for k in cells if k[0] == mpi}):
        print(f"\n{mpi}, {p}: time / comm.Allreduce's (before -> after); after: first call, settling mean (us)\n")
        print("| bytes | comm.Allreduce | " + " | ".join(f"`{c}`" for c in cases)
              + " | `auto@nodes` first call, settling mean (µs) | `auto@flat` first call, settling mean (µs) |")
        print("|---:|---:|" + "---|" * len(cases) + "---|---|")
        for nbytes in sorted({k[3] for k in cells if k[:2] == (mpi, p)}):
            def get(label, case, field, at=(mpi, p, nbytes)):
                c = cells.get((*at[:2], label, at[2], case))
                return med(c[field]) if c else float("nan")
            row = [f"{get('before', c, 'x'):.2f} -> **{get('after', c, 'x'):.2f}**" for c in cases]
            extra = [f"{get('after', c, 'f') * 1e6:.0f}, {get('after', c, 's') * 1e6:.0f}"
                     for c in ("auto@nodes", "auto@flat")]
            print(f"| {nbytes} | {get('after', 'native', 't') * 1e6:.1f} us | " + " | ".join(row) + " | "
                  + " | ".join(extra) + " |")
