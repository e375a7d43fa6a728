#!/bin/bash
# Every 1 and 4 MiB point of benchmarks/validate_lab.py in labs with TCP cubic (the lab's default) and a
# one-packet token-bucket burst (--burst-kib 64; the default 256 KiB lets an idle port send 256 KiB at
# once beyond the rate). Folders: SHAPE (1 MiB), SHAPE-4M. Then:
#   python benchmarks/validate_lab.py --sizes 1M,4M --shapes 4x4,3x4,8x8 \
#       --lab-set 4x4=scale/lab-cubic-burst64/4x4,scale/lab-cubic-burst64/4x4-4M \
#       --lab-set 3x4=scale/lab-cubic-burst64/3x4,scale/lab-cubic-burst64/3x4-4M \
#       --lab-set 8x8=scale/lab-cubic-burst64/8x8,scale/lab-cubic-burst64/8x8-4M \
#       --out benchmarks/results/scale/validate-lab-cubic-burst64
# Run on a quiet machine, one lab at a time, as root (about 20 minutes). SIZES=1M or SIZES=4M: one size only.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
ALGS=swing-bw,swing-bw-1port,swing-lat,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian
for size in ${SIZES:-1M 4M}; do
    for dims in 4x4 3x4 8x8; do
        out=$dims; algs=$ALGS
        if [ "$size" != 1M ]; then out=$dims-$size; [ "$dims" = 3x4 ] || algs=${ALGS/swing-lat,/}; fi
        timeout 1200 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims "$dims" --rate-mbit 40 --burst-kib 64 \
            --sizes "$size" --algorithms "$algs" --iters 5 --warmup 1 --max-time 15 --timeout 1100 \
            --out "benchmarks/results/scale/lab-cubic-burst64/$out" < /dev/null > "/tmp/lab-cubic-burst64-$out.log" 2>&1
        echo "$out done: $(tail -1 "benchmarks/results/scale/lab-cubic-burst64/$out/summary.txt")"
    done
done
