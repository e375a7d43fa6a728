"""The compiled core's reduction kernels give numpy's bits, on one thread and split over several.

The pure-Python engine reduces with numpy's ufuncs; the core's C loops must give the same bits for
every op and type it claims (:func:`swing_mpi.program.kernel_for`), whatever the number of threads
and wherever the parts are cut. Skips, saying why, where the core cannot be built (no C compiler).
"""

from __future__ import annotations

import numpy as np
import pytest

from swing_mpi import native
from swing_mpi.program import kernel_for

core = native.load()
pytestmark = pytest.mark.skipif(core is None, reason=f"no compiled core here: {native.why_not()}")

UFUNCS = {"SUM": np.add, "PROD": np.multiply, "MAX": np.maximum, "MIN": np.minimum, "BAND": np.bitwise_and,
          "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
CASES = ([(op, t) for op in UFUNCS for t in INTS]
         + [(op, t) for op in ("SUM", "PROD") for t in (np.float32, np.float64)]
         + [("SUM", np.complex64), ("SUM", np.complex128)])


def _values(dtype, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    if dt.kind == "c":
        return (rng.standard_normal(n) * 1e3 + 1j * rng.standard_normal(n)).astype(dt)
    return (rng.standard_normal(n) * 10.0 ** rng.integers(-20, 20, n)).astype(dt)


@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{o}-{np.dtype(t).name}" for o, t in CASES])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_kernels_match_numpy(op, dtype, threads):
    kernel = kernel_for(op, np.dtype(dtype), True)
    assert kernel is not None and kernel >= 0
    for n in (0, 1, 7, 100_003, 300_007):  # the last: several 128 KiB chunks for every type, the last one short
        a, b = _values(dtype, n, 1), _values(dtype, n, 2)
        with np.errstate(all="ignore"):
            want = UFUNCS[op](a, b)
        got = np.empty_like(a)
        core.reduce(kernel, got, a, b, threads, 64)  # parts of >= 64 bytes: cut even small vectors
        assert got.tobytes() == want.tobytes(), (op, np.dtype(dtype).name, n, threads)
        inplace = b.copy()
        core.reduce(kernel, inplace, a, inplace, threads, 64)
        assert inplace.tobytes() == want.tobytes()


def test_back_to_back_threaded_reductions_touch_only_their_own_call():
    """Back-to-back threaded calls each run their own chunks, and none after they return.

    A worker still spinning from one call, or waking late into the next, must run only that call's
    chunks. Each call's operands are zeroed once it returns and every result is checked again at the
    end: a chunk run late would write zeros.
    """
    kernel = kernel_for("SUM", np.dtype(np.int64), True)
    rng = np.random.default_rng(5)
    kept = []
    for i in range(400):
        n = int(rng.integers(1, 400_000)) if i % 3 else 17
        a = rng.integers(1, 1000, n)
        b = rng.integers(1, 1000, n)
        want = a + b
        got = np.zeros_like(a)
        core.reduce(kernel, got, a, b, 1 + i % 4, 64)
        assert np.array_equal(got, want), (i, n)
        a[:] = 0
        b[:] = 0
        kept.append((got, want))
    assert all(np.array_equal(got, want) for got, want in kept)


def test_cases_without_a_loop_are_refused_or_left_to_mpi():
    assert kernel_for("SUM", np.dtype(np.float16), True) is None  # the Python engine runs such a plan
    assert kernel_for("PROD", np.dtype(np.complex128), False) == -1  # MPI_Reduce_local, as the Python engine
    with pytest.raises(ValueError):
        core.reduce(kernel_for("SUM", np.dtype(np.float64), True), np.empty(3), np.empty(4), np.empty(3), 1, 0)


def test_a_compiler_that_refuses_the_tuning_flags_still_builds_the_core(tmp_path, monkeypatch):
    """The tuning flags are tried first and left out where the compiler refuses them; any other refusal is an error."""
    log = tmp_path / "calls.txt"
    picky = tmp_path / "picky-cc"
    picky.write_text("#!/bin/sh\n"
                     f"echo \"$*\" >> {log}\n"
                     "for a in \"$@\"; do case \"$a\" in -falign-loops*) echo 'unknown flag' >&2; exit 1;; esac; done\n"
                     "exec cc \"$@\"\n")
    picky.chmod(0o755)
    monkeypatch.setattr(native, "build_dir", lambda: str(tmp_path))
    monkeypatch.setenv("CC", str(picky))
    path = native.build()
    assert path.startswith(str(tmp_path)) and (tmp_path / path.rsplit("/", 1)[1]).exists()
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "-falign-loops=64" in calls[0] and "-falign-loops" not in calls[1]

    refuser = tmp_path / "no-cc"
    refuser.write_text("#!/bin/sh\necho 'cannot compile anything' >&2\nexit 1\n")
    refuser.chmod(0o755)
    monkeypatch.setattr(native, "build_dir", lambda: str(tmp_path / "other"))
    (tmp_path / "other").mkdir()
    monkeypatch.setenv("CC", str(refuser))
    with pytest.raises(RuntimeError, match="cannot compile anything"):
        native.build()


def test_threaded_reductions_from_several_threads_at_once():
    """Callers on several threads at once (MPI_THREAD_MULTIPLE programs) each get their own sums, exactly."""
    import threading

    kernel = kernel_for("SUM", np.dtype(np.int64), True)
    errors: list[str] = []

    def caller(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for i in range(150):
            n = int(rng.integers(70_000, 300_000))
            a, b = rng.integers(-1000, 1000, n), rng.integers(-1000, 1000, n)
            got = b.copy()
            core.reduce(kernel, got, a, got, 2 + i % 3, 64)  # in place: a chunk run twice would show
            if not np.array_equal(got, a + b):
                errors.append(f"caller {seed}, call {i}, n {n}")
                return

    threads = [threading.Thread(target=caller, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
