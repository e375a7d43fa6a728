"""Table of time / MPICH's time per collective and algorithm from run.sh's JSON files (medians)."""

import glob
import json
import os
import statistics
import sys

d = sys.argv[1]
pairs: dict[tuple[str, str], list[float]] = {}
alls: dict[tuple[str, str], list[float]] = {}
for path in sorted(glob.glob(os.path.join(d, "*.json"))):
    rows = json.load(open(path))["rows"]
    native = next(r for r in rows if r["algorithm"] == "native")["time_median_us"]
    into = pairs if os.path.basename(path).startswith("pair-") else alls
    for r in rows:
        if r["algorithm"] != "native":
            name = r["algorithm"] if r["algorithm"] != "auto" else f"auto ({r['resolved']})"
            into.setdefault((r["collective"], name), []).append(r["time_median_us"] / native)
print("# time / MPICH's time (medians of 30 calls; each run's ratio, then their median), p = 4, 16 MiB float64")
print(f"| {'collective':<20} | {'algorithm':<26} | {'pairs: runs':<22} | pairs | {'all: runs':<22} | all |")
print(f"|{'-' * 22}|{'-' * 28}|{'-' * 24}|------:|{'-' * 24}|----:|")
for key in sorted(set(pairs) | set(alls)):
    p, a = pairs.get(key, []), alls.get(key, [])
    fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs) or "-"  # noqa: E731
    med = lambda xs: f"{statistics.median(xs):.2f}" if xs else "-"  # noqa: E731
    print(f"| {key[0]:<20} | {key[1]:<26} | {fmt(p):<22} | {med(p):>5} | {fmt(a):<22} | {med(a):>3} |")
