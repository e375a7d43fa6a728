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
# Where the lab cannot be built (not root, no namespaces, veth, tbf or sysctls, ...) the demo says
# why in one line and runs the shared-memory part, exit 0; so it does when the lab's build fails
# after all. TCP in the lab is cubic where the kernel lets a namespace use it, else the host's
# default; the demo says which.
#
# DEMO=shm forces the shared-memory run, DEMO=lab insists on the lab (and fails with the reason
# where there is none); MPI=openmpi uses Open MPI (shared memory only). Extra arguments go to
# every `swing-mpi bench` launch.
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
works=""
if [ "$mode" != shm ]; then
  if [ "$MPI" != mpich ]; then
    why="the lab runs MPICH's TCP transport (MPI=$MPI)"
  elif ! works=$("$PY" -c 'from swing_mpi.lab import lab_available
ok, why = lab_available()
print(" ".join(why.split()))
raise SystemExit(0 if ok else 1)' 2>&1); then
    why=$(printf '%s\n' "${works:-the lab check failed}" | tail -n 1)  # every missing piece, on one line
  else
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
  say "TCP congestion control: ${works#*TCP congestion control }"
  say "measuring 1 MiB and 4 MiB: swing-bw, bucket and MPI_Allreduce (MPICH's default); about 40 s"
  start=$SECONDS
  rc=0
  "$PY" benchmarks/sweep.py --lab --dims 4x4 --link 40M --sizes 1M,4M --algorithms swing-bw,bucket \
    --iters 5 --warmup 1 --timeout 300 --out "$OUT" -- "$@" || rc=$?
  if [ "$rc" -ne 0 ] && [ -s "$OUT/lab-unavailable.txt" ] && [ "${DEMO:-auto}" != lab ]; then
    why="the lab could not be built after all: $(head -n 1 "$OUT/lab-unavailable.txt")"
    mode=shm
  elif [ "$rc" -ne 0 ]; then
    exit "$rc"
  else
    say "done in $((SECONDS - start)) s. Plot: $OUT/goodput.png (dashed: the cost model); every row: $OUT/results.csv"
    say "Swing sends to torus neighbours on all four ports at once; MPI_Allreduce's peers share links."
    say "More: benchmarks/lab_shapes.sh (other torus shapes), swing-mpi lab --dims 4x4 --check (the links)."
  fi
fi

if [ "$mode" != lab ]; then
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
