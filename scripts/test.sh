#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up, then unit tests and the MPI tests
# at 1…16 ranks (each mpiexec with a timeout). Arguments go to scripts/run_tests.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/run_tests.py "$@"
