"""Import SimGrid's Python module (3.35 built by ``scripts/build_simgrid.sh``, or Debian's 3.32) on its own.

``scripts/setup.sh`` points the venv at just the module (a ``.pth`` naming the
folder of the 3.35 it built, else of a symlink to Debian's ``.so``). Where that
was not done, Debian's module is loaded straight from its file when its ABI
tag matches this Python's (adding all of ``/usr/lib/python3/dist-packages``
to the path would let the system's numpy shadow the venv's).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

__all__ = ["simgrid_available", "load_simgrid", "version_tuple", "INSTALL_HINT", "SimGridMissingError"]

DEBIAN_DIR = Path("/usr/lib/python3/dist-packages")
INSTALL_HINT = ("install SimGrid with `bash scripts/setup.sh` (it builds SimGrid 3.35 once where cmake, a C++ "
                "compiler, Boost and pybind11 headers are or root can install them, else links Debian's "
                "python3-simgrid 3.32, with apt-get as root)")


class SimGridMissingError(ImportError):
    """SimGrid's Python module cannot be imported here."""


def version_tuple(text: str) -> tuple[int, int]:
    """``(major, minor)`` of a SimGrid version's text (``"3.35.0"``, ``"SimGrid 3.32.0"``); ``(0, 0)`` if none."""
    try:
        major, minor = text.split()[-1].split(".")[:2]
        return int(major), int(minor)
    except (IndexError, ValueError):
        return (0, 0)


def _debian_module() -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        f = DEBIAN_DIR / f"simgrid{suffix}"
        if f.is_file():
            return f
    return None


def _quiet_import(load):  # the module prints an INFO line on import, straight to fd 2
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            return load()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def load_simgrid() -> ModuleType:
    """Import and return the ``simgrid`` module; :class:`SimGridMissingError` says how to install it."""
    if "simgrid" in sys.modules:
        return sys.modules["simgrid"]
    if importlib.util.find_spec("simgrid") is not None:
        return _quiet_import(lambda: importlib.import_module("simgrid"))
    f = _debian_module()
    if f is None:
        debs = sorted(DEBIAN_DIR.glob("simgrid.*.so")) if DEBIAN_DIR.is_dir() else []
        why = (f"{', '.join(d.name for d in debs)} is built for another Python than this "
               f"{sys.version_info.major}.{sys.version_info.minor}" if debs else "no module `simgrid` here")
        raise SimGridMissingError(f"SimGrid is not available: {why}; {INSTALL_HINT}")
    spec = importlib.util.spec_from_file_location("simgrid", f)
    assert spec is not None and spec.loader is not None

    def load() -> ModuleType:
        mod = importlib.util.module_from_spec(spec)
        sys.modules["simgrid"] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        return mod

    try:
        return _quiet_import(load)
    except ImportError as e:
        sys.modules.pop("simgrid", None)
        raise SimGridMissingError(f"SimGrid is not available: {e}; {INSTALL_HINT}") from None


@lru_cache(maxsize=1)
def simgrid_available() -> tuple[bool, str]:
    """Return ``(True, version)`` if SimGrid imports here, else ``(False, why and how to install it)``.

    Checked once, in a child process: importing SimGrid sets process-wide
    state (one engine per process), which the parent keeps clear of.
    """
    import subprocess

    code = ("import sys; from swing_mpi.netsim.sgload import load_simgrid; m = load_simgrid(); "
            "print(getattr(m, 'simgrid_version', '?'))")
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"cannot check SimGrid: {e}"
    if r.returncode == 0:
        return True, f"SimGrid {r.stdout.strip()}"
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    return False, (lines[-1].split(": ", 1)[-1] if lines else f"SimGrid import failed; {INSTALL_HINT}")
