#!/bin/bash
# The 8x8 lab-validation points at 20 Mbit/s with a one-packet burst, as ../lab-8x8-20M/run.sh, but every
# timed call started at one instant on all ranks (bench --start sync) instead of from each rank's own exit
# of a barrier: in this lab the ranks that leave a barrier first start sending at once, and the barrier's
# last messages to the others then queue behind those sends (README.md). recdoub at 16 MiB has a folder of its own
# (about 100 s a call at 20 Mbit/s), and so has trivance-lat at 1 MiB, whose 104 MiB a rank fit only alone.
# The 4 MiB folders: their commands.txt. Then benchmarks/validate_lab.py as in README.md.
# Run on a quiet machine, one lab at a time, as root (about 50 minutes; ONLY=FOLDER runs one).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
ALL=swing-bw,swing-bw-1port,swing-lat,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian,trivance-bw,trivance-lat
NOLAT=swing-bw,swing-bw-1port,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian,trivance-bw
LARGE=swing-bw,swing-bw-1port,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian,trivance-bw
while read -r sizes algs out; do
    [ -n "${ONLY:-}" ] && [ "$ONLY" != "$out" ] && continue
    timeout 2400 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims 8x8 --rate-mbit 20 --burst-kib 64 \
        --sizes "$sizes" --algorithms "$algs" --iters 5 --warmup 1 --max-time 15 --timeout 2300 \
        --out "benchmarks/results/scale/lab-sync/$out" -- --start sync < /dev/null > "/tmp/lab-sync-$out.log" 2>&1
    echo "$out done: $(tail -1 "benchmarks/results/scale/lab-sync/$out/summary.txt" 2>/dev/null)"
done <<LIST
1M $ALL 8x8-20M-1M
16M $LARGE 8x8-20M-16M
16M recdoub 8x8-20M-16M-recdoub
1M trivance-lat 8x8-20M-1M-trivance-lat
LIST
