#!/usr/bin/env bash
# auto head to head in the emulated torus lab (40 Mbit/s per link direction, MTU 65000; root): auto against
# the few candidates that matter at the given sizes, with the tuning run-lab.sh calibrated in that lab,
# in $LAUNCHES separate labs (default 3; each its own mpiexec: a launch's placement and the token buckets'
# state move a 64 KiB-1 MiB call by 20-50 %), then summarize.py's median of the launches' ratios.
# Usage: bash benchmarks/results/auto/h2h-lab.sh DIMS SIZES ALGORITHMS   (e.g. 8x8 64K,1M native,rabenseifner,swing-bw)
#        ITERS=15 ... timed calls per algorithm and size (round robin, a new random order each round)
set -euo pipefail
cd "$(dirname "$0")/../../.."
D=$1 SIZES=$2 ALGS=$3 R=$PWD/benchmarks/results/auto
files=()
for launch in $(seq "${LAUNCHES:-3}"); do
  f=$R/h2h-lab-$D-$launch
  .venv/bin/python -m swing_mpi lab --dims "$D" --rate-mbit 40 --mtu 65000 --timeout 1200 \
    --env "SWING_MPI_TUNING=$R/tuning-lab-$D.json" -- \
    .venv/bin/python -m mpi4py -m swing_mpi bench --algorithms "auto,$ALGS" --dims "$D" --sizes "$SIZES" \
    --iters "${ITERS:-15}" --warmup 1 --max-time 0 --bw-unit MB --quiet --json "$f.json" > "$f.txt"
  files+=("$f.json")
done
.venv/bin/python "$R/summarize.py" "${files[@]}" | tee "$R/summary-h2h-lab-$D.txt"
