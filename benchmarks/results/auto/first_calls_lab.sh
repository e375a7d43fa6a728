#!/usr/bin/env bash
# auto from a size's first call after `swing-mpi calibrate`, in the emulated torus lab (40 Mbit/s, MTU 65000;
# root): calibrate inside the lab, then first_calls.py with the trial on, in a second lab of the same shape.
# Usage: bash first_calls_lab.sh OUTDIR DIMS [SIZES]      (one lab at a time, on a quiet machine)
#        CAL_ARGS="--settle 0": more options for calibrate
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../../.. && pwd)
PY=$ROOT/.venv/bin/python
out=$1 dims=$2 sizes=${3:-64K,4M}
mkdir -p "$out"
lab() { "$PY" -m swing_mpi lab --dims "$dims" --rate-mbit 40 --mtu 65000 --timeout 1500 -- "$@"; }
(cd "$ROOT" && lab "$PY" -m mpi4py -m swing_mpi calibrate --dims "$dims" --sizes "$sizes" --quiet \
  ${CAL_ARGS:-} --output "$PWD/benchmarks/results/auto/$out/tuning-lab-$dims.json") > "$out/calibrate-lab-$dims.txt"
echo "# lab $dims after-on; load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/first-calls-lab.txt"
(cd "$ROOT" && SWING_MPI_TRIAL=on SWING_MPI_TUNING=$PWD/benchmarks/results/auto/$out/tuning-lab-$dims.json \
  lab "$PY" -m mpi4py benchmarks/results/auto/first_calls.py --dims "$dims" --sizes "$sizes" \
  --json "$PWD/benchmarks/results/auto/$out/first-calls-lab-$dims.json") | tee -a "$out/first-calls-lab.txt"
