"""Median extra µs per call over comm.Allreduce, per tree and algorithm, from repeat_path.sh's output."""
import re
import statistics as st
import sys

cur, d = None, {}
for line in open(sys.argv[1]):
    m = re.match(r"# (\w+) ([\w-]+) launch", line)
    if m:
        cur = (m[1], m[2])
        continue
    m = re.search(r"\(\+([-\d.]+) us\)", line)
    if m:
        d.setdefault(cur, []).append(float(m[1]))
for (tree, alg), v in sorted(d.items()):
    print(f"{tree:6} {alg:6} median +{st.median(v):.2f} us over comm.Allreduce ({len(v)} launches: {sorted(v)})")
