#!/usr/bin/env bash
# auto vs every candidate on shared memory: calibrate, then benchmark side by side (one run per shape),
# then auto head to head against the fastest candidate of each size (two algorithms alternating, many
# more iterations: the 13-way run's medians at small sizes spread by ±20-50 % on an oversubscribed
# 2-core machine, more than the choice can be judged by).
# Run from anywhere; writes next to this script. Timing on a shared machine: keep others off it.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=../../..
PY=$ROOT/.venv/bin/python
MPIEXEC=$ROOT/.venv/bin/mpiexec
for spec in "4 2x2" "16 4x4"; do
  set -- $spec
  n=$1 dims=$2
  start=$(date +%s.%N)
  "$MPIEXEC" -n "$n" "$PY" -m mpi4py -m swing_mpi calibrate --dims "$dims" --output "tuning-shm-$dims.json" \
    > "calibrate-shm-$dims.txt" 2> "calibrate-shm-$dims.stderr"
  echo "calibrate p=$n dims $dims: $(echo "$(date +%s.%N) - $start" | bc) s wall (mpiexec start to exit)" \
    | tee -a "calibrate-shm-$dims.txt"
  export SWING_MPI_TUNING="$PWD/tuning-shm-$dims.json"
  "$MPIEXEC" -n "$n" "$PY" -m mpi4py -m swing_mpi bench \
    --algorithms all,auto --sizes 8,1K,64K,1M,16M --dims "$dims" --dtype float64 --op sum \
    --json "bench-shm-$dims.json" > "bench-shm-$dims.txt" 2> "bench-shm-$dims.stderr"
  "$PY" summarize.py "bench-shm-$dims.json" | tee "summary-shm-$dims.txt"
  h2h=()
  while read -r size best; do
    case $size in 8|1024|65536) iters=400 ;; 1048576) iters=60 ;; *) iters=15 ;; esac
    "$MPIEXEC" -n "$n" "$PY" -m mpi4py -m swing_mpi bench --algorithms "auto,$best" --sizes "$size" \
      --dims "$dims" --dtype float64 --op sum --iters $iters --max-time 30 --quiet \
      --json "h2h-shm-$dims-$size.json" > "h2h-shm-$dims-$size.txt" < /dev/null
    h2h+=("h2h-shm-$dims-$size.json")
  done < <("$PY" summarize.py --fastest "bench-shm-$dims.json")
  "$PY" summarize.py "${h2h[@]}" | tee "summary-h2h-shm-$dims.txt"
  unset SWING_MPI_TUNING
done
