"""Print auto / fastest per size from ``swing-mpi bench --json`` files (medians of side-by-side runs).

The noise column, auto / the same algorithm run by name in the same rounds, is the run's noise: both
rows run the same code, so anything but 1.00 there is the machine, not the choice.

``--fastest``: print ``SIZE ALGORITHM`` of the fastest non-auto row per size instead (run.sh then
measures auto against just that one, head to head, with many more iterations).

Several files with the same size (the head-to-head launches: each its own mpiexec) are launches of one
comparison: one ratio per launch (auto's median / the fastest row's median of that launch), and their
median. Where the allocator and the scheduler put a launch's processes moves a 1 MiB call on shared
memory by ±20 % from one launch to the next, more than the iterations of one launch can average out.
"""

import json
import statistics
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
launches = [(path, json.load(open(path))["rows"]) for path in args]
rows = [r for _, rs in launches for r in rs]
sizes = sorted({r["size"] for r in rows})
if "--fastest" in sys.argv:
    for size in sizes:
        here = [r for r in rows if r["size"] == size and r["algorithm"] != "auto"]
        print(size, min(here, key=lambda r: r["time_median_us"])["algorithm"])
    sys.exit(0)


def compare(here):
    """Return (auto row, fastest other row, the same algorithm's row or None) of one launch's rows at one size."""
    auto = next(r for r in here if r["algorithm"] == "auto")
    others = [r for r in here if r["algorithm"] != "auto"]
    best = min(others, key=lambda r: r["time_median_us"])
    same = next((r for r in others if r["algorithm"] == auto["resolved"]), None)
    return auto, best, same


per_size = {size: [[r for r in rs if r["size"] == size] for _, rs in launches] for size in sizes}
per_size = {size: [h for h in hs if h] for size, hs in per_size.items()}
if all(len(hs) == 1 for hs in per_size.values()):
    print(f"# {' '.join(args)}: auto / fastest candidate (MPI_Allreduce or any registered algorithm), medians")
    print(f"| {'size':>9} | {'auto runs':<16} | {'auto us':>10} | {'fastest':<16} | {'fastest us':>10} | auto/fastest "
          f"| auto/same algorithm (noise) | iters |")
    print("|----------:|------------------|-----------:|------------------|-----------:|-------------:|"
          "----------------------------:|------:|")
    for size, (here,) in per_size.items():
        auto, best, same = compare(here)
        noise = f"{auto['time_median_us'] / same['time_median_us']:.2f}" if same else "-"
        print(f"| {size:>9} | {auto['resolved']:<16} | {auto['time_median_us']:>10.1f} | {best['algorithm']:<16} | "
              f"{best['time_median_us']:>10.1f} | {auto['time_median_us'] / best['time_median_us']:>12.2f} | "
              f"{noise:>27} | {auto.get('iters', '-'):>5} |")
    sys.exit(0)
print(f"# {' '.join(args)}: auto / fastest candidate (MPI_Allreduce or any registered algorithm); "
      "one ratio of medians per launch (mpiexec), and their median")
print(f"| {'size':>9} | {'auto runs':<16} | {'fastest':<16} | {'auto / fastest, each launch':<30} | {'median':>6} "
      f"| iters |")
print("|----------:|------------------|------------------|--------------------------------|-------:|------:|")
for size, hs in per_size.items():
    pairs = [compare(here) for here in hs]
    ratios = [a["time_median_us"] / b["time_median_us"] for a, b, _ in pairs]
    runs = "/".join(sorted({a["resolved"] for a, _, _ in pairs}))
    fastest = "/".join(sorted({b["algorithm"] for _, b, _ in pairs}))
    each = " ".join(f"{x:.2f}" for x in ratios)
    print(f"| {size:>9} | {runs:<16} | {fastest:<16} | {each:<30} | {statistics.median(ratios):>6.2f} "
          f"| {pairs[0][0].get('iters', '-'):>5} |")
