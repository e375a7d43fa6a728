#!/usr/bin/env bash
# Build SimGrid 3.35 from PyPI's source release for `swing-mpi simulate` at scale, and make the venv use it.
#
# Debian's python3-simgrid (3.32, what scripts/setup.sh installs) keeps every host-to-host transfer in flight
# in a std::list that each ending transfer walks, so a wave of N concurrent transfers costs O(N^2): a 64x64
# point took 180 CPU-s, 128x128 did not finish. SimGrid 3.34 replaced that list with a std::set. This script
# builds 3.35 (the newest release with the torus call we use, `NetZone.create_torus_zone`) once, about 5
# minutes on 2 cores, into $SWING_MPI_SIMGRID_BUILD (default ~/.cache/swing_mpi/simgrid-3.35), and points the
# venv at it (the .pth that setup.sh writes for Debian's module). Needs cmake, g++, Boost and pybind11 headers
# (installed with apt-get when root). MPI=openmpi: the Open MPI venv.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
case $VENV in /*) ;; *) VENV=$PWD/$VENV ;; esac
VERSION=3.35
DIR=${SWING_MPI_SIMGRID_BUILD:-$HOME/.cache/swing_mpi/simgrid-$VERSION}
[ -x "$VENV/bin/python" ] || { echo "no venv at $VENV: run scripts/setup.sh first" >&2; exit 1; }
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "== apt-get install cmake g++ libboost-dev pybind11-dev" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake g++ libboost-dev pybind11-dev >/dev/null
fi
mkdir -p "$DIR"
if [ ! -d "$DIR/simgrid-$VERSION" ]; then
  "$VENV/bin/python" -m pip download -q --no-deps --no-binary :all: "simgrid==$VERSION" -d "$DIR"
  tar xzf "$DIR/simgrid-$VERSION.tar.gz" -C "$DIR"
fi
mkdir -p "$DIR/build"
cd "$DIR/build"
echo "== building SimGrid $VERSION in $DIR/build (log: $DIR/build.log)" >&2
start=$SECONDS
cmake "../simgrid-$VERSION" -DCMAKE_BUILD_TYPE=Release -Denable_smpi=OFF -Denable_python=ON -Dminimal-bindings=ON \
  -Denable_model-checking=OFF -Denable_documentation=OFF -Denable_java=OFF -Denable_compile_warnings=OFF \
  -DPYTHON_EXECUTABLE="$VENV/bin/python" > "$DIR/build.log" 2>&1
make -j"$(nproc)" python-bindings >> "$DIR/build.log" 2>&1 || { tail -20 "$DIR/build.log" >&2; exit 1; }
so=$(find "$DIR/build" -maxdepth 2 -name 'simgrid.cpython-*.so' | head -1)
[ -n "$so" ] || { echo "no Python module built (see $DIR/build.log)" >&2; exit 1; }
site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
dirname "$so" > "$site/swing_mpi_simgrid.pth"
"$VENV/bin/python" -c "import simgrid; print('== the venv now imports SimGrid', simgrid.simgrid_version)" 2>/dev/null
echo "== built in $((SECONDS - start)) s; scripts/setup.sh links Debian's 3.32 again after: rm $site/swing_mpi_simgrid.pth" >&2
