#!/usr/bin/env bash
# Create .venv (if missing) and install swing_mpi with MPICH from PyPI, the test and plot extras.
# SWING_MPI_SYSTEM_MPI=1: use the MPI already on PATH instead of the PyPI mpich wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv" >&2
  "$PY" -m venv .venv
fi
extras="test,plot"
[ -n "${SWING_MPI_SYSTEM_MPI:-}" ] || extras="mpich,$extras"
if ! .venv/bin/python -c "import swing_mpi, mpi4py, pytest_mpi" 2>/dev/null || [ -n "${SWING_MPI_REINSTALL:-}" ]; then
  echo "== installing swing_mpi[$extras] into .venv" >&2
  .venv/bin/python -m pip install -q --upgrade pip >&2
  .venv/bin/python -m pip install -q -e ".[$extras]" >&2
fi
