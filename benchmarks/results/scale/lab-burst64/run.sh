#!/bin/bash
# Every 1 MiB point of benchmarks/validate_lab.py measured again with a one-packet token-bucket
# burst (--burst-kib 64; the lab's default is 256 KiB, which lets an idle port send 256 KiB at
# once beyond the rate: the cause of 9 of the validation's misses). Then:
#   python benchmarks/validate_lab.py --sizes 1M --lab-set 4x4=scale/lab-burst64/4x4 \
#       --lab-set 3x4=scale/lab-burst64/3x4 --lab-set 8x8=scale/lab-burst64/8x8 --shapes 4x4,3x4,8x8 \
#       --out benchmarks/results/scale/validate-lab-burst64
# Run on a quiet machine, one lab at a time, as root.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
ALGS=swing-bw,swing-bw-1port,swing-lat,recdoub,rabenseifner,recdoub-mirrored,ring,bucket
for spec in "4x4 $ALGS" "3x4 $ALGS,hamiltonian" "8x8 $ALGS,hamiltonian"; do
    set -- $spec
    timeout 900 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims "$1" --rate-mbit 40 --burst-kib 64 --sizes 1M \
        --algorithms "$2" --iters 5 --warmup 1 --max-time 0 --timeout 800 \
        --out "benchmarks/results/scale/lab-burst64/$1" > "/tmp/lab-burst64-$1.log" 2>&1
    tail -3 "benchmarks/results/scale/lab-burst64/$1/summary.txt"
done
