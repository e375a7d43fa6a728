#!/usr/bin/env bash
# The simulated table of docs/scale.md's "engine against C": run from the repository root,
#   bash benchmarks/results/engine/sim/run.sh [8x8|64x64 ...]      (default: both)
# PYTHON: the interpreter (default python); SWING_LOCK: a lock file each simulation waits for (flock).
# Ours: swing-bw and swing-lat, --alpha engine (the costs in probe.json here), a one-rank node of 1, 4, 16 cores.
# C: recdoub, rabenseifner and ring, --alpha c (1.5 us a step) --gamma c (numpy's add, one thread, from probe.json).
set -eu
out=benchmarks/results/engine/sim
export SWING_MPI_ENGINE_COSTS=$out/probe.json
py=${PYTHON:-python}
small8=32,1K,32K,256K,2M,32M,512M
sizes64=32,32K,2M,512M
tmp=$(mktemp -d)
sim() {  # name, then simulate's options; each run's CSV is merged into points.csv at the end (table.py)
    local name=$1; shift
    echo "$(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg): swing-mpi simulate $* --csv $name.csv" \
        >> "$out/commands.txt"
    ${SWING_LOCK:+flock "$SWING_LOCK"} "$py" -m swing_mpi simulate "$@" --csv "$tmp/$name.csv" > /dev/null
}
shapes=${*:-8x8 64x64}
for dims in $shapes; do
    if [ "$dims" = 8x8 ]; then sizes=$small8; c_algs=recdoub,rabenseifner,ring; big=$small8
    else sizes=$sizes64; c_algs=recdoub,rabenseifner; big=2M,512M; fi  # ring on 64x64: 33 million messages
    sim "c-$dims" --dims "$dims" --link 400G --alpha c --gamma c --sizes "$sizes" --algorithms "$c_algs"
    sim "engine-$dims-cores1" --dims "$dims" --link 400G --alpha engine --cores 1 --sizes "$sizes" \
        --algorithms swing-bw,swing-lat
    for cores in 4 16; do  # below 256 KiB a block is reduced on one thread whatever the cores: same times
      sim "engine-$dims-cores$cores" --dims "$dims" --link 400G --alpha engine --cores "$cores" --sizes "$big" \
          --algorithms swing-bw,swing-lat
    done
    for cores in 4 16; do  # the same threads without segments: what the overlap adds at 512 MiB
      sim "engine-$dims-cores$cores-whole" --dims "$dims" --link 400G --alpha engine --cores "$cores" --segment 0 \
          --sizes 512M --algorithms swing-bw
    done
done
"$py" "$out/table.py" "$tmp"
rm -r "$tmp"
