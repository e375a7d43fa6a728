#!/usr/bin/env bash
# Several ranks per node on the lab: 4 MiB float64 SUM, each shape twice (the bench's --dims the torus of
# nodes, then the flat torus of ranks DIMSxK), MPICH's default in both runs. Root; about 10 minutes on 2 cores.
# Usage: bash benchmarks/results/nodes-lab/run.sh [OUT_DIR]   (from the repository root)
# Writes OUT_DIR/runs.json: the six runs' bench JSON, by name (2x2-k2-nodes, 2x2-k2-flat, ...).
set -euo pipefail
out=${1:-benchmarks/results/nodes-lab}
raw=$(mktemp -d)
mkdir -p "$out"
run() {  # run NODE_DIMS K BENCH_DIMS NAME
  .venv/bin/swing-mpi lab --dims "$1" --ranks-per-node "$2" --timeout 1500 -- \
    python -m mpi4py -m swing_mpi bench --dims "$3" --sizes 4M --dtype float64 --op sum \
    --algorithms native,swing-bw,bucket,auto --warmup 2 --iters 7 --bw-unit MB --json "$raw/$4.json"
}
run 2x2 2 2x2 2x2-k2-nodes
run 2x2 2 2x2x2 2x2-k2-flat
run 2x2 4 2x2 2x2-k4-nodes
run 2x2 4 2x2x4 2x2-k4-flat
run 4x4 2 4x4 4x4-k2-nodes
run 4x4 2 4x4x2 4x4-k2-flat
.venv/bin/python - "$raw" "$out/runs.json" <<'PY'
import json, pathlib, sys
raw = pathlib.Path(sys.argv[1])
names = ["2x2-k2-nodes", "2x2-k2-flat", "2x2-k4-nodes", "2x2-k4-flat", "4x4-k2-nodes", "4x4-k2-flat"]
pathlib.Path(sys.argv[2]).write_text(json.dumps({n: json.loads((raw / f"{n}.json").read_text()) for n in names},
                                                indent=1))
PY
