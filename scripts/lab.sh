#!/bin/sh
# The emulated torus lab: `scripts/lab.sh --dims 4x4 --check`, `scripts/lab.sh --dims 4x4 -- python prog.py`.
# Runs `python -m swing_mpi.lab "$@"` from the repository root with $PYTHON (default: python3,
# or the venv's python when VIRTUAL_ENV is set). Needs root for the network namespaces.
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}}"
py="${py:-python3}"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m swing_mpi.lab "$@"
