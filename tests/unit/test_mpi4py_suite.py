"""scripts/mpi4py_suite.py without MPI or network: extraction, verdicts, grouping."""

from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mpi4py_suite", ROOT / "scripts" / "mpi4py_suite.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def _sdist(tmp_path: Path, files: dict[str, str]) -> Path:
    path = tmp_path / "mpi4py-9.9.9.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"mpi4py-9.9.9/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_extract_takes_the_modules_and_what_they_import(tmp_path):
    sdist = _sdist(tmp_path, {
        "test/test_cco_buf.py": "import arrayimpl\nimport mpiunittest as unittest\nfrom mpi4py import MPI\n",
        "test/mpiunittest.py": "import unittest\nfrom mpitestutil import import_MPI\n",
        "test/mpitestutil.py": "import os\n",
        "test/arrayimpl.py": "try:\n    import dlpackimpl as dlpack\nexcept ImportError:\n    pass\n",
        "test/dlpackimpl.py": "import ctypes\n",
        "test/test_unrelated.py": "import mpiunittest\n",
        "src/mpi4py/__init__.py": "",
    })
    dest = tmp_path / "out"
    dest.mkdir()
    got = suite.extract_tests(sdist, dest, ["test_cco_buf"])
    assert got == ["arrayimpl", "dlpackimpl", "mpitestutil", "mpiunittest", "test_cco_buf"]
    assert sorted(p.name for p in dest.iterdir()) == [g + ".py" for g in got]
    assert (dest / "mpitestutil.py").read_text() == "import os\n"


def test_extract_refuses_a_missing_module(tmp_path):
    sdist = _sdist(tmp_path, {"test/mpiunittest.py": ""})
    with pytest.raises(SystemExit, match="test_cco_buf"):
        suite.extract_tests(sdist, tmp_path, ["test_cco_buf"])


def test_fetch_prefers_the_given_sdist_then_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(suite.subprocess, "run", lambda *a, **k: pytest.fail("no download expected"))
    assert suite.fetch_sdist("4.1.2", tmp_path, "/x/given.tar.gz") == Path("/x/given.tar.gz")
    cached = tmp_path / "mpi4py-4.1.2.tar.gz"
    cached.write_bytes(b"")
    assert suite.fetch_sdist("4.1.2", tmp_path, None) == cached


def _run(*ranks):
    return {"ranks": list(ranks)}


def _rank(**results):
    return {"results": {k: tuple(v) for k, v in results.items()}, "calls": 1}


def test_judge_needs_every_rank():
    run = _run(_rank(a=("passed", ""), b=("passed", ""), c=("skipped", "why"), d=("passed", "")),
               _rank(a=("passed", ""), b=("failed", "AssertionError: 3 != 4"), c=("skipped", "why"),
                     d=("error", "TypeError: x")))
    outcome, detail = suite.judge(run)
    assert outcome == {"a": "passed", "b": "failed", "c": "skipped", "d": "failed"}
    assert detail["b"] == "rank 1: failed: AssertionError: 3 != 4"
    assert detail["d"] == "rank 1: error: TypeError: x"
    assert suite.judge(_run(_rank(a=("passed", "")), None)) == ({}, {})


def test_failures_group_by_message_with_compact_ids():
    msg = "error: TypeError: recvbuf: X does not support the buffer protocol"
    failures = {
        ("test_cco_buf.TestCCOBufWorld.testAllreduce[DLPackArray]", msg + " [test_cco_buf.py:149: a]"):
            ["-n 1 auto", "-n 2 auto"],
        ("test_cco_buf.TestCCOBufSelf.testAllreduce[DLPackArray]", msg + " [test_cco_buf.py:449: b]"):
            ["-n 1 auto", "-n 2 auto"],
        ("test_msgzero.TestMessageZeroSelf.testReductions", "error: ValueError: None"):
            ["-n 1 swing-bw"],
    }
    groups = suite._group(failures)
    assert len(groups) == 2
    text, ids, sites, where = groups[1] if groups[0][0].startswith("error: ValueError") else groups[0]
    assert text == msg
    assert ids == "2: test_cco_buf.{TestCCOBufSelf,TestCCOBufWorld}.testAllreduce[DLPackArray]"
    assert sites == "test_cco_buf.py:149: a | test_cco_buf.py:449: b"
    assert where == "auto at -n 1,2"


def test_last_line_names_the_mpi4py_test_line():
    tb = ('Traceback (most recent call last):\n'
          '  File "/tmp/t/test/test_cco_buf.py", line 149, in testAllreduce\n'
          '    self.COMM.Allreduce(sbuf.as_mpi(), rbuf.as_mpi(), op)\n'
          '  File "/work/swing_mpi/buffers.py", line 90, in parse_buffer\n'
          '    raise TypeError("no")\n'
          'TypeError: no\n')
    assert suite._last_line(tb, "/tmp/t/test") == \
        "TypeError: no [test_cco_buf.py:149: self.COMM.Allreduce(sbuf.as_mpi(), rbuf.as_mpi(), op)]"
    assert suite._normalise("rank 3: error: at 0x7f00ab") == "error: at 0x…"
