#!/bin/bash
# The 4x4 and 3x4 lab-validation points, 40 Mbit/s, one-packet burst (64 KiB), every timed call started at
# one instant on all ranks (bench --start sync; README.md). Folders SHAPE-1M and SHAPE-large (4 and 16 MiB),
# SHAPE-lat (the two -lat algorithms at 4 and 16 MiB, 10-60 s a call: at least 3 timed calls each).
# Then benchmarks/validate_lab.py as in README.md. Run on a quiet machine, one lab at a time, as root
# (about 35 minutes; ONLY=FOLDER runs one).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
ALL=swing-bw,swing-bw-1port,swing-lat,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian,trivance-bw,trivance-lat
NOLAT=swing-bw,swing-bw-1port,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian,trivance-bw
while read -r dims sizes algs out; do
    [ -n "${ONLY:-}" ] && [ "$ONLY" != "$out" ] && continue
    timeout 1800 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims "$dims" --rate-mbit 40 --burst-kib 64 \
        --sizes "$sizes" --algorithms "$algs" --iters 5 --warmup 1 --max-time 15 --timeout 1700 \
        --out "benchmarks/results/scale/lab-sync/$out" -- --start sync < /dev/null > "/tmp/lab-sync-$out.log" 2>&1
    echo "$out done: $(tail -1 "benchmarks/results/scale/lab-sync/$out/summary.txt" 2>/dev/null)"
done <<LIST
4x4 1M $ALL 4x4-1M
4x4 4M,16M $NOLAT 4x4-large
3x4 1M $ALL 3x4-1M
3x4 4M,16M $NOLAT 3x4-large
4x4 4M,16M swing-lat,trivance-lat 4x4-lat
3x4 4M,16M swing-lat,trivance-lat 3x4-lat
LIST
