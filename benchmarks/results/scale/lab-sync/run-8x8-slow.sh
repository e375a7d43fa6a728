#!/bin/bash
# The 8x8 points where the 20 Mbit/s lab's 2 cores set the time (../lab-cpu), again on slower links, so that
# the ranks' CPU work fits beside the transfers as it does on 4x4: 1 MiB at 1 Mbit/s and 4 MiB at 5 Mbit/s.
# 4,000-byte packets and a 4 KiB burst: at 1 Mbit/s a packet takes 32 ms, as a 65,000-byte one at
# 16 Mbit/s, so a hop that stores and forwards adds no more than in the other labs. The lab's default
# queues of 400 ms at the rate (a first run at 1 Mbit/s with queues of 4000 ms, as many bytes as the
# 10 Mbit/s lab's, is 8x8-1M-1M-mtu4000-queue4000: there, the algorithms whose flows share links came out
# 15-20 % slower). Every timed call started at one instant (bench --start sync). recdoub and the -lat
# forms are left out: 1-15 minutes a call at these rates, and the CPU was never their limit.
# Then benchmarks/validate_lab.py as in README.md.
# Run on a quiet machine, one lab at a time, as root (about 25 minutes; ONLY=FOLDER runs one).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
ALGS=swing-bw,swing-bw-1port,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian,trivance-bw
while read -r rate sizes out; do
    [ -n "${ONLY:-}" ] && [ "$ONLY" != "$out" ] && continue
    timeout 2400 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims 8x8 --rate-mbit "$rate" --mtu 4000 \
        --burst-kib 4 --sizes "$sizes" --algorithms "$ALGS" --iters 5 --warmup 1 \
        --max-time 15 --timeout 2300 --out "benchmarks/results/scale/lab-sync/$out" -- --start sync \
        < /dev/null > "/tmp/lab-sync-$out.log" 2>&1
    echo "$out done: $(tail -1 "benchmarks/results/scale/lab-sync/$out/summary.txt" 2>/dev/null)"
done <<LIST
1 1M 8x8-1M-1M-mtu4000
5 4M 8x8-5M-4M-mtu4000
LIST
