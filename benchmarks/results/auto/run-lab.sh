#!/usr/bin/env bash
# auto in the emulated torus lab (40 Mbit/s per link direction, MTU 65000; root), one shape per call:
# calibrate inside the lab, then every algorithm, MPICH's default (native) and auto side by side.
# Usage: bash benchmarks/results/auto/run-lab.sh DIMS   (e.g. 3x4, 4x4, 8x8)
#        CALIBRATE=0 ... reuses tuning-lab-DIMS.json and only runs the bench; SIZES=64K,1M ... other sizes;
#        CAL_ITERS=N ... calibrate's --iters (default 15; the close contenders get min(7, N) samples each: with 5,
#        the 8x8 lab's 64 KiB pick rested on 5 calls of MPICH's default that swing 45-90 ms)
#        BLOCKED=1 ... times each algorithm's calls back to back (the steady state of a program's repeated calls,
#        what calibrate's --settle measures) instead of round robin
#        ALGS=native,bucket,...,auto ... the bench's algorithms (default all,auto); BENCH_SIZES=16M ... the bench's
#        sizes (default: the calibrated ones, SIZES); BENCH=NAME ... the bench's files are bench-lab-DIMS-NAME.*
#        and summary-lab-DIMS-NAME.txt (a second bench beside the first); ITERS=5 ... timed calls (default 15, fewer
#        where a point would take over MAX_TIME seconds per algorithm, default 5; never below 3: at 64 KiB a call
#        right after a light one rides the token buckets' burst, and 3 calls in a random order are too few)
#        NO_BENCH=1 ... calibrate only (then h2h-lab.sh: auto head to head with the close candidates)
set -euo pipefail
cd "$(dirname "$0")/../../.."
D=$1 R=$PWD/benchmarks/results/auto
B=$D${BENCH:+-$BENCH}
SIZES=${SIZES:-64K,256K,1M,4M,16M}
start=$(date +%s.%N)
if [ "${CALIBRATE:-1}" != 0 ]; then
.venv/bin/python -m swing_mpi lab --dims "$D" --rate-mbit 40 --mtu 65000 --timeout 1500 -- \
  .venv/bin/python -m mpi4py -m swing_mpi calibrate --dims "$D" --sizes "$SIZES" --iters "${CAL_ITERS:-15}" --point-time 20 \
  --output "$R/tuning-lab-$D.json" > "$R/calibrate-lab-$D.txt" 2> "$R/calibrate-lab-$D.stderr"
echo "calibrate in the $D lab: $(echo "$(date +%s.%N) - $start" | bc) s wall (lab build to teardown)" \
  | tee -a "$R/calibrate-lab-$D.txt"
fi
[ "${NO_BENCH:-0}" != 0 ] && exit 0
.venv/bin/python -m swing_mpi lab --dims "$D" --rate-mbit 40 --mtu 65000 --timeout 2400 \
  --env "SWING_MPI_TUNING=$R/tuning-lab-$D.json" -- \
  .venv/bin/python -m mpi4py -m swing_mpi bench --algorithms "${ALGS:-all,auto}" --dims "$D" --sizes "${BENCH_SIZES:-$SIZES}" \
  --iters "${ITERS:-15}" --warmup 1 --max-time "${MAX_TIME:-5}" --bw-unit MB ${BLOCKED:+--blocked} --json "$R/bench-lab-$B.json" \
  > "$R/bench-lab-$B.txt"
.venv/bin/python benchmarks/tables.py auto "$R/bench-lab-$B.json" | tee "$R/summary-lab-$B.txt"
