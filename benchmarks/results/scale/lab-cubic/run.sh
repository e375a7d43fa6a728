#!/bin/bash
# The lab-validation points of benchmarks/validate_lab.py measured again in labs whose namespaces run TCP
# cubic (the lab's default since 2026-12-06, `--tcp-cc`); the stored sets (lab4x4-*, lab3x4*, lab8x8,
# lab-ring16) ran the host's default, bbr, which left the links 5-12 % short where every port was busy.
# Every other setting is the lab's default (40 Mbit/s, MTU 65000, 256 KiB burst). Then:
#   python benchmarks/validate_lab.py --lab-set 4x4=scale/lab-cubic/4x4,scale/lab-cubic/4x4-large --lab-set 3x4=scale/lab-cubic/3x4 \
#       --lab-set 8x8=scale/lab-cubic/8x8,scale/lab-cubic/8x8-large --lab-set 16=scale/lab-cubic/16 \
#       --out benchmarks/results/scale/validate-lab-cubic
# Run on a quiet machine, one lab at a time, as root (about 35 minutes).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
ALL=swing-bw,swing-bw-1port,swing-lat,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian
NOLAT=swing-bw,swing-bw-1port,recdoub,rabenseifner,recdoub-mirrored,ring,bucket,hamiltonian
# shape  ranks  sizes  algorithms  output (swing-lat on 4x4 and 8x8 at 1 MiB only: 57 and 420 s a call at 16 MiB)
while read -r dims sizes algs out; do
    timeout 1800 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims "$dims" --rate-mbit 40 --sizes "$sizes" \
        --algorithms "$algs" --iters 5 --warmup 1 --max-time 15 --timeout 1500 \
        --out "benchmarks/results/scale/lab-cubic/$out" < /dev/null > "/tmp/lab-cubic-$out.log" 2>&1
    echo "$out done: $(tail -1 "benchmarks/results/scale/lab-cubic/$out/summary.txt" 2>/dev/null)"
done <<LIST
16 4M swing-bw,swing-bw-1port,rabenseifner,ring,bucket 16
4x4 1M $ALL 4x4
4x4 4M,16M $NOLAT 4x4-large
3x4 1M,4M,16M $ALL 3x4
8x8 1M $ALL 8x8
8x8 4M,16M $NOLAT 8x8-large
LIST
