#!/bin/bash
# The lab's cost per step, measured apart from the validated points: one small vector (2 KiB,
# 256 float64 elements: every block of every lane holds one at least, so no step is skipped)
# in each lab shape of benchmarks/validate_lab.py, with the lab's settings of its stored sweeps
# (40 Mbit/s, MTU 65000, the default burst). Then: python benchmarks/results/scale/lab-alpha/fit.py
# Run on a quiet machine, one lab at a time (as root: the lab builds network namespaces).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
OUT=benchmarks/results/scale/lab-alpha
PY=${PY:-.venv/bin/python}
run() {  # dims ranks algorithms
    local tag=${1//x/x}
    timeout 600 "$PY" -m swing_mpi lab --dims "$1" --rate-mbit 40 --mtu 65000 --timeout 500 -n "$2" -- \
        python -m mpi4py -m swing_mpi bench --sizes 2K --dtype float64 --op sum --dims "$1" --iters 21 --warmup 2 \
        --max-time 0 --bw-unit MB --algorithms "$3" --json "$OUT/lab-$tag.json" > "$OUT/lab-$tag.txt" 2>&1
    grep -E "^ +2048 " "$OUT/lab-$tag.txt"
}
run 4x4 16 swing-bw,swing-bw-1port,rabenseifner,recdoub-mirrored,ring,bucket
run 3x4 12 swing-bw,swing-bw-1port,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian
run 8x8 64 swing-bw,swing-bw-1port,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian
run 16 16 swing-bw,swing-bw-1port,rabenseifner,ring,bucket
