"""Reduce-scatter and all-gather against MPI's own, under mpiexec (pytest-mpi).

``swing_mpi.reduce_scatter_block``, ``reduce_scatter`` and ``allgather`` (and
the ``Intracomm`` methods, nonblocking and persistent forms) are compared with
``comm.Reduce_scatter_block``, ``comm.Reduce_scatter`` and ``comm.Allgather`` on
the same inputs: integers and copies exactly, floating-point sums with a
tolerance. Every algorithm that has the collective, on a ring and on the tori
of this size, meets every (dtype, op) case and both in-place modes in a
covering design (each algorithm x case pair once; sizes and modes rotate), not
the full cross product at every size. Ranks placed in a shuffled torus order
(``Intracomm(coords=...)``) still get block ``i`` on rank ``i``.
"""

from __future__ import annotations

import math
import os
import zlib

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi
from swing_mpi import ALGORITHMS
from swing_mpi.state import find_state
from swing_mpi.topology import Torus

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()

HALVES = sorted(a for a, info in ALGORITHMS.items() if "reduce_scatter" in info.collectives)
ALGS = HALVES + ["auto", "native"]
TORI = {4: [(2, 2)], 6: [(2, 3)], 8: [(2, 4), (2, 2, 2)], 9: [(3, 3)], 12: [(3, 4)], 16: [(4, 4)]}
DIMS = [None] + TORI.get(P, [])

CASES = [  # (dtype, op): exact integer ops, float sums, bitwise, float MIN with signed zeros
    (np.int64, "SUM"), (np.float64, "SUM"), (np.int32, "MAX"), (np.uint8, "BXOR"),
    (np.float32, "MIN"), (np.complex128, "PROD"), (np.int16, "MIN"), (np.float32, "SUM"),
]


def _input(dtype, opname, n, rank, seed):
    rng = np.random.default_rng(zlib.crc32(repr((dtype, opname, n, rank, seed)).encode()))
    dt = np.dtype(dtype)
    if opname == "PROD":
        x = rng.choice([-1.0, 1.0, 0.5, 2.0], n)
        return (x + 1j * rng.choice([0.0, 0.5], n)).astype(dt) if dt.kind == "c" else x.astype(dt)
    if dt.kind == "f":
        x = rng.standard_normal(n).astype(dt)
        if opname == "MIN":
            x[::3] = 0.0 if rank % 2 else -0.0
        return x
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -100), min(info.max, 100), n, endpoint=True).astype(dt)


def _same(got, ref, dtype, opname):
    """Compare integers bit for bit, float sums and products to a tolerance, float MIN/MAX by value.

    Which of +0.0 and -0.0 is the minimum of both depends on the order of operands.
    """
    if np.dtype(dtype).kind in "fc" and opname in ("SUM", "PROD"):
        return np.allclose(got, ref, rtol=1e-5 if np.dtype(dtype).itemsize <= 4 else 1e-12, atol=1e-5)
    if np.dtype(dtype).kind in "fc":
        return np.array_equal(got, ref)
    return got.tobytes() == ref.tobytes()


LIGHT = P > 8 and not os.environ.get("SWING_MPI_TEST_FULL")
"""Above 8 ranks (oversubscribed on CI's two cores): each algorithm meets every other case, the halves
alternating, so every case still meets half of the algorithms and every algorithm every shape."""


def _design():
    """(algorithm, dims, case, in_place, block) with every algorithm x case once and the rest rotating.

    Each algorithm meets every shape both in place and not.
    """
    out = []
    for i, alg in enumerate(ALGS):
        for j, case in enumerate(CASES):
            if LIGHT and (i + j) % 2:
                continue
            k = i + j // 2 if LIGHT else i + j  # (LIGHT: j has one parity per algorithm)
            out.append((alg, DIMS[k % len(DIMS)], case, bool(k // len(DIMS) % 2), 1 + (k % 3) * (P + 1)))
    return out


def _id(c):
    alg, dims, (dt, op), ip, n = c
    shape = "x".join(map(str, dims)) if dims else "ring"
    return f"{alg}-{shape}-{np.dtype(dt).name}-{op}-{'inplace' if ip else 'out'}-{n}"


@pytest.mark.parametrize("case", _design(), ids=_id)
def test_reduce_scatter_block(case):
    alg, dims, (dtype, opname), in_place, n = case
    op = getattr(MPI, opname)
    x = _input(dtype, opname, n * P, R, 1)
    ref = np.empty(n, dtype)
    WORLD.Reduce_scatter_block(x, ref, op)
    if in_place:
        buf = x.copy()
        swing_mpi.reduce_scatter_block(WORLD, MPI.IN_PLACE, buf, op, algorithm=alg, dims=dims)
        got = buf[:n]
    else:
        got = np.empty(n, dtype)
        swing_mpi.reduce_scatter_block(WORLD, x, got, op, algorithm=alg, dims=dims)
    assert _same(got, ref, dtype, opname), (got, ref)


@pytest.mark.parametrize("case", _design(), ids=_id)
def test_reduce_scatter_uneven_counts(case):
    alg, dims, (dtype, opname), in_place, n = case
    op = getattr(MPI, opname)
    counts = [(3 * i + n) % 5 for i in range(P)]  # zeros included
    if P > 1:
        counts[(n + 1) % P] = 0
    total = sum(counts)
    x = _input(dtype, opname, total, R, 2)
    ref = np.empty(counts[R], dtype)
    WORLD.Reduce_scatter(x, ref, counts, op)
    if in_place:
        buf = x.copy()
        swing_mpi.reduce_scatter(WORLD, MPI.IN_PLACE, buf, counts, op, algorithm=alg, dims=dims)
        got = buf[:counts[R]]
    else:
        got = np.empty(counts[R], dtype)
        swing_mpi.reduce_scatter(WORLD, x, got, counts, op, algorithm=alg, dims=dims)
    assert _same(got, ref, dtype, opname), (counts, got, ref)


@pytest.mark.parametrize("case", _design(), ids=_id)
def test_allgather(case):
    alg, dims, (dtype, opname), in_place, n = case
    x = _input(dtype, opname, n, R, 3)
    ref = np.empty(n * P, dtype)
    WORLD.Allgather(x, ref)
    got = np.zeros(n * P, dtype)
    if in_place:
        got[R * n:(R + 1) * n] = x
        swing_mpi.allgather(WORLD, MPI.IN_PLACE, got, algorithm=alg, dims=dims)
    else:
        swing_mpi.allgather(WORLD, x, got, algorithm=alg, dims=dims)
    assert got.tobytes() == ref.tobytes()


@pytest.mark.parametrize("alg", ALGS)
def test_in_place_leaves_the_rest_of_recvbuf_as_it_was(alg):
    """As MPI libraries do (mpi4py's own tests check it): only the first ``recvcounts[rank]`` change."""
    counts = list(range(1, P + 1))
    buf = np.full(sum(counts), R, np.int32)
    swing_mpi.reduce_scatter(WORLD, MPI.IN_PLACE, buf, counts, algorithm=alg)
    assert (buf[:counts[R]] == P * (P - 1) // 2).all() and (buf[counts[R]:] == R).all()
    buf = np.full(2 * P, R, np.int32)
    swing_mpi.reduce_scatter_block(WORLD, MPI.IN_PLACE, buf, algorithm=alg)
    assert (buf[:2] == P * (P - 1) // 2).all() and (buf[2:] == R).all()


@pytest.mark.parametrize("alg", ALGS)
def test_recvcounts_gathered_when_not_given(alg):
    n = R % 3
    counts = WORLD.allgather(n)
    x = np.arange(sum(counts), dtype=np.int64) * (R + 1)
    got = np.empty(n, np.int64)
    swing_mpi.reduce_scatter(WORLD, x, got, algorithm=alg)
    ref = np.empty(n, np.int64)
    WORLD.Reduce_scatter(x, ref, counts)
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("alg", ["swing-bw", "ring", "auto"])
def test_noncommutative_op_keeps_rank_order(alg):
    """A non-commutative op runs MPI's own collective (rank order): 2x2 matrix products."""
    def matmul(a, b, dt):
        x = np.frombuffer(a, np.float64).reshape(-1, 2, 2)
        y = np.frombuffer(b, np.float64).reshape(-1, 2, 2)
        y[...] = x @ y

    op = MPI.Op.Create(matmul, commute=False)
    try:
        rng = np.random.default_rng(R)
        x = rng.integers(-2, 3, (P, 2, 2)).astype(np.float64)
        got = np.empty((1, 2, 2))
        ref = np.empty((1, 2, 2))
        mat = MPI.DOUBLE.Create_contiguous(4).Commit()
        try:
            swing_mpi.reduce_scatter_block(WORLD, [x, mat], [got, mat], op, algorithm=alg)
            WORLD.Reduce_scatter_block([x, mat], [ref, mat], op)
        finally:
            mat.Free()
        assert np.array_equal(got, ref)
    finally:
        op.Free()


@pytest.mark.parametrize("form", ["nonblocking", "persistent"])
@pytest.mark.parametrize("alg", ["swing-bw", "bucket", "rabenseifner", "native"])
def test_nonblocking_and_persistent(form, alg):
    comm = swing_mpi.Intracomm(WORLD, algorithm=alg)
    n = 3
    x = np.empty(n * P, np.int64)
    y = np.empty(n, np.int64)
    s = np.empty(2, np.float64)
    g = np.empty(2 * P, np.float64)
    counts = [i % 3 for i in range(P)]
    xv = np.empty(sum(counts), np.int64)
    yv = np.empty(counts[R], np.int64)
    if form == "persistent":
        reqs = [comm.Reduce_scatter_block_init(x, y), comm.Allgather_init(s, g),
                comm.Reduce_scatter_init(xv, yv, counts)]
    for it in range(3):
        x[...] = np.arange(n * P) * (R + 1) + it
        s[...] = [R + it, -R]
        xv[...] = np.arange(len(xv)) + R * it
        if form == "nonblocking":
            reqs = [comm.Ireduce_scatter_block(x, y), comm.Iallgather(s, g), comm.Ireduce_scatter(xv, yv, counts)]
        else:
            for q in reqs:
                q.Start()
        swing_mpi.Request.Waitall(reqs)
        ref = np.empty(n, np.int64)
        WORLD.Reduce_scatter_block(x, ref)
        assert np.array_equal(y, ref)
        refg = np.empty(2 * P)
        WORLD.Allgather(s, refg)
        assert np.array_equal(g, refg)
        refv = np.empty(counts[R], np.int64)
        WORLD.Reduce_scatter(xv, refv, counts)
        assert np.array_equal(yv, refv)
    if form == "persistent":
        for q in reqs:
            q.Free()


def _shuffled(dims):
    torus = Torus(dims)
    perm = np.random.default_rng(len(dims) * 100 + P).permutation(P)
    return torus, [int(v) for v in perm]


@pytest.mark.parametrize("dims", [(P,)] + TORI.get(P, []), ids=lambda d: "x".join(map(str, d)))
@pytest.mark.parametrize("alg", ["swing-bw", "bucket", "recdoub-mirrored", "hamiltonian", "swing-lat"])
def test_ranks_in_shuffled_torus_order(dims, alg):
    if alg not in ALGORITHMS:
        pytest.skip(f"{alg} is not registered")
    torus, perm = _shuffled(dims)
    comm = swing_mpi.Intracomm(WORLD, algorithm=alg, coords=torus.coords(perm[R]), dims=dims)
    assert comm.swing_placement in (None, tuple(perm))
    x = np.arange(7, dtype=np.int64) * (R + 1) + R
    y = np.empty_like(x)
    comm.Allreduce(x, y)
    ref = np.empty_like(x)
    WORLD.Allreduce(x, ref)
    assert np.array_equal(y, ref)
    assert find_state(comm, comm.swing_placement).rank == perm[R]  # the schedules ran with this rank there
    counts = [(i * 5) % 4 for i in range(P)]
    xv = np.arange(sum(counts), dtype=np.int64) * (R + 2)
    yv = np.empty(counts[R], np.int64)
    comm.Reduce_scatter(xv, yv, counts)  # swing-lat has no reduce-scatter: auto runs it
    refv = np.empty(counts[R], np.int64)
    WORLD.Reduce_scatter(xv, refv, counts)
    assert np.array_equal(yv, refv)
    s = np.array([R, 10 * R], np.int32)
    g = np.empty(2 * P, np.int32)
    comm.Allgather(s, g)
    assert np.array_equal(g, np.array([[r, 10 * r] for r in range(P)], np.int32).ravel())
    dup = comm.Dup()  # keeps the placement
    try:
        assert dup.swing_placement == comm.swing_placement
        g[...] = -1
        dup.Allgather(s, g)
        assert np.array_equal(g, np.array([[r, 10 * r] for r in range(P)], np.int32).ravel())
    finally:
        dup.Free()


def test_coords_without_dims_span_their_torus():
    torus, perm = _shuffled((P,))
    comm = swing_mpi.Intracomm(WORLD, coords=torus.coords(perm[R]), algorithm="swing-bw")
    x = np.full(3, R + 1, np.int64)
    y = np.empty(3, np.int64)
    comm.Allreduce(x, y)
    assert (y == P * (P + 1) // 2).all()


def test_cartesian_communicator_gives_its_dims():
    dims = MPI.Compute_dims(P, 2)
    cart = WORLD.Create_cart(dims, periods=[True] * 2)
    try:
        comm = swing_mpi.Intracomm(cart, algorithm="swing-bw")
        assert comm.swing_placement is None
        x = np.arange(3 * P, dtype=np.int64) * (cart.Get_rank() + 1)
        y = np.empty(3, np.int64)
        comm.Reduce_scatter_block(x, y)
        ref = np.empty(3, np.int64)
        cart.Reduce_scatter_block(x, ref)
        assert np.array_equal(y, ref)
    finally:
        cart.Free()


def test_bad_coords_name_the_duplicates_and_missing():
    if P < 2:
        pytest.skip("needs two ranks")
    coords = (0,) if R < 2 else (R,)  # ranks 0 and 1 both claim (0,); (1,) is missing
    with pytest.raises(ValueError, match=r"\(0,\) stated by ranks \[0, 1\]; missing \[\(1,\)\]"):
        swing_mpi.Intracomm(WORLD, coords=coords, dims=(P,))
    with pytest.raises(ValueError, match="outside"):
        swing_mpi.Intracomm(WORLD, coords=(R + 1,), dims=(P,))


def test_bad_input_is_refused_before_any_data_moves():
    x = np.ones(2 * P)
    y = np.full(2, 7.0)
    with pytest.raises(ValueError, match="sendbuf has"):
        swing_mpi.reduce_scatter_block(WORLD, np.ones(2 * P + 1), y)
    with pytest.raises(ValueError, match="sum\\(recvcounts\\)"):
        swing_mpi.reduce_scatter(WORLD, x, y, [2] * P + [0] if False else [3] * P)
    with pytest.raises(ValueError, match="recvcounts has"):
        swing_mpi.reduce_scatter(WORLD, x, y, [2] * (P + 1))
    with pytest.raises(ValueError, match="recvbuf has"):
        swing_mpi.reduce_scatter(WORLD, x, np.empty(1), [2] * P)
    with pytest.raises(ValueError, match=">= 0"):
        swing_mpi.reduce_scatter(WORLD, x, y, [-1] + [2] * (P - 1) if P > 1 else [-1])
    with pytest.raises(ValueError, match="needs recvcounts"):
        swing_mpi.reduce_scatter(WORLD, MPI.IN_PLACE, x)
    with pytest.raises(ValueError, match="overlap"):
        swing_mpi.reduce_scatter_block(WORLD, x, x[:2])
    with pytest.raises(ValueError, match="recvbuf has"):
        swing_mpi.allgather(WORLD, np.ones(2), np.empty(2 * P - 1))
    with pytest.raises(ValueError, match="recvbuf has"):  # as mpi4py's Allgather: no room left over
        swing_mpi.allgather(WORLD, np.ones(2), np.empty(2 * P + 1))
    for counts in ([2.0] * P, "2" * P, 2, [True] * P):
        with pytest.raises(TypeError, match="recvcounts must be a sequence"):
            swing_mpi.reduce_scatter(WORLD, x, y, counts)
    with pytest.raises(TypeError, match="not defined on datatype"):
        swing_mpi.reduce_scatter_block(WORLD, x, y, MPI.BAND, algorithm="swing-bw")
    with pytest.raises(ValueError, match="overlap"):
        swing_mpi.allgather(WORLD, x[:2], x)
    with pytest.raises(ValueError, match="mismatch in send and receive MPI datatypes: sendbuf MPI_FLOAT"):
        swing_mpi.allgather(WORLD, np.ones(2, np.float32), np.empty(2 * P))
    with pytest.raises(ValueError, match="has no reduce_scatter"):
        swing_mpi.reduce_scatter_block(WORLD, x, y, algorithm="swing-lat")
    with pytest.raises(ValueError, match="unknown algorithm"):
        swing_mpi.allgather(WORLD, np.ones(2), np.empty(2 * P), algorithm="bogus")
    assert np.array_equal(y, np.full(2, 7.0))
    # every rank raised locally; the communicator still works
    out = np.empty(2)
    swing_mpi.reduce_scatter_block(WORLD, x, out, algorithm="swing-bw")
    assert np.array_equal(out, np.full(2, float(P)))


def test_intracomm_refuses_dims_when_it_is_built():
    held = f"torus dims {P + 1}x3 hold {3 * (P + 1)} ranks, but the communicator has {P}"
    with pytest.raises(ValueError, match=held):
        swing_mpi.Intracomm(WORLD, dims=(P + 1, 3))  # not at the first call
    with pytest.raises(ValueError, match="hold"):
        swing_mpi.Intracomm(WORLD, dims=f"{P}x2")
    for dims in ((float(P),), (float(P), 1.0), (str(P),), (True,) * P if P == 1 else (True, P)):
        with pytest.raises(ValueError, match="torus dims must be integers"):
            swing_mpi.Intracomm(WORLD, dims=dims)
        with pytest.raises(ValueError, match="torus dims must be integers"):
            swing_mpi.allreduce(WORLD, np.ones(2), np.empty(2), dims=dims)
    with pytest.raises(ValueError, match="torus dims must be integers"):
        swing_mpi.Intracomm(dims=(2.0, 2.0))  # no communicator: the form alone
    assert swing_mpi.Intracomm(WORLD, dims=(np.int64(P),))._swing_dims == (np.int64(P),)
    comm = swing_mpi.Intracomm(WORLD, dims=f"{P}", algorithm="ring")
    y = np.empty(3)
    comm.Allreduce(np.full(3, float(R)), y)
    assert np.array_equal(y, np.full(3, P * (P - 1) / 2))
    assert swing_mpi.Intracomm(WORLD, dims="1d")  # resolved against the communicator


def test_datatype_mismatches_are_named_as_mpi4py_names_them():
    x = np.ones(4, np.int32)
    for ours, theirs in ((lambda: swing_mpi.allreduce(WORLD, memoryview(x), bytearray(16), algorithm="swing-bw"),
                          lambda: WORLD.Allreduce(memoryview(x), bytearray(16))),
                         (lambda: swing_mpi.allreduce(WORLD, np.ones(2), np.empty(2, np.float32)),
                          lambda: WORLD.Allreduce(np.ones(2), np.empty(2, np.float32))),
                         (lambda: swing_mpi.reduce_scatter_block(WORLD, np.ones(P, np.int32), bytearray(4)),
                          lambda: WORLD.Reduce_scatter_block(np.ones(P, np.int32), bytearray(4))),
                         (lambda: swing_mpi.reduce_scatter(WORLD, np.ones(P), np.empty(1, np.int64), [1] * P),
                          lambda: WORLD.Reduce_scatter(np.ones(P), np.empty(1, np.int64), [1] * P))):
        with pytest.raises(ValueError) as mine:
            ours()
        with pytest.raises(ValueError) as mpi4py:
            theirs()
        assert str(mine.value).startswith(str(mpi4py.value)), (mine.value, mpi4py.value)
        assert str(mine.value).startswith("mismatch in send and receive MPI datatypes: sendbuf MPI_")
    with pytest.raises(ValueError, match="mismatch in send and receive MPI datatypes: sendbuf MPI_INT, recvbuf"):
        swing_mpi.Intracomm(WORLD).Iallreduce(memoryview(x), bytearray(16)).Wait()
    with pytest.raises(ValueError, match="mismatch in send and receive MPI datatypes"):  # counts gathered first
        swing_mpi.reduce_scatter(WORLD, np.ones(P), np.empty(1, np.int64))


def test_blocks_of_every_size_math():
    """The halves' virtual layout covers sizes far from multiples of p (one element, primes)."""
    for n in (1, 7, 1000 + P):
        x = np.arange(n * P, dtype=np.int64) + R
        y = np.empty(n, np.int64)
        swing_mpi.reduce_scatter_block(WORLD, x, y, algorithm="swing-bw")
        assert np.array_equal(y, P * np.arange(R * n, (R + 1) * n) + P * (P - 1) // 2)
    assert math.prod((P,)) == P


@pytest.mark.parametrize("alg", ["swing-bw", "native"])
def test_an_explicit_count_is_one_block_as_in_mpi4py(alg):
    """``[buf, n, dt]`` of an all-gather's receive buffer or a reduce-scatter-block's input is ``n`` a rank."""
    n = 3
    mine = np.arange(n, dtype=np.int64) + 10 * R
    ours, theirs = np.full(P * n, -1, np.int64), np.full(P * n, -1, np.int64)
    swing_mpi.allgather(WORLD, [mine, n, MPI.INT64_T], [ours, n, MPI.INT64_T], algorithm=alg)
    WORLD.Allgather([mine, n, MPI.INT64_T], [theirs, n, MPI.INT64_T])
    assert np.array_equal(ours, theirs)
    ours[...] = -1
    ours[R * n:(R + 1) * n] = mine
    swing_mpi.allgather(WORLD, MPI.IN_PLACE, [ours, n, MPI.INT64_T], algorithm=alg)
    assert np.array_equal(ours, theirs)
    x = np.arange(P * n, dtype=np.int64) * (R + 1)
    got, want = np.empty(n, np.int64), np.empty(n, np.int64)
    swing_mpi.reduce_scatter_block(WORLD, [x, n, MPI.INT64_T], [got, n, MPI.INT64_T], algorithm=alg)
    WORLD.Reduce_scatter_block([x, n, MPI.INT64_T], [want, n, MPI.INT64_T])
    assert np.array_equal(got, want)
    z = x.copy()
    swing_mpi.reduce_scatter_block(WORLD, MPI.IN_PLACE, [z, n, MPI.INT64_T], algorithm=alg)
    assert np.array_equal(z[:n], want)
    with pytest.raises(ValueError, match="recvbuf: count"):  # a total where a block is meant: too long
        swing_mpi.allgather(WORLD, mine, [ours, P * n + 1, MPI.INT64_T], algorithm=alg)
