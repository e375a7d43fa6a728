#!/usr/bin/env bash
# Ranks in any order (Intracomm(coords=...)) on the emulated torus (40 Mbit/s per link direction, MTU 65000):
# the same bench three times on one torus shape, 4 MiB float64 SUM, every result validated (#wrong):
#   ordered   rank r in node r (the usual lab);
#   shuffled  rank r in node pi(r) (lab --placement shuffled:SEED), and every rank states its node
#             (bench --node-env SWING_LAB_NODE -> swing_mpi.Intracomm(comm, coords=...));
#   unstated  the same shuffled placement, the ranks not told: our schedules assume rank order.
# MPICH's own allreduce (native) runs beside ours in every launch.
# Usage: bash benchmarks/results/placement/run.sh [DIMS] [ALGORITHMS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/../../.."
dims=${1:-4x4} algs=${2:-native,swing-bw,bucket} seed=${3:-1}
dir=benchmarks/results/placement
run() {  # name, lab args, bench args
  local name=$1 labargs=$2 benchargs=$3
  # shellcheck disable=SC2086
  .venv/bin/python -m swing_mpi lab --dims "$dims" --rate-mbit 40 --mtu 65000 --timeout 800 $labargs -- \
    .venv/bin/python -m mpi4py -m swing_mpi bench --sizes "${SIZES:-4M}" --dims "$dims" --iters "${ITERS:-5}" \
    --warmup 1 --max-time 0 --bw-unit MB --algorithms "$algs" $benchargs --json "$dir/$dims-$name.json" \
    | tee "$dir/$dims-$name.txt"
}
run ordered "" ""
run shuffled "--placement shuffled:$seed" "--node-env SWING_LAB_NODE"
run unstated "--placement shuffled:$seed" ""
