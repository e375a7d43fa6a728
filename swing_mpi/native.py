"""The compiled core (``_core.c``): building it for this venv's MPI, and loading it.

The core runs a plan's whole program (posts, waits, reductions) in one call from Python
(:mod:`swing_mpi.program`). It calls MPI itself, so it is compiled against the ``mpi.h`` of the very
library mpi4py loaded (MPICH and Open MPI differ in their handles), and linked to that library's file.
Each venv builds its own copy, into a folder of its own (``<venv>/var/swing_mpi``, or the user cache
folder where the venv is read-only), keyed by the source, the Python and the MPI library: the
MPICH and the Open MPI venvs of one checkout never share a build.

``bash scripts/setup.sh`` builds it (``python -m swing_mpi.native --build``); without a C compiler,
without ``mpi.h``, or with ``SWING_MPI_ENGINE=python``, the pure-Python executor runs every plan and
gives the same bits (the same messages, the same reductions in the same order).
A process that finds no build makes one on first use (about a second, once per venv; ranks that start
together wait for the one that builds).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from types import ModuleType
from typing import Any

from .config import rc

__all__ = ["load", "load_file", "build", "why_not", "build_dir", "mpi_library_path", "mpi_include_dir"]

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_core.c")
MODULE = "swing_mpi_core"

_state: dict[str, Any] = {}


def mpi_library_path() -> str | None:
    """Return the file of the MPI library this process loaded (after ``mpi4py.MPI``), or None."""
    from mpi4py import MPI  # noqa: F401  (loads the library)

    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path)
                if name.startswith(("libmpi.so", "libmpich.so")) and os.path.exists(path):
                    return path
    except OSError:
        return None
    return None


def _mpi_family() -> str:
    from mpi4py import MPI

    v = MPI.Get_library_version()
    return "openmpi" if "Open MPI" in v else "mpich" if "MPICH" in v else "other"


def mpi_include_dir(lib: str | None) -> str | None:
    """Return a folder holding the ``mpi.h`` of the library ``lib`` (the venv's, the library's, ``mpicc``'s)."""
    cands = [os.path.join(sys.prefix, "include")]
    if lib:
        root = os.path.dirname(os.path.dirname(os.path.realpath(lib)))
        cands += [os.path.join(root, "include"), os.path.join(os.path.dirname(os.path.dirname(lib)), "include")]
    for c in cands:
        if os.path.exists(os.path.join(c, "mpi.h")):
            return c
    for mpicc in (os.path.join(sys.prefix, "bin", "mpicc"), shutil.which("mpicc")):
        if mpicc and os.path.exists(mpicc):
            try:
                out = subprocess.run([mpicc, "-show"], capture_output=True, text=True, timeout=30).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            for word in out.split():
                if word.startswith("-I") and os.path.exists(os.path.join(word[2:], "mpi.h")):
                    return word[2:]
    return None


CFLAGS = ("-O3", "-fPIC", "-shared", "-fno-fast-math", "-ffp-contract=off", "-std=gnu99")
"""How the core is compiled (part of the build's name): no fast math, no contraction into fused multiply-adds."""
TUNE_FLAGS = ("-falign-loops=64",)
"""Tried first, left out where the compiler refuses them: the reduction loops start on a cache line (where the
layout of the rest of the file put them otherwise, one thread's float64 SUM ran 7 % slower, 1-4 MiB)."""


def _key(lib: str) -> str:
    with open(SOURCE, "rb") as f:
        src = f.read()
    what = src + os.path.realpath(lib).encode() + sys.version.encode() + " ".join(CFLAGS + TUNE_FLAGS).encode()
    h = hashlib.sha256(what).hexdigest()[:16]
    return f"{_mpi_family()}-{h}"


def build_dir() -> str:
    """Return the folder this venv's builds go to (created if missing)."""
    for d in (os.path.join(sys.prefix, "var", "swing_mpi"),
              os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "swing_mpi")):
        try:
            os.makedirs(d, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    return tempfile.gettempdir()


def _target() -> tuple[str, str] | str:
    lib = mpi_library_path()
    if lib is None:
        return "the MPI library's file is not among this process's mappings"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return lib, os.path.join(build_dir(), f"{MODULE}-{_key(lib)}{suffix}")


def build(*, quiet: bool = True) -> str:
    """Compile the core for this venv's MPI if it is not built yet; return the path of the module.

    Raises ``RuntimeError`` with the reason when it cannot (no compiler, no ``mpi.h``, a compile error).
    """
    t = _target()
    if isinstance(t, str):
        raise RuntimeError(t)
    lib, path = t
    if os.path.exists(path):
        return path
    inc = mpi_include_dir(lib)
    if inc is None:
        raise RuntimeError(f"no mpi.h found for {lib}")
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc_words = cc.split()
    if not shutil.which(cc_words[0]):
        cc_words = ["cc"]
        if not shutil.which("cc"):
            raise RuntimeError("no C compiler (cc) on PATH")
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # ranks starting together: one builds, the others wait for it
        if os.path.exists(path):
            return path
        tmp = f"{path}.{os.getpid()}.tmp"
        for tune in (TUNE_FLAGS, ()):
            cmd = [*cc_words, *CFLAGS, *tune,
                   f"-I{sysconfig.get_paths()['include']}", f"-I{inc}", SOURCE, "-o", tmp,
                   f"-L{os.path.dirname(lib)}", f"-l:{os.path.basename(lib)}", f"-Wl,-rpath,{os.path.dirname(lib)}",
                   "-lpthread"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode == 0:
                break
        if r.returncode != 0:
            raise RuntimeError(f"compiling the core failed ({' '.join(cmd)}):\n{r.stderr.strip()}")
        if not quiet and r.stderr.strip():
            print(r.stderr.strip(), file=sys.stderr)
        os.replace(tmp, path)
    return path


def load_file(path: str) -> ModuleType:
    """Import the compiled core built at ``path`` (:func:`load`'s; also another checkout's, to compare two)."""
    spec = importlib.util.spec_from_file_location(MODULE, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load() -> ModuleType | None:
    """Return the compiled core for this process's MPI, building it if needed; None where it cannot run.

    ``$SWING_MPI_ENGINE``: ``python`` never loads it; ``c`` raises where it cannot load; unset or
    ``auto`` uses it where it loads. :func:`why_not` says why it did not.
    """
    if "mod" in _state:
        return _state["mod"]
    mode = rc.engine
    mod = None
    if mode == "python":
        _state["why"] = "SWING_MPI_ENGINE=python"
    else:
        try:
            mod = load_file(build())
            from mpi4py import MPI

            if mod.abi() != _mpi_family() or mod.comm_size(MPI.COMM_WORLD.py2f()) != MPI.COMM_WORLD.Get_size():
                raise RuntimeError(f"the core was built for {mod.abi()}, this process runs {_mpi_family()}")
        except (RuntimeError, OSError, ImportError) as e:
            mod = None
            _state["why"] = str(e)
            if mode == "c":
                raise RuntimeError(f"SWING_MPI_ENGINE=c, but the compiled core cannot run here: {e}") from e
    _state["mod"] = mod
    return mod


def why_not() -> str | None:
    """Return why the compiled core is not in use (None if it is, or if nothing tried it yet)."""
    return None if _state.get("mod") is not None else _state.get("why")


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m swing_mpi.native",
                                 description="Build (or report on) the compiled core for this venv's MPI.")
    ap.add_argument("--build", action="store_true", help="compile it now if it is not built yet")
    args = ap.parse_args(argv)
    try:
        path = build(quiet=False) if args.build else _target()
    except RuntimeError as e:
        print(f"swing_mpi: no compiled core ({e}); the pure-Python engine runs every plan", file=sys.stderr)
        return 0 if args.build else 1
    mod = load()
    where = path if isinstance(path, str) else path[1]
    print(f"swing_mpi: compiled core {'ready' if mod is not None else 'not usable'}: {where}"
          + ("" if mod is not None else f" ({why_not()})"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
