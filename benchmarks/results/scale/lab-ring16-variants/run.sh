#!/bin/bash
# The 16-node ring at 4 MiB under six lab settings: why two-port swing-bw is slower in the lab than simulated.
# Run as root on a quiet machine, one lab at a time (about 100 s each). C-q50 needs a code change: it ran with
# TBF_LATENCY = "50ms" in swing_mpi/lab/plan.py (the queue each port may hold; 400ms as shipped), not an option.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
PY=${PY:-.venv/bin/python}
while read -r out extra; do
    # shellcheck disable=SC2086
    timeout 900 "$PY" benchmarks/sweep.py --lab --lab-check=warn --dims 16 --rate-mbit 40 --sizes 4M \
        --algorithms swing-bw,swing-bw-1port,bucket --iters 7 --warmup 1 --max-time 20 --timeout 800 \
        --out "benchmarks/results/scale/lab-ring16-variants/$out" $extra < /dev/null
done <<LIST
A-default
B-burst64 --burst-kib 64
D-mtu9000 --mtu 9000
E-mtu1500 --mtu 1500
F-mtu9000-burst16 --mtu 9000 --burst-kib 16
LIST
