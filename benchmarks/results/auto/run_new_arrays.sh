#!/usr/bin/env bash
# auto vs MPI_Allreduce on new arrays every call and on the same arrays (new_arrays.py), shared memory,
# p = 4 (2x2) and p = 16 (4x4), with the tuning files calibrate wrote here (run.sh). Writes
# new-arrays-shm-<dims>.txt. With BEFORE=<commit>, runs that commit's swing_mpi instead (a git worktree
# on PYTHONPATH) and writes new-arrays-shm-<dims>-before.txt.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../../.. && pwd)
PY=$ROOT/.venv/bin/python
MPIEXEC=$ROOT/.venv/bin/mpiexec
suffix=""
if [ -n "${BEFORE:-}" ]; then
  tree=$(mktemp -d)/before
  git -C "$ROOT" worktree add -q --detach "$tree" "$BEFORE"
  trap 'git -C "$ROOT" worktree remove --force "$tree"' EXIT
  export PYTHONPATH="$tree"
  suffix="-before"
fi
for spec in "4 2x2 200 11" "16 4x4 20 7"; do
  set -- $spec
  SWING_MPI_TUNING="$PWD/tuning-shm-$2.json" MPIEXEC_TIMEOUT=600 "$MPIEXEC" -n "$1" "$PY" -m mpi4py new_arrays.py \
    --dims "$2" --calls "$3" --rounds "$4" | tee "new-arrays-shm-$2$suffix.txt"
done
