"""Shared fixtures.

The suite has four parts:

* ``tests/unit``: no MPI launch (pure Python, plus mpi4py on one process at most);
* ``tests/mpi``: run under ``mpiexec -n N python -m mpi4py -m pytest --with-mpi``;
* ``tests/launch``: plain pytest that launches its own small ``mpiexec`` jobs (environment
  variables read at import, errors and hangs on one rank) through the :func:`launch` fixture;
* ``tests/lab``: end to end on the emulated torus (root and network namespaces).

``scripts/run_tests.py`` runs unit, launch and lab tests in one plain pytest and the MPI tests
once per size. Nothing here imports mpi4py: the fixtures work under either MPI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_PASS_THROUGH = ("OMPI_", "PRTE_", "PMIX_", "MPICH_", "HYDRA_", "FI_", "UCX_")
"""Launcher settings kept in a launched job's otherwise minimal environment (Open MPI's
permission to run as root and to oversubscribe, MPICH's and the fabrics' settings)."""


def _find_mpiexec() -> Path | None:
    from swing_mpi.lab import MpiexecNotFoundError, find_mpiexec

    try:
        return Path(find_mpiexec())
    except MpiexecNotFoundError:
        return None


@pytest.fixture(scope="session")
def mpiexec() -> Path:
    """Return the ``mpiexec`` next to this Python (the venv's MPI wheel), else the one on PATH; skip if none."""
    found = _find_mpiexec()
    if found is None:
        pytest.skip("no mpiexec next to this Python nor on PATH")
    return found


def job_env(**extra: str) -> dict[str, str]:
    """Return a minimal environment for a launched job: PATH, HOME, launcher settings, ``extra``.

    ``SWING_MPI_*`` variables of the calling environment are left out, so a test sets exactly the
    ones it means; ``MPIEXEC_TIMEOUT`` (MPICH and Open MPI both honour it) defaults to 60 s.
    """
    env = {"PATH": str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin",
           "HOME": os.environ.get("HOME", "/tmp"), "MPIEXEC_TIMEOUT": "60",
           "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    env.update({k: v for k, v in os.environ.items() if k.startswith(_PASS_THROUGH)})
    env.update(extra)
    return env


Launch = Callable[..., subprocess.CompletedProcess]


_STDERR_TO_FILE = """\
import os as _os
_rank = next(_os.environ[v] for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK") if v in _os.environ)
_os.dup2(_os.open(f"stderr.{_rank}", _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC), 2)
"""


@pytest.fixture
def launch(mpiexec: Path, tmp_path: Path) -> Launch:
    """Run a Python program on ``n`` ranks under ``python -m mpi4py``; return the finished process.

    ``launch(program, n, *args, env={...}, timeout=120, stderr_files=False, mpiexec_args=())``: ``program`` is
    dedented and written to a file (``mpiexec_args`` go to the launcher before ``-n``); stdout and
    stderr come back together in ``.stdout``.
    ``timeout`` bounds the whole launch from here as well (``MPIEXEC_TIMEOUT`` bounds it inside the
    launcher). With ``stderr_files``, each rank writes its stderr to ``stderr.RANK`` instead, and
    ``.stderr`` holds them all in rank order: for a job that aborts, whose output the launcher
    forwards asynchronously and may drop when the abort tears the job down (seen in CI: none of
    it arrived), while a write to a file is done before the abort begins.
    """
    def run(program: str, n: int, *args: str, env: dict[str, str] | None = None,
            timeout: float = 120, stderr_files: bool = False,
            mpiexec_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        script = tmp_path / "job.py"
        script.write_text((_STDERR_TO_FILE if stderr_files else "") + textwrap.dedent(program))
        cmd = [str(mpiexec), *mpiexec_args, "-n", str(n), sys.executable, "-m", "mpi4py", str(script), *args]
        r = subprocess.run(cmd, env=job_env(**(env or {})), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout, cwd=tmp_path)
        if stderr_files:
            files = sorted(tmp_path.glob("stderr.*"), key=lambda f: int(f.suffix[1:]))
            r.stderr = "".join(f.read_text() for f in files)
        return r

    return run


@pytest.fixture(autouse=True)
def _settings_from_the_environment():
    """Read ``swing_mpi.rc`` from the environment again after each test (tests that set variables reload it)."""
    yield
    from swing_mpi.config import rc

    rc.reload()
