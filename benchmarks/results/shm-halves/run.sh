#!/usr/bin/env bash
# Reduce-scatter and all-gather on shared memory, p = 4 (2x2), 16 MiB float64 (the reduce-scatter's input,
# the all-gather's output), against MPICH's own (native), side by side:
#   pairs  one launch per (collective, algorithm): native and that algorithm alternating (30 iterations);
#   all    one launch per collective, every algorithm interleaved (as the README's bench).
# Usage: bash benchmarks/results/shm-halves/run.sh [RUNS]   (writes next to this script)
set -euo pipefail
cd "$(dirname "$0")/../../.."
dir=benchmarks/results/shm-halves
runs=${1:-3}
bench() {  # collective, algorithms, out
  timeout 600 .venv/bin/mpiexec -n 4 .venv/bin/python -m mpi4py -m swing_mpi bench --collective "$1" --sizes 16M \
    --dims 2x2 --iters 30 --max-bytes 0 --max-time 0 --algorithms "$2" --quiet --json "$3.json" > "$3.txt"
}
for run in $(seq 1 "$runs"); do
  for coll in reduce_scatter_block allgather; do
    for alg in swing-bw swing-bw-1port ring bucket rabenseifner recdoub-mirrored hamiltonian auto; do
      bench "$coll" "native,$alg" "$dir/pair-$coll-$alg-run$run"
    done
    bench "$coll" all "$dir/all-$coll-run$run"
  done
done
.venv/bin/python benchmarks/tables.py halves "$dir" | tee "$dir/summary.txt"
