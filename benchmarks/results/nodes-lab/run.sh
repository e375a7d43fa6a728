#!/usr/bin/env bash
# Several ranks per node on the lab: 4 MiB float64 SUM, each shape twice (the bench's --dims the torus of
# nodes, then the flat torus of ranks DIMSxK), MPICH's default in both runs. Root; about 10 minutes on 2 cores.
# Usage: bash benchmarks/results/nodes-lab/run.sh [OUT_DIR]   (from the repository root)
set -euo pipefail
out=${1:-benchmarks/results/nodes-lab}
mkdir -p "$out"
run() {  # run NODE_DIMS K BENCH_DIMS NAME
  .venv/bin/swing-mpi lab --dims "$1" --ranks-per-node "$2" --timeout 1500 -- \
    python -m mpi4py -m swing_mpi bench --dims "$3" --sizes 4M --dtype float64 --op sum \
    --algorithms native,swing-bw,bucket,auto --warmup 2 --iters 7 --bw-unit MB --json "$out/$4.json"
}
run 2x2 2 2x2 2x2-k2-nodes
run 2x2 2 2x2x2 2x2-k2-flat
run 2x2 4 2x2 2x2-k4-nodes
run 2x2 4 2x2x4 2x2-k4-flat
run 4x4 2 4x4 4x4-k2-nodes
run 4x4 2 4x4x2 4x4-k2-flat
