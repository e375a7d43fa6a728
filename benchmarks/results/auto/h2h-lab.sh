#!/usr/bin/env bash
# auto head to head in the emulated torus lab (40 Mbit/s per link direction, MTU 65000; root): at each size,
# auto against the few candidates that matter there (calibrate's closest and the bench's fastest), with the
# tuning run-lab.sh calibrated in that lab, in $LAUNCHES separate labs (default 3; each its own mpiexec: a
# launch's placement and the token buckets' state move a 64 KiB-1 MiB call by 20-50 %), then benchmarks/tables.py auto's
# median of the launches' ratios per size.
# Usage: bash benchmarks/results/auto/h2h-lab.sh DIMS SIZE=ALG,ALG... [SIZE=ALG,... ...]
#        e.g. 8x8 64K=native,rabenseifner,recdoub 1M=swing-bw,recdoub-mirrored
#        ITERS=15 ... timed calls per algorithm (round robin, a new order each round, each algorithm right after
#        each other equally often); BLOCKED=1 ... each algorithm's calls back to back instead (the steady state of a
#        program's repeated calls, what calibrate's settling calls measure; the algorithms in a random order);
#        STREAK=K ... round robin in turns of K calls of one algorithm (only the first of a turn follows a switch,
#        and a drift of the lab lands on every algorithm alike, which BLOCKED's one block each does not);
#        NAME=x ... files h2h-lab-DIMS-x-SIZE-N.* and summary-h2h-lab-DIMS-x.txt (a second run beside the first)
set -euo pipefail
cd "$(dirname "$0")/../../.."
D=$1 R=$PWD/benchmarks/results/auto
N=$D${NAME:+-$NAME}
shift
files=()
for spec in "$@"; do
  size=${spec%%=*} algs=${spec#*=}
  for launch in $(seq "${LAUNCHES:-3}"); do
    f=$R/h2h-lab-$N-$size-$launch
    .venv/bin/python -m swing_mpi lab --dims "$D" --rate-mbit 40 --mtu 65000 --timeout 1200 \
      --env "SWING_MPI_TUNING=$R/tuning-lab-$D.json" -- \
      .venv/bin/python -m mpi4py -m swing_mpi bench --algorithms "auto,$algs" --dims "$D" --sizes "$size" \
      --iters "${ITERS:-15}" --warmup 1 --max-time 0 --bw-unit MB ${BLOCKED:+--blocked} ${STREAK:+--streak $STREAK} --quiet --json "$f.json" > "$f.txt"
    files+=("$f.json")
  done
done
.venv/bin/python benchmarks/tables.py auto "${files[@]}" | tee "$R/summary-h2h-lab-$N.txt"
