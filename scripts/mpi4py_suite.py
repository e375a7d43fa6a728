#!/usr/bin/env python3
"""Run mpi4py's own tests of our collectives against ``swing_mpi.Intracomm`` (optional, not in CI).

The sdist of the *installed* mpi4py version is fetched at run time (``pip
download``; cached; nothing of it is committed), the test modules below and
what they import are extracted to a temporary folder, and each
``mpiexec -n N`` launch runs the selected test methods with every test
class's communicator replaced by ours:

* ``COMM = MPI.COMM_WORLD`` / ``COMM_SELF`` class attributes become
  ``swing_mpi.Intracomm(MPI.COMM_WORLD)`` / ``swing_mpi.Intracomm(MPI.COMM_SELF)``;
* the test module's ``MPI`` name is replaced by a copy of ``mpi4py.MPI``
  whose ``COMM_WORLD``/``COMM_SELF`` are ours, so ``setUp``'s
  ``MPI.COMM_WORLD.Dup()`` (the ``*Dup`` classes) and ``test_op``'s
  ``for comm in [MPI.COMM_SELF, MPI.COMM_WORLD]`` use ours too.

Selected tests (``--all-methods``: every method of those classes):

====================  ===============  ===============================================
module                method           what reaches swing_mpi
====================  ===============  ===============================================
test_cco_buf          (a)              ``Allreduce``, ``Reduce_scatter(_block)``, ``Allgather``
test_cco_nb_buf       (a)              their ``I…`` forms, ``.Wait()``
test_cco_pr_buf       (a)              their ``…_init`` forms + Start/Wait/Free
test_msgzero          testReductions   ``Allreduce([None, MPI.INT], [None, MPI.INT])``
test_op               testCreate       ``Allreduce`` with user ops (commutative or not)
====================  ===============  ===============================================

(a) testAllreduce, testReduceScatter, testReduceScatterBlock, testAllgather, each out of
place and with ``IN_PLACE`` (the ``Inplace`` classes). An algorithm without a
reduce-scatter (``swing-lat``, ``recdoub``) leaves those collectives to ``auto``.

Tests that loop over ``arrayimpl``'s array backends (array, numpy, DLPack,
fake-GPU ``__cuda_array_interface__``) run once per backend, so one
unsupported backend does not hide the others: ids read
``module.Class.method[backend]``. Each (size, algorithm) is one launch with
``SWING_MPI_ALGORITHM`` set and ``MPIEXEC_TIMEOUT``; ``--control`` adds
launches with mpi4py's own communicator (checks the harness). A test passes
if it passes on every rank. The last line is ``N passed, N failed``.

Usage::

    python scripts/mpi4py_suite.py --sizes 1,2,3,4
    python scripts/mpi4py_suite.py --algorithms all --sizes 2,4 --control
    python scripts/mpi4py_suite.py --ranks-per-node 2 --sizes 4,6,8   # COMM_WORLD a ring of nodes of 2
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

OURS = r"^test(Allreduce|ReduceScatter|ReduceScatterBlock|Allgather)$"
SELECT = {
    "test_cco_buf": OURS,
    "test_cco_nb_buf": OURS,
    "test_cco_pr_buf": OURS,
    "test_msgzero": r"^testReductions$",
    "test_op": r"^testCreate$",
}
DEFAULT_ALGORITHMS = "auto,swing-bw,swing-lat,recdoub"
CONTROL = "mpi4py"
"""Pseudo-algorithm: mpi4py's own communicator (the harness check)."""


# -- driver ---------------------------------------------------------------------------------

def find_mpiexec() -> str:
    """``mpiexec`` next to this Python (the ``mpich`` wheel's), else on PATH."""
    from swing_mpi.lab import MpiexecNotFoundError
    from swing_mpi.lab import find_mpiexec as _find

    try:
        return _find()
    except MpiexecNotFoundError as e:
        sys.exit(f"mpi4py_suite: {e}")


def cache_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "swing_mpi"


def fetch_sdist(version: str, cache: Path, given: str | None) -> Path:
    """Return the sdist of mpi4py ``version``: ``given``, the cached copy, or ``pip download``."""
    if given:
        return Path(given)
    cached = cache / f"mpi4py-{version}.tar.gz"
    if cached.exists():
        return cached
    with tempfile.TemporaryDirectory(prefix="mpi4py-sdist-") as tmp:
        # --no-binary mpi4py (not :all:): the sdist of mpi4py itself, while the build
        # requirements pip installs to read its metadata (setuptools, Cython) come as
        # wheels; with :all: pip compiles Cython from source first (many minutes).
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "mpi4py",
               f"mpi4py=={version}", "-d", tmp]
        print(f"== fetching the mpi4py {version} sdist: {' '.join(cmd[2:])}", flush=True)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        got = sorted(Path(tmp).glob("mpi4py-*.tar.gz"))
        if r.returncode or not got:
            print(r.stdout[-3000:])
            sys.exit(f"mpi4py_suite: could not download the mpi4py {version} sdist "
                     f"(pip exit {r.returncode}); pass one with --sdist")
        cache.mkdir(parents=True, exist_ok=True)
        shutil.copy(got[0], cached)
    return cached


def _imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def extract_tests(sdist: Path, dest: Path, modules) -> list[str]:
    """Extract ``test/<module>.py`` and the test-folder modules they import (transitively)."""
    with tarfile.open(sdist) as tar:
        files = {}
        for m in tar.getmembers():
            parts = m.name.split("/")
            if m.isfile() and len(parts) == 3 and parts[1] == "test" and parts[2].endswith(".py"):
                files[parts[2][:-3]] = m
        missing = [m for m in modules if m not in files]
        if missing:
            sys.exit(f"mpi4py_suite: {sdist.name} has no test/{missing[0]}.py")
        todo, done = list(modules), []
        while todo:
            name = todo.pop()
            if name in done:
                continue
            done.append(name)
            src = tar.extractfile(files[name]).read()
            (dest / f"{name}.py").write_bytes(src)
            todo.extend(n for n in _imports(src.decode()) if n in files and n not in done)
    return sorted(done)


def run_one(mpiexec: str, n: int, algorithm: str, testdir: Path, outdir: Path, args) -> dict:
    for f in outdir.glob("rank*.json"):
        f.unlink()
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(args.timeout), PYTHONDONTWRITEBYTECODE="1")
    env.pop("SWING_MPI_ALGORITHM", None)
    env.pop("SWING_MPI_RANKS_PER_NODE", None)
    if args.ranks_per_node and algorithm != CONTROL:
        env["SWING_MPI_RANKS_PER_NODE"] = str(args.ranks_per_node)
    if algorithm != CONTROL:
        env["SWING_MPI_ALGORITHM"] = algorithm
    cmd = [mpiexec, "-n", str(n), sys.executable, "-m", "mpi4py", str(Path(__file__).resolve()),
           "--worker", str(testdir), str(outdir), "--comm", "mpi4py" if algorithm == CONTROL else "swing"]
    if args.all_methods:
        cmd.append("--all-methods")
    t0 = time.time()
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ranks = []
    for k in range(n):
        f = outdir / f"rank{k}.json"
        ranks.append(json.loads(f.read_text()) if f.exists() else None)
    return {"n": n, "algorithm": algorithm, "rc": r.returncode, "output": r.stdout,
            "ranks": ranks, "seconds": time.time() - t0}


def judge(run: dict) -> tuple[dict, dict]:
    """(outcome per test id, detail per failed test id) over all ranks of one launch."""
    outcome, detail = {}, {}
    if any(rk is None for rk in run["ranks"]):
        return outcome, detail
    for tid in run["ranks"][0]["results"]:
        states = [rk["results"].get(tid, ("missing", ""))[0] for rk in run["ranks"]]
        if all(s == "skipped" for s in states):
            outcome[tid] = "skipped"
            detail[tid] = run["ranks"][0]["results"][tid][1]
        elif all(s == "passed" for s in states):
            outcome[tid] = "passed"
        else:
            outcome[tid] = "failed"
            for k, rk in enumerate(run["ranks"]):
                s, msg = rk["results"].get(tid, ("missing", ""))
                if s not in ("passed", "skipped"):
                    detail[tid] = f"rank {k}: {s}: {msg}"
                    break
    return outcome, detail


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,2,3,4", help="mpiexec sizes, comma separated (default 1,2,3,4)")
    ap.add_argument("--algorithms", default=DEFAULT_ALGORITHMS,
                    help=f"SWING_MPI_ALGORITHM values, comma separated, or 'all' (default {DEFAULT_ALGORITHMS})")
    ap.add_argument("--ranks-per-node", type=int, default=0, metavar="K",
                    help="make each K consecutive ranks a node and COMM_WORLD's dims the ring of its nodes "
                         "(sizes K does not divide are left out)")
    ap.add_argument("--control", action="store_true",
                    help="also run with mpi4py's own communicator (checks the harness)")
    ap.add_argument("--all-methods", action="store_true",
                    help="every method of the selected test classes, not only the Allreduce ones")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("MPIEXEC_TIMEOUT", 300)),
                    help="seconds per mpiexec launch (MPIEXEC_TIMEOUT)")
    ap.add_argument("--sdist", help="use this mpi4py sdist instead of downloading one")
    ap.add_argument("--cache-dir", help="where the downloaded sdist is kept (default ~/.cache/swing_mpi)")
    ap.add_argument("--keep", action="store_true", help="keep the extracted tests and per-rank results")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failing launch's output")
    ap.add_argument("--worker", nargs=2, metavar=("TESTDIR", "OUTDIR"), help=argparse.SUPPRESS)
    ap.add_argument("--comm", default="swing", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(Path(args.worker[0]), Path(args.worker[1]), args.comm, args.all_methods)

    import mpi4py

    from swing_mpi.api import algorithm_names
    algos = algorithm_names() if args.algorithms == "all" else [a for a in args.algorithms.split(",") if a]
    for a in algos:
        if a not in algorithm_names():
            sys.exit(f"mpi4py_suite: unknown algorithm {a!r}; known: {', '.join(algorithm_names())}")
    algos = ([CONTROL] if args.control else []) + list(algos)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.ranks_per_node:
        left = [n for n in sizes if n % args.ranks_per_node or n == args.ranks_per_node and n == 1]
        sizes = [n for n in sizes if n not in left]
        if left:
            print(f"== --ranks-per-node {args.ranks_per_node}: sizes {left} left out (not whole nodes)", flush=True)
    version = mpi4py.__version__
    sdist = fetch_sdist(version, cache_dir(args.cache_dir), args.sdist)
    work = Path(tempfile.mkdtemp(prefix="swing-mpi4py-suite-"))
    testdir, outdir = work / "test", work / "out"
    testdir.mkdir()
    outdir.mkdir()
    files = extract_tests(sdist, testdir, list(SELECT))
    print(f"== mpi4py {version} tests from {sdist.name}: {', '.join(f + '.py' for f in files)}", flush=True)
    mpiexec = find_mpiexec()
    t0 = time.time()
    total = Counter()
    failures: dict[tuple[str, str], list[str]] = {}
    skips: dict[tuple[str, str], int] = {}
    broken = 0
    for algorithm in algos:
        for n in sizes:
            run = run_one(mpiexec, n, algorithm, testdir, outdir, args)
            outcome, detail = judge(run)
            c = Counter(outcome.values())
            calls = sum((rk or {}).get("calls", 0) for rk in run["ranks"][:1])
            label = "mpi4py's own COMM" if algorithm == CONTROL else f"SWING_MPI_ALGORITHM={algorithm}"
            status = ""
            if run["rc"] != 0 or not outcome:
                status = f" — launch failed (rc={run['rc']}{', timeout' if run['rc'] in (124, 137, 255) else ''})"
                broken += 1
            elif algorithm != CONTROL and not calls and c["passed"]:
                status = " — swing_mpi was never called: the patch did not take"
                broken += 1
            print(f"== -n {n} {label}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped, "
                  f"{calls} swing_mpi calls on rank 0, {run['seconds']:.0f} s{status}", flush=True)
            if status or (args.verbose and c["failed"]):
                print(run["output"][-4000:])
            total.update(c)
            where = f"-n {n} {algorithm}"
            for tid, st in outcome.items():
                if st == "failed":
                    failures.setdefault((tid, _normalise(detail[tid])), []).append(where)
                elif st == "skipped":
                    skips[(tid, detail.get(tid, ""))] = skips.get((tid, detail.get(tid, "")), 0) + 1
    if failures:
        print("\n== failures, grouped by message")
        for msg, tids, sites, where in _group(failures):
            print(f"FAILED {msg}\n    tests {tids}\n    called from: {sites or '?'}\n    launches: {where}")
    if skips:
        print("\n== skipped")
        for (tid, why), k in sorted(skips.items()):
            print(f"SKIPPED {tid}: {why} ({k} launches)")
    if args.keep:
        print(f"\n== kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n== {len(algos)} algorithm(s) x {len(sizes)} size(s) in {time.time() - t0:.0f} s"
          + (f"; {broken} launch(es) broken" if broken else ""))
    print(f"{total['skipped']} skipped")
    print(f"{total['passed']} passed, {total['failed'] + broken} failed")
    return 1 if total["failed"] or broken else 0


def _normalise(msg: str) -> str:
    """Return a failure message without the rank and addresses, so equal failures group together."""
    msg = re.sub(r"^rank \d+: ", "", msg)
    return re.sub(r"0x[0-9a-f]+", "0x…", msg)


def _group(failures: dict[tuple[str, str], list[str]]) -> list[tuple[str, str, str, str]]:
    """(message, compact test ids, call sites, launches) per distinct message and set of launches."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for (tid, msg), runs in failures.items():
        text, _, site = msg.partition(" [")
        groups.setdefault((text, _where(runs)), []).append((tid, site.rstrip("]")))
    out = []
    for (msg, where), items in sorted(groups.items()):
        by_meth: dict[tuple[str, str], tuple[set, set]] = {}
        for tid, _ in items:
            m = re.fullmatch(r"([^.]+)\.([^.]+)\.([^.\[]+)(?:\[(.+)\])?", tid)
            mod, cls, meth, backend = m.groups()
            classes, backends = by_meth.setdefault((mod, meth), (set(), set()))
            classes.add(cls)
            if backend:
                backends.add(backend)
        parts = []
        for (mod, meth), (classes, backends) in sorted(by_meth.items()):
            cl = next(iter(classes)) if len(classes) == 1 else "{" + ",".join(sorted(classes)) + "}"
            parts.append(f"{mod}.{cl}.{meth}" + (f"[{','.join(sorted(backends))}]" if backends else ""))
        sites = sorted({site for _, site in items if site})
        out.append((msg, f"{len(items)}: " + "; ".join(parts), " | ".join(sites), where))
    return out


def _where(runs: list[str]) -> str:
    by_alg: dict[str, list[str]] = {}
    for w in runs:
        n, alg = w.split(" ", 2)[1:]
        by_alg.setdefault(alg, []).append(n)
    return "; ".join(f"{alg} at -n {','.join(ns)}" for alg, ns in by_alg.items())


# -- worker (one rank of one launch) --------------------------------------------------------

def worker(testdir: Path, outdir: Path, comm_kind: str, all_methods: bool) -> int:
    import types
    import unittest as std_unittest

    from mpi4py import MPI

    sys.path.insert(0, str(testdir))
    import arrayimpl  # noqa: E402  (from the extracted sdist)

    import swing_mpi
    from swing_mpi import api, collectives

    calls = Counter()
    if comm_kind == "swing":
        for mod, names in ((api, ("allreduce", "iallreduce", "allreduce_init")),
                           (collectives, collectives.__all__)):
            for name in names:
                fn = getattr(mod, name)
                if name == "supports":
                    continue

                def counted(*a, _fn=fn, _name=name, **k):
                    calls[_name] += 1
                    return _fn(*a, **k)
                setattr(mod, name, counted)  # Intracomm's methods look these names up at call time
        k = swing_mpi.rc.ranks_per_node  # --ranks-per-node: COMM_WORLD's dims are the ring of its nodes
        world = swing_mpi.Intracomm(MPI.COMM_WORLD, dims=None if not k else str(MPI.COMM_WORLD.Get_size() // k))
        self_ = swing_mpi.Intracomm(MPI.COMM_SELF)
        proxy = types.ModuleType(MPI.__name__)
        proxy.__dict__.update(vars(MPI))
        proxy.COMM_WORLD = world
        proxy.COMM_SELF = self_

    backends = list(arrayimpl.ArrayBackends)
    results: dict[str, tuple[str, str]] = {}
    rank = MPI.COMM_WORLD.Get_rank()

    class Result(std_unittest.TestResult):
        def __init__(self, tid: str) -> None:
            super().__init__()
            self.tid = tid

        def _put(self, state: str, msg: str) -> None:
            if results.get(self.tid, ("passed",))[0] in ("passed", "skipped"):
                results[self.tid] = (state, msg)
            if state != "skipped":  # now, in the launch's output: a rank that fails alone may hang the rest
                print(f"rank {rank}: {self.tid}: {state}: {msg}", file=sys.stderr, flush=True)

        def addSuccess(self, test):  # noqa: N802
            results.setdefault(self.tid, ("passed", ""))

        def addSkip(self, test, reason):  # noqa: N802
            self._put("skipped", reason)

        def addFailure(self, test, err):  # noqa: N802
            self._put("failed", _last_line(self._exc_info_to_string(err, test), str(testdir)))

        def addError(self, test, err):  # noqa: N802
            self._put("error", _last_line(self._exc_info_to_string(err, test), str(testdir)))

        def addExpectedFailure(self, test, err):  # noqa: N802
            results.setdefault(self.tid, ("passed", ""))

        def addUnexpectedSuccess(self, test):  # noqa: N802
            self._put("failed", "unexpected success")

        def addSubTest(self, test, subtest, err):  # noqa: N802
            if err is not None:
                self._put("failed", f"{subtest._subDescription()}: "
                          + _last_line(self._exc_info_to_string(err, test), str(testdir)))

    for modname, pattern in SELECT.items():
        mod = __import__(modname)
        if comm_kind == "swing":
            mod.MPI = proxy
        uses_arrays = "arrayimpl" in vars(mod)
        for cls in [v for v in vars(mod).values()
                    if isinstance(v, type) and issubclass(v, std_unittest.TestCase) and v.__module__ == modname]:
            if comm_kind == "swing" and "COMM" in vars(cls):
                if cls.COMM is MPI.COMM_WORLD:
                    cls.COMM = world
                elif cls.COMM is MPI.COMM_SELF:
                    cls.COMM = self_
            names = std_unittest.TestLoader().getTestCaseNames(cls)
            for meth in names:
                if not all_methods and not re.search(pattern, meth):
                    continue
                for backend in (backends if uses_arrays else [None]):
                    if backend is not None:
                        arrayimpl.ArrayBackends[:] = [backend]
                    tid = f"{modname}.{cls.__name__}.{meth}"
                    if backend is not None:
                        tid += f"[{backend.__name__}]"
                    cls(meth).run(Result(tid))
                arrayimpl.ArrayBackends[:] = backends
    (outdir / f"rank{rank}.json").write_text(json.dumps({"results": results,
                                                         "calls": sum(calls.values())}))
    MPI.COMM_WORLD.Barrier()
    return 0


def _last_line(tb: str, testdir: str) -> str:
    """Return the exception line of a traceback, and the line of the mpi4py test that led to it."""
    lines = [ln for ln in tb.strip().splitlines() if ln.strip()]
    where = ""
    for i, ln in enumerate(lines[:-1]):
        m = re.match(r'\s*File "(.+)", line (\d+)', ln)
        if m and m.group(1).startswith(testdir) and not lines[i + 1].lstrip().startswith("File "):
            where = f" [{Path(m.group(1)).name}:{m.group(2)}: {lines[i + 1].strip()}]"
    return (lines[-1] if lines else "") + where


if __name__ == "__main__":
    sys.exit(main())
