#!/bin/bash
# The 8x8 lab-validation points measured again at 20 Mbit/s, to test whether the 8x8 misses are the CPUs:
# at the lab's 40 Mbit/s its 256 link directions ask 1.28 GB/s of TCP at once, about all that this
# machine's 2 cores carry (benchmarks/results/lab-points/README.md); at 20 they ask half. (They were, for
# the one-hop algorithms only: see below.) A one-packet burst (--burst-kib 64), as the wire-like
# validation (validate-lab-wire) uses; every other setting is the lab's default (MTU 65000, TCP cubic).
# Then:
#   python benchmarks/validate_lab.py --shapes 8x8 --lab-set 8x8=scale/lab-8x8-20M/1M,scale/lab-8x8-20M/large \
#       --out benchmarks/results/scale/validate-lab-8x8-20M      # simulates at the sweeps' own rate, 20 Mbit/s
# Result (18 of 28 points within 15 %) and what it says: ../lab-8x8-packets/README.md, docs/scale.md.
# Run on a quiet machine, one lab at a time, as root (about 40 minutes).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
ALL=swing-bw,swing-bw-1port,swing-lat,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian
NOLAT=swing-bw,swing-bw-1port,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian
# sizes  algorithms  output (swing-lat and trivance-lat at 1 MiB only: their float forms take minutes a call
# at 4 and 16 MiB, and trivance-lat's needs 416 MiB a rank at 4 MiB)
while read -r sizes algs out; do
    timeout 2400 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims 8x8 --rate-mbit 20 --burst-kib 64 \
        --sizes "$sizes" --algorithms "$algs" --iters 5 --warmup 1 --max-time 15 --timeout 2300 \
        --out "benchmarks/results/scale/lab-8x8-20M/$out" < /dev/null > "/tmp/lab-8x8-20M-$out.log" 2>&1
    echo "$out done: $(tail -1 "benchmarks/results/scale/lab-8x8-20M/$out/summary.txt" 2>/dev/null)"
done <<LIST
1M $ALL,trivance-bw,trivance-lat 1M
4M,16M $NOLAT,trivance-bw large
LIST
