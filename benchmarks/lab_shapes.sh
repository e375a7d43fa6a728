#!/usr/bin/env bash
# Emulated torus labs at several shapes: per shape one sweep, 64 KiB ... 16 MiB, of every registered
# algorithm, MPI_Allreduce with MPICH's default selection, and MPICH's forced algorithms (the summary
# names the best one at each size). Results, plots and the exact commands of each shape go to
# benchmarks/results/lab<shape>/: lab-check.json, results.csv/.json, table.txt, summary.txt,
# goodput.png, commands.txt, and one run-*.txt log per launch.
#
#   bash benchmarks/lab_shapes.sh                  # 3x4, 5x5, 8x8 and 4x4x4, one after the other
#   bash benchmarks/lab_shapes.sh 8x8              # only the shapes named
#   RATE=20 bash benchmarks/lab_shapes.sh 4x4x4    # another link rate, Mbit/s per direction (default 40)
#   SIZES=64K:16M:4 bash benchmarks/lab_shapes.sh  # fewer sizes (64K 256K 1M 4M 16M), about half the time
#   ITERS=5 MAX_TIME=15 bash ...                  # 5 timed calls per point (default 10), fewer (at least 3)
#                                                  # where a point's calls would pass 15 s (default: no cap);
#                                                  # TIMEOUT=3600: MPIEXEC_TIMEOUT of each launch (default 1800)
#   DRY_RUN=1 bash benchmarks/lab_shapes.sh        # print the command of each shape, run nothing
#   RESULTS=/tmp/r bash benchmarks/lab_shapes.sh   # write under /tmp/r/lab<shape>/ instead
#
# Needs root on Linux (network namespaces) and MPICH (the default venv, scripts/setup.sh). Measured
# on 2 cores with SIZES=64K:16M:4: 5x5 (25 ranks) 30 minutes; 3x4 with SIZES=64K:4M:4 7 minutes (16 MiB
# is most of the time: MPICH's slow forced algorithms at 10 iterations); 4x4x4 (64 ranks) with ITERS=5
# MAX_TIME=15 31 minutes. Run it on an otherwise idle machine: the ranks and the kernel's TCP share the CPUs. The lab check runs first;
# when the CPUs cannot drive every link at once at this rate (the check's `all` line says so and
# names a rate that fits), the sweep still runs and the check's verdict is kept in lab-check.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
PY="$VENV/bin/python"
SIZES=${SIZES:-64K:16M}
RATE=${RATE:-40}
RESULTS=${RESULTS:-benchmarks/results}
MPICH_ALGORITHMS=${MPICH_ALGORITHMS:-default,ring,reduce_scatter_allgather,recursive_doubling,recexch}
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(3x4 5x5 8x8 4x4x4)
failed=()
for shape in "${shapes[@]}"; do
  cmd=("$PY" benchmarks/sweep.py --lab --lab-check=warn --dims "$shape" --rate-mbit "$RATE" --sizes "$SIZES"
       --mpich-algorithms "$MPICH_ALGORITHMS" --iters "${ITERS:-10}" ${MAX_TIME:+--max-time "$MAX_TIME"} --warmup 1
       --timeout "${TIMEOUT:-1800}"
       --out "$RESULTS/lab$shape")
  if [ -n "${DRY_RUN:-}" ]; then
    printf '%q ' "${cmd[@]}"
    echo
    continue
  fi
  echo "== lab_shapes: $shape at $RATE Mbit/s, sizes $SIZES ($(date -u +%H:%M:%S) UTC)" >&2
  start=$SECONDS
  if "${cmd[@]}"; then
    echo "== lab_shapes: $shape done in $((SECONDS - start)) s: $RESULTS/lab$shape/" >&2
  else
    echo "== lab_shapes: $shape FAILED after $((SECONDS - start)) s (see $RESULTS/lab$shape/run-*.txt)" >&2
    failed+=("$shape")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "== lab_shapes: failed: ${failed[*]}" >&2
  exit 1
fi
