"""Print auto / fastest per size from ``swing-mpi bench --json`` files (medians of side-by-side runs).

The last column, auto / the same algorithm run by name in the same rounds, is the run's noise: both
rows run the same code, so anything but 1.00 there is the machine, not the choice.

``--fastest``: print ``SIZE ALGORITHM`` of the fastest non-auto row per size instead (run.sh then
measures auto against just that one, head to head, with many more iterations). Several files (the
head-to-head runs) are read as one.
"""

import json
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
rows = [r for path in args for r in json.load(open(path))["rows"]]
if "--fastest" in sys.argv:
    for size in sorted({r["size"] for r in rows}):
        here = [r for r in rows if r["size"] == size and r["algorithm"] != "auto"]
        print(size, min(here, key=lambda r: r["time_median_us"])["algorithm"])
    sys.exit(0)
print(f"# {' '.join(args)}: auto / fastest candidate (MPI_Allreduce or any registered algorithm), medians")
print(f"| {'size':>9} | {'auto runs':<16} | {'auto us':>10} | {'fastest':<16} | {'fastest us':>10} | auto/fastest "
      f"| auto/same algorithm (noise) | iters |")
print("|----------:|------------------|-----------:|------------------|-----------:|-------------:|"
      "----------------------------:|------:|")
for size in sorted({r["size"] for r in rows}):
    here = [r for r in rows if r["size"] == size]
    auto = next(r for r in here if r["algorithm"] == "auto")
    others = [r for r in here if r["algorithm"] != "auto"]
    best = min(others, key=lambda r: r["time_median_us"])
    same = next((r for r in others if r["algorithm"] == auto["resolved"]), None)
    noise = f"{auto['time_median_us'] / same['time_median_us']:.2f}" if same else "-"
    print(f"| {size:>9} | {auto['resolved']:<16} | {auto['time_median_us']:>10.1f} | {best['algorithm']:<16} | "
          f"{best['time_median_us']:>10.1f} | {auto['time_median_us'] / best['time_median_us']:>12.2f} | {noise:>27} "
          f"| {auto.get('iters', '-'):>5} |")
