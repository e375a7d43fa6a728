#!/bin/bash
# The two Trivance algorithms at the lab-validation points (4x4, 3x4, 8x8 at 1, 4 and 16 MiB), which the
# first validation sets did not measure: labs with the lab's defaults (TCP cubic, 256 KiB burst; folders
# SHAPE), then 1 and 4 MiB again with a one-packet burst (--burst-kib 64; folders SHAPE-burst64), as
# lab-cubic/ and lab-cubic-burst64/ measured the other algorithms. Then (see docs/scale.md):
#   python benchmarks/validate_lab.py --out benchmarks/results/scale/validate-lab-cubic    # reads SHAPE/ by default
#   and the command of validate-lab-wire (SHAPE-burst64/ at 1 and 4 MiB; git show 0ebc753:benchmarks/results/scale/validate-lab-wire/command.txt)
# Run on a quiet machine, one lab at a time, as root (about 25 minutes).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
while read -r dims sizes burst out; do
    timeout 1800 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims "$dims" --rate-mbit 40 --burst-kib "$burst" \
        --sizes "$sizes" --algorithms trivance-bw,trivance-lat --iters 5 --warmup 1 --max-time 15 --timeout 1700 \
        --out "benchmarks/results/scale/lab-cubic-trivance/$out" < /dev/null > "/tmp/lab-cubic-trivance-$out.log" 2>&1
    echo "$out done: $(tail -1 "benchmarks/results/scale/lab-cubic-trivance/$out/summary.txt" 2>/dev/null)"
done <<LIST
4x4 1M,4M,16M 256 4x4
3x4 1M,4M,16M 256 3x4
8x8 1M,4M,16M 256 8x8
4x4 1M,4M 64 4x4-burst64
3x4 1M,4M 64 3x4-burst64
8x8 1M,4M 64 8x8-burst64
LIST
