#!/usr/bin/env bash
# auto from a size's first call after `swing-mpi calibrate`, as a new user would run it, on shared memory:
# calibrate p=4 (2x2) and p=16 (4x4), then first_calls.py with the trial on and off (LAUNCHES launches each).
# BEFORE=DIR also runs the swing_mpi tree in DIR (PYTHONPATH) on the same tuning, for a before/after.
# Usage: bash first_calls.sh OUTDIR [SIZES]      (timing on a shared machine: note the load beside it)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../../.. && pwd)
source "$ROOT/scripts/mpi_env.sh"
case $VENV in /*) ;; *) VENV=$ROOT/$VENV ;; esac
out=$1 sizes=${2:-8,64K,1M,16M}
mkdir -p "$out"
for spec in "4 2x2" "16 4x4"; do
  set -- $spec
  n=$1 dims=$2
  "$VENV/bin/mpiexec" -n "$n" "$VENV/bin/python" -m mpi4py -m swing_mpi calibrate --dims "$dims" --quiet \
    --output "$out/tuning-shm-$dims.json" > "$out/calibrate-shm-$dims.txt"
  for launch in $(seq "${LAUNCHES:-1}"); do
    for run in after-on after-off ${BEFORE:+before-on}; do
      tree=$ROOT; [ "${run%%-*}" = before ] && tree=$BEFORE
      echo "# p=$n dims $dims $run launch $launch; load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/first-calls.txt"
      PYTHONPATH=$tree SWING_MPI_TRIAL=${run##*-} SWING_MPI_TUNING=$PWD/$out/tuning-shm-$dims.json \
        "$VENV/bin/mpiexec" -n "$n" "$VENV/bin/python" -m mpi4py first_calls.py --dims "$dims" --sizes "$sizes" \
        --json "$out/first-calls-$dims-$run-$launch.json" | tee -a "$out/first-calls.txt"
    done
  done
done
