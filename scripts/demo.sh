#!/usr/bin/env bash
# The main job on a fresh machine: set up, then benchmark every algorithm against MPI_Allreduce
# on 4 ranks (shared memory), validating every result. Extra arguments go to `swing-mpi bench`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MPIEXEC_TIMEOUT=${MPIEXEC_TIMEOUT:-600}
exec .venv/bin/mpiexec -n "${NP:-4}" .venv/bin/python -m mpi4py -m swing_mpi bench --quick \
  --plot benchmarks/results/quick.png "$@"
