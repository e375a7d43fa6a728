#!/usr/bin/env python3
"""Run the whole test suite: unit, launcher and lab tests, then the MPI tests at 13 sizes from 1 to 16.

``tests/unit`` runs as two plain pytest processes at once (:data:`UNIT_GROUPS`), then
``tests/launch`` (tests that start their own small ``mpiexec`` jobs) and ``tests/lab`` (MPICH
only: the lab drives hydra's options and MPICH's TCP transport) in one more. Each MPI size is
its own ``mpiexec -n N python -m mpi4py -m pytest --with-mpi``
launch with ``MPIEXEC_TIMEOUT`` set, so a deadlock fails that size quickly
instead of hanging; ``python -m mpi4py`` aborts all ranks on an uncaught
exception. Rank 0's output is shown; the other ranks' logs are shown only
when a size fails. The last line is ``N passed, N failed``.

Either MPI from PyPI works: the venv's ``mpiexec`` decides. Under Open MPI, running as root
and more ranks than cores are allowed through its environment variables (unless already set),
as ``scripts/mpi_env.sh`` does; both MPIs honour ``MPIEXEC_TIMEOUT``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 15, 16]  # 9: 3x3, the smallest power-of-three torus (Trivance)
"""11: the ring of a prime side that runs the two-sided circulant; 15: staged programs."""
WHOLE_SIZES = {1, 2, 3, 4, 5}
"""Sizes that run every file of tests/mpi; the others run :data:`ALGORITHM_FILES` only, to keep CI short."""
ALGORITHM_FILES = ("tests/mpi/test_allreduce.py", "tests/mpi/test_executor_paths.py", "tests/mpi/test_collectives.py",
                   "tests/mpi/test_fuzz.py", "tests/mpi/test_mismatch.py", "tests/mpi/test_nodes.py")
"""Every algorithm, collective and executor path against MPI, random cases, ranks that disagree, and nodes of
several ranks."""
UNIT_GROUPS = (("tests/unit/test_schedule.py", "tests/unit/test_hamiltonian.py"), ("tests/unit",))
"""The unit tests run as two pytest processes at once (about equal halves; the second skips the first's
files); tests/launch and tests/lab run after them, alone, since they time their own jobs."""


OPEN_MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
    "OMPI_MCA_mpi_yield_when_idle": "1",
}
"""Open MPI's permission to run as root and oversubscribed; ranks yield while polling."""


def find_mpiexec() -> str:
    """Return ``mpiexec`` next to this Python (the MPI wheel's), else on PATH."""
    from swing_mpi.lab import MpiexecNotFoundError
    from swing_mpi.lab import find_mpiexec as _find

    try:
        return _find()
    except MpiexecNotFoundError as e:
        sys.exit(f"run_tests: {e}")


def mpi_name(mpiexec: str) -> str:
    """Return the first line of ``mpiexec --version`` (names the MPI: MPICH's hydra or Open MPI)."""
    try:
        r = subprocess.run([mpiexec, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    lines = [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    return " ".join(lines[:2]) if lines and "HYDRA" in lines[0] else (lines[0] if lines else "unknown")


def counts(text: str) -> tuple[int, int]:
    """Return (passed, failed+errors) from pytest's closing line."""
    last = [ln for ln in text.splitlines() if re.search(r"\d+ (passed|failed|error)", ln)]
    if not last:
        return 0, 0
    line = last[-1]
    get = lambda w: sum(int(m) for m in re.findall(rf"(\d+) {w}", line))  # noqa: E731
    return get("passed"), get("failed") + get("error")


def pytest_parts(parts: list[list[str]], env: dict[str, str], extra: list[str]) -> list[
        tuple[list[str], subprocess.CompletedProcess[str]]]:
    """Run one plain pytest per argument list, all at once; return each list with its finished process."""
    running = []
    for part in parts:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *part, *extra]
        log = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty run never blocks on a full pipe
        running.append((part, cmd, log, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                         text=True)))
    done = []
    for part, cmd, log, proc in running:
        proc.wait()
        log.seek(0)
        done.append((part, subprocess.CompletedProcess(cmd, proc.returncode, log.read())))
        log.close()
    return done


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="MPI sizes, comma separated")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("MPIEXEC_TIMEOUT", 300)),
                    help="seconds per mpiexec launch (MPIEXEC_TIMEOUT)")
    ap.add_argument("--no-unit", action="store_true", help="skip the plain pytest (unit, launcher and lab tests)")
    ap.add_argument("--mpi-dependent", action="store_true",
                    help="only the tests whose outcome depends on the MPI library (tests/launch, tests/mpi): "
                         "CI runs tests/unit and tests/lab once, with MPICH")
    ap.add_argument("--no-mpi", action="store_true", help="skip the MPI tests")
    ap.add_argument("--mpi4py-suite", action="store_true",
                    help="also run mpi4py's own Allreduce tests against swing_mpi at 1-4 ranks "
                         "(scripts/mpi4py_suite.py; downloads the mpi4py sdist once)")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args()
    os.chdir(ROOT)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    mpiexec = find_mpiexec()
    name = mpi_name(mpiexec)
    if "Open MPI" in name:
        for k, v in OPEN_MPI_ENV.items():
            env.setdefault(k, v)
    print(f"== MPI: {name} ({mpiexec})", flush=True)
    # a fixed fuzz seed keeps CI reproducible; set SWING_MPI_FUZZ_SEED to explore others
    env.setdefault("SWING_MPI_FUZZ_SEED", "20261130")
    passed = failed = 0
    t0 = time.time()
    if not args.no_unit:
        dirs = ["tests/launch"] if args.mpi_dependent else ["tests/launch", "tests/lab"]
        if "Open MPI" in name and "tests/lab" in dirs:
            dirs.remove("tests/lab")
            print("== tests/lab left out: the emulated lab runs MPICH (hydra, TCP netmod)", flush=True)
        runs = [] if args.mpi_dependent else [list(g) for g in UNIT_GROUPS]
        for f in runs[0] if runs else ():
            runs[-1] += ["--ignore", f]
        if runs:
            print(f"== tests/unit in {len(runs)} pytest processes at once (a few minutes); "
                  "their output follows when all have ended", flush=True)
        for part, out in pytest_parts(runs, env, args.pytest_args) + pytest_parts([dirs], env, args.pytest_args):
            shown = [a for i, a in enumerate(part) if a.startswith("tests/") and part[i - 1] != "--ignore"]
            left = [Path(a).name for i, a in enumerate(part) if part[i - 1] == "--ignore"]
            print(f"== {', '.join(shown)}{' except ' + ', '.join(left) if left else ''} (plain pytest)", flush=True)
            print(out.stdout[-6000:], flush=True)
            p, f = counts(out.stdout)
            passed += p
            failed += f + (1 if out.returncode not in (0, 5) and not f else 0)
    if not args.no_mpi:
        logs = Path(tempfile.mkdtemp(prefix="swing-mpi-tests-"))
        for n in [int(x) for x in args.sizes.split(",") if x]:
            started = time.time()
            cmd = [mpiexec, "-n", str(n), sys.executable, str(ROOT / "scripts" / "rank_logs.py"), str(logs),
                   sys.executable, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-q", "-p", "no:cacheprovider",
                   *(("tests/mpi",) if n in WHOLE_SIZES else ALGORITHM_FILES), *args.pytest_args]
            try:
                r = subprocess.run(cmd, env=dict(env, MPIEXEC_TIMEOUT=str(args.timeout)),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=args.timeout + 60)
            except subprocess.TimeoutExpired as e:  # the launcher ignored MPIEXEC_TIMEOUT
                out_text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                r = subprocess.CompletedProcess(cmd, 124, out_text + "\nrun_tests: killed after the timeout\n")
            out = (logs / "rank0.log").read_text() if (logs / "rank0.log").exists() else ""
            p, f = counts(out)
            bad = r.returncode != 0 or f or not p
            print(f"== mpiexec -n {n}: {p} passed, {f} failed, rc={r.returncode}, "
                  f"{time.time() - started:.0f} s", flush=True)
            if bad:
                print(out[-8000:])
                print(r.stdout[-3000:])
                for log in sorted(logs.glob("rank*.log"))[1:4]:
                    print(f"--- {log.name}\n{log.read_text()[-3000:]}")
                failed += max(f, 1)
            passed += p
        shutil.rmtree(logs, ignore_errors=True)
    if args.mpi4py_suite:
        print("== mpi4py's own Allreduce tests (scripts/mpi4py_suite.py)", flush=True)
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "mpi4py_suite.py"), "--sizes", "1,2,3,4",
                            "--timeout", str(args.timeout)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(r.stdout[-8000:], flush=True)
        p, f = counts(r.stdout)
        passed += p
        failed += f + (1 if r.returncode and not f else 0)
    print(f"== all tests in {time.time() - t0:.0f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
