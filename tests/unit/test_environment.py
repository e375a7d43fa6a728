"""``$SWING_MPI_ALGORITHM`` and ``$SWING_MPI_DIMS`` are read once, at import (jobs launched from here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

MPIEXEC = Path(sys.executable).parent / "mpiexec"
if not MPIEXEC.exists():
    MPIEXEC = Path(shutil.which("mpiexec") or "mpiexec")

SCRIPT = textwrap.dedent("""
    import os
    import numpy as np
    from mpi4py import MPI
    import swing_mpi
    from swing_mpi import api
    comm = MPI.COMM_WORLD
    print("algorithm", api.resolve(None, comm.size, 8, MPI.SUM, MPI.DOUBLE))
    print("dims", api._dims_for(comm, None))
    os.environ["SWING_MPI_ALGORITHM"] = "bogus"   # too late: read at import
    x = np.arange(6.0)
    y = np.empty(6)
    swing_mpi.allreduce(comm, x, y)
    assert np.array_equal(y, x * comm.size)
    print("ok", flush=True)
""")


def _job(tmp_path: Path, n: int, **env: str) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    full = {"MPIEXEC_TIMEOUT": "60", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/tmp"), **env}
    return subprocess.run([str(MPIEXEC), "-n", str(n), sys.executable, "-m", "mpi4py", str(script)],
                          env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)


@pytest.mark.skipif(not MPIEXEC.exists(), reason="no mpiexec")
def test_variables_read_at_import(tmp_path):
    r = _job(tmp_path, 4, SWING_MPI_ALGORITHM="recdoub", SWING_MPI_DIMS="2x2")
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("algorithm recdoub") == 4, r.stdout
    assert r.stdout.count("dims (2, 2)") == 4, r.stdout
    assert r.stdout.count("ok") == 4, r.stdout


@pytest.mark.skipif(not MPIEXEC.exists(), reason="no mpiexec")
def test_unknown_algorithm_in_environment_is_an_error(tmp_path):
    r = _job(tmp_path, 2, SWING_MPI_ALGORITHM="bogus")
    assert r.returncode != 0
    assert "unknown algorithm 'bogus'" in r.stdout, r.stdout
