#!/usr/bin/env bash
# Before/after, end to end, on one machine in one run: an earlier checkout (BEFORE, a git worktree of it) and
# this one alternate, ALTERNATIONS times each, under MPICH and Open MPI, on NP ranks (default 2). Writes one JSON per run into $RAW (default /tmp/engine-e2e); combine.py makes e2e.json
# and the tables.
# MODE=probe instead alternates `swing-mpi probe` (MPICH, 2 ranks) between the two checkouts and prints each run's
# reduction on 1 and 2 threads (the probe's JSON files go to $RAW too).
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
if [ "${MODE:-e2e}" = probe ]; then
  .venv/bin/python -m swing_mpi.native --build
  for i in $(seq 1 "$ALTERNATIONS"); do
    for label in before after; do
      pp=""; [ "$label" = before ] && pp="$BEFORE"
      out="$RAW/probe-$label-$i.json"
      # run from the checkout's own folder: `python -m` puts the current folder first on the path
      (cd "${pp:-.}" && PYTHONPATH=$pp timeout 300 "$OLDPWD/.venv/bin/mpiexec" -n 2 "$OLDPWD/.venv/bin/python" \
        -m mpi4py -m swing_mpi probe --repeats 7 --out "$out" > /dev/null)
      .venv/bin/python - "$out" "$label" "$i" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["gamma_threads_s_per_byte"]
print(f"{sys.argv[2]:6} {sys.argv[3]}: 1 thread {g['1'] * 1e9:.4f} ns/B, 2 threads {g['2'] * 1e9:.4f} ns/B, "
      f"{g['1'] / g['2']:.2f}x; {d['info']['measured']}, load average {d['info']['loadavg'][0]:.2f}")
PY
    done
  done
  exit 0
fi
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
