"""Every algorithm against MPI_Allreduce, under mpiexec (pytest-mpi).

Run: ``mpiexec -n N python -m mpi4py -m pytest --with-mpi tests/mpi`` for
each N (``scripts/test.sh`` does 12 sizes from 1 to 16). Integers compare exactly, floats
with a tolerance to MPI and bit-for-bit across ranks.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest
from mpi4py import MPI
from reference import reference_allreduce

import swing_mpi
from swing_mpi import ALGORITHMS

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()

OURS = sorted(ALGORITHMS) + ["auto"]

# torus shapes to try at this size (None: a ring)
SHAPES = {4: [None, (2, 2)], 6: [None, (2, 3)], 8: [None, (2, 4), (2, 2, 2)], 9: [None, (3, 3)],
          10: [None, (2, 5)], 12: [None, (3, 4)], 15: [None, (3, 5)], 16: [None, (4, 4), (2, 2, 4)]}
DIMS = SHAPES.get(P, [None])

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float32, np.float64, np.complex128]
ARITH = ["SUM", "PROD", "MAX", "MIN"]
BITWISE = ["BAND", "BOR", "BXOR"]
LOGICAL = ["LAND", "LOR", "LXOR"]


FULL = P <= 4 or bool(os.environ.get("SWING_MPI_TEST_FULL"))
"""Small p (or SWING_MPI_TEST_FULL=1): every count for every (dtype, op). At 5-8 ranks,
oversubscribed on CI's two cores: every (dtype, op) pair with the counts taken in
turn, and every count for a few pairs (above 8: :data:`LIGHT`) — all counts, dtypes
and ops are still covered at every size."""
LIGHT = P > 8 and not os.environ.get("SWING_MPI_TEST_FULL")
"""Above 8 ranks (each call costs about p times more on two cores): every op with one integer type
and every float type with one op, the types taken in turn so that all are covered; every count
for the ring and for a few pairs. The reduction code is the same at every p; what changes with p
is the schedule, and every algorithm still runs on every shape at every count."""


def counts():
    return sorted({0, 1, max(P - 1, 0), P, 2 * P + 3})


def counts_for(i, always=False):
    return counts() if FULL or always else [counts()[i % len(counts())]]


def make_input(dtype, opname, n, rank, seed=0):
    rng = np.random.default_rng(1000 * rank + 17 * n + seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if opname == "PROD":
        if dt.kind == "c":
            return (rng.choice([1, -1, 1j], n)).astype(dt)
        if dt.kind == "f":
            return rng.choice([0.5, 1.0, 2.0, -1.0, 1.25], n).astype(dt)
        return rng.choice([1, 2, 3] if dt.kind == "u" else [1, -1, 2, 3], n).astype(dt)
    if dt.kind == "f":
        # mixed magnitudes: order-sensitive rounding
        return (rng.choice([1e6, -1e6, 1e-2, 3.7], n) * rng.standard_normal(n)).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(n) * 1e3 + 1j * rng.standard_normal(n)).astype(dt)
    info = np.iinfo(dt)
    if opname in LOGICAL:
        return rng.integers(0, 3, n).astype(dt)  # zeros matter for logical ops
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)


def same_on_all_ranks(comm, arr: np.ndarray) -> bool:
    crc = zlib.crc32(np.ascontiguousarray(arr).tobytes())
    return len(set(comm.allgather(crc))) == 1


def check(algorithm, dims, x, op, *, inplace, datatype=None, exact=True, rtol=1e-9):
    """One allreduce with swing_mpi vs comm.Allreduce.

    Returns (local verdict, crc of our result, description); the verdicts and
    crcs of all ranks are compared once per test by :func:`run_cases`.
    """
    ref = reference_allreduce(WORLD, x, op, datatype)  # MPI_Allreduce; integer overflow: wrapped
    spec = [x, datatype] if datatype is not None else x
    if inplace:
        out = x.copy()
        swing_mpi.allreduce(WORLD, MPI.IN_PLACE, [out, datatype] if datatype is not None else out, op,
                            algorithm=algorithm, dims=dims)
    else:
        out = np.full_like(x, 7)
        swing_mpi.allreduce(WORLD, spec, [out, datatype] if datatype is not None else out, op,
                            algorithm=algorithm, dims=dims)
    if out.dtype.names:  # pair types: compare the fields, not the struct padding
        out = np.stack([out[f].astype(np.float64) for f in out.dtype.names])
        ref = np.stack([ref[f].astype(np.float64) for f in ref.dtype.names])
    if exact:
        good = out.tobytes() == ref.tobytes()
    else:
        good = bool(np.allclose(out, ref, rtol=rtol, atol=1e-6 * max(1.0, float(np.abs(ref).max(initial=0)))))
    name = op.Get_name() if hasattr(op, "Get_name") else str(op)
    what = f"{algorithm} dims={dims} {x.dtype} {name} n={len(x)} inplace={inplace}"
    return good, zlib.crc32(out.tobytes()), what


def run_cases(cases):
    """Run every case, then compare all ranks' verdicts and result crcs at once."""
    mine = [check(*args, **kw) for args, kw in cases]
    everyone = WORLD.allgather([(g, c) for g, c, _ in mine])
    failures = []
    for i, (_, _, what) in enumerate(mine):
        if not all(rank_res[i][0] for rank_res in everyone):
            failures.append(f"{what}: differs from MPI_Allreduce")
        elif len({rank_res[i][1] for rank_res in everyone}) != 1:
            failures.append(f"{what}: not bit-identical across ranks")
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n" + "\n".join(failures[:20])


def spread(items, i):
    """Return item i (cyclic): a covering design instead of a full cross product."""
    return items[i % len(items)]


@pytest.mark.parametrize("algorithm", OURS)
def test_integers_every_op(algorithm):
    ops = ARITH + BITWISE + LOGICAL
    always = ((np.int64, "SUM"), (np.uint8, "BXOR"))
    if LIGHT:
        pairs = [(INTS[j % len(INTS)], opname) for j, opname in enumerate(ops)] + list(always)
    else:
        pairs = [(dt, opname) for dt in INTS for opname in ops]
    cases = []
    i = 0
    for k, (dt, opname) in enumerate(pairs):
        # the count turns with dtype index + op index (k // len(ops) is the dtype index without LIGHT)
        for n in counts_for(k + k // len(ops), always=(dt, opname) in always):
            i += 1
            x = make_input(dt, opname, n, R)
            cases.append(((algorithm, spread(DIMS, i), x, getattr(MPI, opname)),
                          {"inplace": bool(i // len(DIMS) % 2)}))
    run_cases(cases)


def float_pairs(di):
    """(dtype, op) for the di-th shape: every pair, or (LIGHT) each float type with one op in turn."""
    pairs = [(dt, opname) for dt in FLOATS for opname in (["SUM", "PROD"] if np.dtype(dt).kind == "c" else ARITH)]
    if not LIGHT:
        return pairs
    light = []
    for k, dt in enumerate(FLOATS):
        ops = [o for d, o in pairs if d == dt]
        light.append((dt, ops[(di + k) % len(ops)]))
    return light + ([(np.float64, "SUM")] if (np.float64, "SUM") not in light else [])


@pytest.mark.parametrize("algorithm", OURS)
def test_floats_and_bool(algorithm):
    cases = []
    i = 0
    for di, dims in enumerate(DIMS):
        for j, (dt, opname) in enumerate(float_pairs(di)):
            for n in counts_for(i + j, always=(dt, opname) == (np.float64, "SUM") and not (LIGHT and di)):
                i += 1
                x = make_input(dt, opname, n, R)
                exact = opname in ("MAX", "MIN")
                rtol = 1e-4 if dt == np.float32 else 1e-9
                cases.append(((algorithm, dims, x, getattr(MPI, opname)),
                              {"inplace": bool(i % 2), "exact": exact, "rtol": rtol}))
        for opname in [LOGICAL[di % len(LOGICAL)]] if LIGHT else LOGICAL:
            for n in counts_for(i):
                i += 1
                x = make_input(np.bool_, opname, n, R)
                cases.append(((algorithm, dims, x, getattr(MPI, opname)), {"inplace": bool(i % 2)}))
    run_cases(cases)


@pytest.mark.parametrize("algorithm", OURS)
def test_large_vector(algorithm):
    cases = []
    for dims in DIMS[:2]:
        for dt in (np.float64, np.int32):
            x = make_input(dt, "SUM", 100003, R)
            cases.append(((algorithm, dims, x, MPI.SUM), {"inplace": False, "exact": dt == np.int32}))
        x = make_input(np.float64, "SUM", 100003, R, seed=1)
        cases.append(((algorithm, dims, x, MPI.SUM), {"inplace": True, "exact": False}))
    run_cases(cases)


def _pairs(n, rank):
    dt = np.dtype([("val", np.float64), ("loc", np.int32)], align=True)
    assert dt.itemsize == MPI.DOUBLE_INT.extent
    x = np.zeros(n, dt)
    rng = np.random.default_rng(rank + 5)
    x["val"] = rng.integers(0, 3, n)  # few values: many ties, MPI gives the lowest loc
    x["loc"] = rank
    return x


@pytest.mark.parametrize("algorithm", OURS)
def test_maxloc_minloc_ties(algorithm):
    cases = []
    i = 0
    for dims in DIMS:
        for op in (MPI.MAXLOC, MPI.MINLOC):
            for n in counts_for(i, always=not (LIGHT and dims)):
                i += 1
                cases.append(((algorithm, dims, _pairs(n, R), op),
                              {"inplace": bool(i % 2), "datatype": MPI.DOUBLE_INT}))
    run_cases(cases)


def _user_sum(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, dtype=np.float64)
    b = np.frombuffer(inoutbuf, dtype=np.float64)
    b += a


def _matmul(inbuf, inoutbuf, datatype):
    # elements are 2x2 matrices; MPI semantics: inout = in · inout
    a = np.frombuffer(inbuf, dtype=np.float64).reshape(-1, 2, 2)
    b = np.frombuffer(inoutbuf, dtype=np.float64).reshape(-1, 2, 2)
    b[...] = a @ b


@pytest.mark.parametrize("algorithm", OURS)
def test_user_ops(algorithm):
    usersum = MPI.Op.Create(_user_sum, commute=True)
    matmul = MPI.Op.Create(_matmul, commute=False)
    mat = MPI.DOUBLE.Create_contiguous(4).Commit()
    try:
        cases = []
        for dims in DIMS:
            for n in counts_for(DIMS.index(dims), always=dims is None):
                for inplace in (False, True) if dims is None else (bool(n % 2),):
                    x = make_input(np.float64, "SUM", n, R)
                    cases.append(((algorithm, dims, x, usersum), {"inplace": inplace, "exact": False}))
                    rng = np.random.default_rng(R + 100 * n)
                    # 0/1 matrices: products stay exact, and order matters
                    m = rng.integers(0, 2, (n, 2, 2)).astype(np.float64).reshape(n * 4)
                    cases.append(((algorithm, dims, m, matmul),
                                  {"inplace": inplace, "datatype": mat, "exact": True}))
        run_cases(cases)
    finally:
        mat.Free()
        usersum.Free()
        matmul.Free()


def test_intracomm_drop_in_and_dup():
    comm = swing_mpi.Intracomm(WORLD)
    x = np.arange(10, dtype=np.float64) + R
    y = np.empty_like(x)
    comm.Allreduce(x, y, op=MPI.SUM)
    assert np.allclose(y, np.arange(10) * P + P * (P - 1) / 2)
    d = comm.Dup()
    try:
        assert isinstance(d, swing_mpi.Intracomm)
        d.Allreduce(MPI.IN_PLACE, y, MPI.MAX)
        z = np.array([R], dtype=np.int64)
        d.Allreduce(None, z, MPI.SUM)  # None means in place, as in mpi4py
        assert z[0] == P * (P - 1) // 2
    finally:
        d.Free()


def test_cartcomm_dims_are_used():
    dims = MPI.Compute_dims(P, 2)
    cart = WORLD.Create_cart(dims, periods=[True, True], reorder=False)
    try:
        comm = swing_mpi.Intracomm(cart, algorithm="swing-bw")
        assert tuple(comm._swing_dims) == tuple(dims)
        x = np.full(4 * P + 1, R, dtype=np.int64)
        comm.Allreduce(MPI.IN_PLACE, x)
        assert (x == P * (P - 1) // 2).all()
    finally:
        cart.Free()


def test_user_messages_do_not_mix_with_ours():
    """A user's pending Irecv on ANY_SOURCE/ANY_TAG must not catch our traffic."""
    req = WORLD.irecv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    x = np.arange(1000, dtype=np.float64) * (R + 1)
    swing_mpi.allreduce(WORLD, MPI.IN_PLACE, x, algorithm="swing-bw")
    assert np.allclose(x, np.arange(1000) * P * (P + 1) / 2)
    WORLD.send(("hello", R), dest=(R + 1) % P, tag=3)
    msg = req.wait()
    assert msg == ("hello", (R - 1) % P)
    WORLD.Barrier()


# -- bad input: local errors, before any communication, recvbuf untouched ---------------------

def test_bad_input_raises_before_touching_recvbuf():
    x = np.ones(8)
    y = np.full(8, 42.0)
    with pytest.raises(ValueError, match="elements"):
        swing_mpi.allreduce(WORLD, np.ones(7), y)
    with pytest.raises(ValueError, match="datatype"):
        swing_mpi.allreduce(WORLD, np.ones(8, np.float32), y)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.ones(8)
        ro.flags.writeable = False
        swing_mpi.allreduce(WORLD, x, ro)
    with pytest.raises(ValueError, match="contiguous"):
        swing_mpi.allreduce(WORLD, x, np.ones(16)[::2])
    with pytest.raises(ValueError, match="unknown algorithm"):
        swing_mpi.allreduce(WORLD, x, y, algorithm="nope")
    with pytest.raises(ValueError, match="communicator has"):
        swing_mpi.allreduce(WORLD, x, y, dims=(P + 1, 2))
    with pytest.raises(TypeError, match="MPI.Op"):
        swing_mpi.allreduce(WORLD, x, y, op=np.add)
    for algorithm in ("swing-bw", "auto", "native"):
        with pytest.raises(TypeError, match="MPI.Op"):
            swing_mpi.allreduce(WORLD, x, y, None, algorithm=algorithm)
    with pytest.raises(ValueError, match="from element 2 needs"):
        swing_mpi.allreduce(WORLD, [x, (7, 2), MPI.DOUBLE], [y, 7, MPI.DOUBLE])
    with pytest.raises(ValueError, match="count 9 needs"):
        swing_mpi.allreduce(WORLD, [x, 9, MPI.DOUBLE], [y, 9, MPI.DOUBLE])
    with pytest.raises(ValueError, match="overlap"):
        swing_mpi.allreduce(WORLD, y[:4], y[2:6])
    with pytest.raises(ValueError, match="cannot infer"):
        swing_mpi.allreduce(WORLD, MPI.IN_PLACE, _pairs(3, R))
    with pytest.raises(TypeError, match="intracommunicator"):
        swing_mpi.allreduce(None, x, y)
    assert (y == 42.0).all()


def test_buffer_specs_like_mpi4py():
    import array

    n = 2 * P + 3
    x = np.arange(n, dtype=np.float64) + R
    expect = np.arange(n) * P + P * (P - 1) / 2
    for spec in ([x, MPI.DOUBLE], [x, n, MPI.DOUBLE], (x, "d"), [x, n], x):
        y = np.zeros(n)
        swing_mpi.allreduce(WORLD, spec, [y, MPI.DOUBLE], algorithm="swing-bw")
        assert np.allclose(y, expect)
    a = array.array("i", [R] * n)
    b = array.array("i", [0] * n)
    swing_mpi.allreduce(WORLD, a, b)
    assert list(b) == [P * (P - 1) // 2] * n
    # mpi4py's empty buffer spec
    swing_mpi.allreduce(WORLD, [None, MPI.INT], [None, MPI.INT], algorithm="swing-bw")
    # a count smaller than the buffer: the rest is left alone
    y = np.full(n, -1.0)
    swing_mpi.allreduce(WORLD, [x, 3, MPI.DOUBLE], [y, 3, MPI.DOUBLE])
    assert np.allclose(y[:3], expect[:3]) and (y[3:] == -1).all()
    # a displacement in elements, in both of mpi4py's forms: (count, displ) and count, displ
    m = 2 * P + 8
    x = np.arange(m, dtype=np.float64) + R
    expect = np.arange(m) * P + P * (P - 1) / 2
    for algorithm in ("swing-bw", "ring", "native"):
        y = np.full(m, -1.0)
        swing_mpi.allreduce(WORLD, [x, (3, 2), MPI.DOUBLE], [y, 3, 4, MPI.DOUBLE], algorithm=algorithm)
        assert np.allclose(y[4:7], expect[2:5]) and (y[:4] == -1).all() and (y[7:] == -1).all(), algorithm
        y = x.copy()
        swing_mpi.allreduce(WORLD, MPI.IN_PLACE, [y, (m - 1, 1), MPI.DOUBLE], algorithm=algorithm)
        assert y[0] == x[0] and np.allclose(y[1:], expect[1:]), algorithm


@pytest.mark.parametrize("algorithm", OURS + ["native"])
def test_an_op_the_mpi_library_does_not_define_on_the_datatype_raises_on_every_rank(algorithm):
    """As ``comm.Allreduce`` refuses it, on every rank and before any data moves.

    Found only where a rank reduces, some ranks would raise in the middle of the schedule and the others
    wait for them (a hang; CI's MPIEXEC_TIMEOUT would end it). Every rank reaches the checks below.
    """
    pair = MPI.DOUBLE.Create_contiguous(2).Commit()
    try:
        for n in (1, 2 * P + 3):
            x, y = np.ones(n), np.full(n, 42.0)
            for op in (MPI.BAND, MPI.MAXLOC, MPI.REPLACE, MPI.NO_OP):
                with pytest.raises(TypeError, match="not defined on datatype"):
                    swing_mpi.allreduce(WORLD, x, y, op, algorithm=algorithm)
            with pytest.raises(TypeError, match="not defined on datatype"):
                swing_mpi.allreduce(WORLD, [np.ones(2 * n), n, pair], [np.zeros(2 * n), n, pair], MPI.SUM,
                                    algorithm=algorithm)
            with pytest.raises(TypeError, match="not defined on datatype"):
                swing_mpi.allreduce(WORLD, np.ones(n, bool), np.zeros(n, bool), MPI.BXOR, algorithm=algorithm)
            assert (y == 42.0).all()
        WORLD.Barrier()  # every rank got here: none is left waiting
    finally:
        pair.Free()


@pytest.mark.parametrize("algorithm", OURS)
def test_complex_products_are_bit_identical_on_every_rank(algorithm):
    """Random complex factors (their products round), few elements, many seeds.

    numpy's complex multiply rounds differently in place and out of place, which once made ranks
    differ (recdoub, odd p, one element).
    """
    cases = []
    for dims in DIMS[:2]:
        for n in (1, 2, 3):
            for seed in range(12):
                rng = np.random.default_rng([seed, R, n])
                x = (rng.uniform(0.5, 1.5, n) + 1j * rng.uniform(-1, 1, n)).astype(np.complex128)
                cases.append(((algorithm, dims, x, MPI.PROD), {"inplace": bool(seed % 2), "exact": False}))
    run_cases(cases)


def test_dlpack_only_objects_go_to_the_mpi_library():
    """Objects without the buffer protocol (DLPack / CUDA array interface) use MPI's own Allreduce."""

    class OnlyDLPack:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    x = np.arange(5, dtype=np.float64) + R
    y = np.zeros(5)
    swing_mpi.allreduce(WORLD, OnlyDLPack(x), OnlyDLPack(y), algorithm="swing-bw")
    assert np.allclose(y, np.arange(5) * P + P * (P - 1) / 2)


def test_environment_variables_choose(monkeypatch):
    # the variables are read at import (tests/unit/test_environment.py launches jobs with them
    # set); here the values read are replaced
    from swing_mpi import api, rc
    monkeypatch.setattr(rc, "algorithm", "recdoub")
    assert api.resolve(None, P, 8, MPI.SUM, MPI.DOUBLE) == "recdoub"
    monkeypatch.setattr(rc, "algorithm", "bogus")
    with pytest.raises(ValueError, match="unknown algorithm"):
        swing_mpi.allreduce(WORLD, np.ones(3), np.ones(3))
