#!/usr/bin/env bash
# auto with and without its trial (SWING_MPI_TRIAL=on/off), head to head with the candidates it tries, one
# size and shape on shared memory, with a tuning calibrated before: LAUNCHES launches of each, alternating.
# Usage: MPI=openmpi|mpich bash trial-onoff.sh N DIMS SIZE TUNING ALGS OUTDIR
# e.g.   bash trial-onoff.sh 4 2x2 1M run28/mpich/tuning-shm-2x2.json native,rabenseifner,ring trial-onoff/mpich
set -euo pipefail
cd "$(dirname "$0")"
ROOT=../../..
source "$ROOT/scripts/mpi_env.sh"
case $VENV in /*) ;; *) VENV=$ROOT/$VENV ;; esac
n=$1 dims=$2 size=$3 tuning=$4 algs=$5 out=$6
mkdir -p "$out"
for launch in $(seq "${LAUNCHES:-4}"); do
  for trial in on off; do
    SWING_MPI_TRIAL=$trial SWING_MPI_TUNING=$PWD/$tuning "$VENV/bin/mpiexec" -n "$n" "$VENV/bin/python" -m mpi4py \
      -m swing_mpi bench --algorithms "auto,$algs" --sizes "$size" --dims "$dims" --dtype float64 --op sum \
      --iters 60 --streak 4 --max-time 30 --quiet --json "$out/$dims-$size-$trial-$launch.json" > /dev/null < /dev/null
  done
done
"$VENV/bin/python" - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
for trial in ("on", "off"):
    ratios = []
    for f in sorted(glob.glob(f"{out}/*-{trial}-*.json")):
        rows = json.load(open(f))["rows"]
        a = next(r for r in rows if r["algorithm"] == "auto")
        best = min((r for r in rows if r["algorithm"] != "auto"), key=lambda r: r["time_median_us"])
        ratios.append(a["time_median_us"] / best["time_median_us"])
        t = a.get("trial")
        print(f"{f}: auto -> {a['resolved']} {a['time_median_us']:.0f} us, fastest {best['algorithm']} "
              f"{best['time_median_us']:.0f} us: {ratios[-1]:.2f}"
              + (f"; trial {' '.join(f'{c}={m:.0f}' for c, m in zip(t['contenders'], t['medians_us']))}" if t else ""))
    print(f"trial {trial}: auto/fastest {' '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")
PY
