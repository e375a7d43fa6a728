#!/usr/bin/env bash
# Trivance against Swing at scale in the simulator (400 Gb/s, preset c): 81x81, 64x64, 16x16x16, each shape's
# points in sim<shape>/points.jsonl (one JSON object per algorithm and size; swing-mpi simulate --json).
# Needs SimGrid 3.35 to finish in minutes (scripts/build_simgrid.sh); run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../../.."
# 16x16x16: sizes whose counts are multiples of p*lcm(1..6) elements (960 KiB), besides 32 B and 128 MiB: its
# counts of 32 KiB, 1 MiB and 8 MiB read every rank's schedule, about 10 minutes a point.
for shape in ${SHAPES:-81x81 64x64 16x16x16}; do
  mkdir -p "benchmarks/results/trivance/sim$shape"
  sizes=32,32K,1M,8M,128M
  [ "$shape" = 16x16x16 ] && sizes=32,960K,7680K,128M
  .venv/bin/python -m swing_mpi simulate --dims "$shape" --link 400G --sizes "$sizes" \
    --algorithms trivance-bw,swing-bw,trivance-lat,swing-lat --alpha c --json \
    > "benchmarks/results/trivance/sim$shape/points.jsonl"
done
