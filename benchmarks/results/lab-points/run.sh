#!/usr/bin/env bash
# Spot points on the emulated torus lab (40 Mbit/s per link direction, MTU 65000), one launch per shape:
# 4 MiB float64 SUM (or the collective named), every result validated (#wrong).
# Usage: bash benchmarks/results/lab-points/run.sh DIMS NP ALGORITHMS [COLLECTIVE] [extra swing-mpi lab args]
#        TAG=name (file suffix), SIZES=4M (bench --sizes), ITERS=3 (timed iterations),
#        BATCH=K (bench --batch: an iteration is K back-to-back calls from one barrier, timed per call),
#        START=sync (bench --start sync: every rank starts at one instant agreed after the barrier, timed from it)
set -euo pipefail
cd "$(dirname "$0")/../../.."
dims=$1 np=$2 algs=$3 coll=${4:-allreduce}
shift 3; [ $# -gt 0 ] && shift
out=benchmarks/results/lab-points/$dims-$coll${TAG:+-$TAG}
.venv/bin/python -m swing_mpi lab --dims "$dims" --rate-mbit 40 --mtu 65000 --timeout 800 -n "$np" "$@" -- \
  .venv/bin/python -m mpi4py -m swing_mpi bench --collective "$coll" --sizes "${SIZES:-4M}" --dims "$dims" \
  --iters "${ITERS:-3}" --warmup 1 --max-time 0 --bw-unit MB --algorithms "$algs" ${BATCH:+--batch "$BATCH"} ${START:+--start "$START"} \
  --json "$out.json" | tee "$out.txt"
