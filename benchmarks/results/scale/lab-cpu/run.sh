#!/bin/bash
# How busy the 2 cores are during the 8x8 lab's calls (README.md): cpu.py in the 8x8 lab at 20 Mbit/s with a
# one-packet burst (every validation point that misses, and some that agree), the same again under four
# settings of the backoff wait, and the 4x4 lab at 40 Mbit/s; then table.py. Run on a quiet machine, one lab
# at a time, as root (about 12 minutes). ONLY=8x8|waits|4x4 runs one part.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=$(pwd)/.venv/bin/python
D=benchmarks/results/scale/lab-cpu
lab() {  # DIMS RATE JSONL ARGS...: cpu.py in a fresh lab, its table to JSONL's .txt
    local dims=$1 rate=$2 out=$3; shift 3
    timeout 900 "$PY" -m swing_mpi lab --dims "$dims" --rate-mbit "$rate" --burst-kib 64 \
        -n $(( $(echo "$dims" | tr x '*') )) --timeout 800 --env "CPU_JSON=$(pwd)/$D/$out" -- \
        "$PY" "$D/cpu.py" "$dims" "$rate" "$@" < /dev/null | grep -v -e '^#' -e '^lab:' > "$D/${out%.jsonl}.txt"
}
if [ -z "${ONLY:-}" ] || [ "$ONLY" = 8x8 ]; then
    lab 8x8 20 8x8-20M.jsonl 1M:swing-bw,swing-bw-1port,trivance-bw,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian \
        4M:swing-bw,trivance-bw,bucket,hamiltonian,ring 16M:hamiltonian,bucket
fi
if [ -z "${ONLY:-}" ] || [ "$ONLY" = waits ]; then
    for v in default 0.25:0.0002:0.004:0 0.5:0.0005:0.008:0 1:0.001:0.016:0; do
        extra=(); [ "$v" != default ] && extra=(--backoff "$v")
        lab 8x8 20 "var-$(echo "$v" | tr : _).jsonl" \
            1M:swing-bw,trivance-bw,recdoub-mirrored,bucket,hamiltonian,ring 4M:hamiltonian,trivance-bw "${extra[@]}"
    done
fi
if [ -z "${ONLY:-}" ] || [ "$ONLY" = 4x4 ]; then
    lab 4x4 40 4x4-40M.jsonl 1M:swing-bw,swing-bw-1port,bucket,hamiltonian,ring 16M:swing-bw,bucket,hamiltonian,ring
fi
"$PY" "$D/table.py" > "$D/table.txt"
