#!/bin/sh
# Many ranks per node at scale: 16x16 nodes of 4 and of 48 ranks, 400 Gb/s, the engine's costs, 32 B-512 MiB.
# Run from the repository root; writes k4.jsonl and k48.jsonl here (one JSON object per form, algorithm and size).
set -e
here=benchmarks/results/nodes-16x16
for k in 4 48; do
  python -m swing_mpi simulate --dims 16x16 --link 400G --alpha engine --ranks-per-node "$k" --cores "$k" \
    --sizes 32:512M -a swing-bw,swing-lat,bucket --json > "$here/k$k.jsonl"
done
