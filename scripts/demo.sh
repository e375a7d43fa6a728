#!/usr/bin/env bash
# The main job on a fresh machine: set up, then show where Swing wins.
#
# As root on Linux where `ip netns` works (and with MPICH, the default): an emulated 4x4 torus,
# one network namespace per rank and 40 Mbit/s links, then 1 MiB and 4 MiB allreduce with
# swing-bw, bucket and MPI_Allreduce (MPICH's default), every result validated. About 40 s.
# Table, summary and plot go to benchmarks/results/demo/.
# Elsewhere: every algorithm against MPI_Allreduce on 4 ranks in shared memory, and why Swing
# cannot win there.
#
# DEMO=shm forces the shared-memory run, DEMO=lab insists on the lab; MPI=openmpi uses Open MPI
# (shared memory only). Extra arguments go to every `swing-mpi bench` launch.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
bash scripts/setup.sh
PY="$VENV/bin/python"
OUT=benchmarks/results/demo
mkdir -p "$OUT"
say() { echo "== demo: $*" >&2; }

mode=${DEMO:-auto}
why=""
if [ "$mode" != shm ]; then
  if [ "$MPI" != mpich ]; then
    why="the lab runs MPICH's TCP transport (MPI=$MPI)"
  elif ! why=$("$PY" -c 'from swing_mpi.lab import lab_available
ok, why = lab_available()
print(why)
raise SystemExit(0 if ok else 1)'); then
    :  # $why holds the reason
  else
    why=""
    mode=lab
  fi
fi
if [ "$mode" = lab ] && [ -n "$why" ]; then
  say "DEMO=lab, but no lab here: $why"
  exit 2
fi

if [ "$mode" = lab ]; then
  say "building an emulated 4x4 torus: 16 ranks, each in its own network namespace, every link"
  say "40 Mbit/s per direction (tc tbf), MPICH over TCP, so every byte crosses the emulated links"
  say "measuring 1 MiB and 4 MiB: swing-bw, bucket and MPI_Allreduce (MPICH's default); about 40 s"
  start=$SECONDS
  "$PY" benchmarks/sweep.py --lab --dims 4x4 --link 40M --sizes 1M,4M --algorithms swing-bw,bucket \
    --iters 5 --warmup 1 --timeout 300 --out "$OUT" -- "$@"
  say "done in $((SECONDS - start)) s. Plot: $OUT/goodput.png (dashed: the cost model); every row: $OUT/results.csv"
  say "Swing sends to torus neighbours on all four ports at once; MPI_Allreduce's peers share links."
  say "More: benchmarks/lab_shapes.sh (other torus shapes), swing-mpi lab --dims 4x4 --check (the links)."
else
  export MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-600}
  if [ -n "$why" ]; then
    say "no torus lab here ($why): shared memory on ${NP:-4} ranks instead"
  else
    say "DEMO=shm: shared memory on ${NP:-4} ranks"
  fi
  start=$SECONDS
  "$VENV/bin/mpiexec" -n "${NP:-4}" "$PY" -m mpi4py -m swing_mpi bench --quick --plot "$OUT/shm-quick.png" "$@"
  say "done in $((SECONDS - start)) s. Plot: $OUT/shm-quick.png"
  say "Shared memory has no links to share: Swing's short torus paths save nothing here, so expect it no"
  say "faster than MPI_Allreduce (tuned for one machine); small differences are noise. To see Swing win,"
  say "run as root on Linux where \`ip netns\` works (sudo bash scripts/demo.sh): an emulated 4x4 torus."
fi
