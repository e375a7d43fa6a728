#!/usr/bin/env bash
# The repeat path's cost before (BEFORE=tree of ab390e2, before the one-pipeline change) and after:
# scripts/profile_call.py, p=2, 8 B float64 SUM, algorithms ALGS (native auto), LAUNCHES alternating launches.
# Usage: BEFORE=DIR bash repeat_path.sh OUT.txt     (on a quiet machine: load is written beside each launch)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(cd ../../.. && pwd)
source "$ROOT/scripts/mpi_env.sh"
case $VENV in /*) ;; *) VENV=$ROOT/$VENV ;; esac
out=$1
: > "$out"
for launch in $(seq "${LAUNCHES:-3}"); do
  for alg in ${ALGS:-native auto}; do
    for tree in after before; do
      dir=$ROOT; [ $tree = before ] && dir=$BEFORE
      echo "# $tree $alg launch $launch; load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out"
      PYTHONPATH=$dir MPIEXEC_TIMEOUT=300 "$VENV/bin/mpiexec" -n 2 "$VENV/bin/python" -m mpi4py \
        "$dir/scripts/profile_call.py" --algorithm $alg --bytes 8 --calls 20000 --top 0 | grep "us/call" >> "$out"
    done
  done
done
cat "$out"
