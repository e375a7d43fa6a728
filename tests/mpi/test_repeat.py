"""The repeat path: a call on the same numpy arrays as an earlier one skips checks and choice.

Every test changes what the earlier call saw (values, dtype, size, writability,
algorithm, op, the arrays themselves) and checks that the next call is still
exactly ``comm.Allreduce``'s result, or the same error the first call would raise.
"""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi
from swing_mpi import native, pipeline, repeat

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()

ALGS = ["native", "auto", "swing-bw", "swing-lat", "recdoub", "ring"]


def _ref(x, op=MPI.SUM):
    out = np.empty_like(x)
    WORLD.Allreduce(x, out, op)
    return out


def _same_everywhere(a):
    b = a.copy()
    WORLD.Bcast(b, root=0)
    return np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.fixture
def slow_calls(monkeypatch):
    """Count the calls that took the full (checking) path (no shape remembered from earlier tests).

    ``auto`` tries no contenders on WORLD meanwhile: a trial's calls take the full path (tests/mpi/test_online.py).
    """
    from swing_mpi.state import comm_state

    repeat.NATIVE_SHAPES.clear()
    monkeypatch.setattr(comm_state(WORLD), "trial", False)
    n = [0]
    orig = pipeline.call_args

    def counting(operation, *a):
        n[0] += operation == "allreduce"
        return orig(operation, *a)

    monkeypatch.setattr(pipeline, "call_args", counting)
    return n


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("n", [1, 5, 1000])
def test_repeated_calls_take_the_repeat_path_and_stay_right(alg, in_place, n, slow_calls):
    x = np.empty(n, np.int64)
    y = np.empty(n, np.int64)
    for it in range(5):
        x[...] = np.arange(n) * (R + 1) + it  # new values every call
        ref = _ref(x)
        if in_place:
            y[...] = x
            swing_mpi.allreduce(WORLD, MPI.IN_PLACE, y, algorithm=alg)
        else:
            swing_mpi.allreduce(WORLD, x, y, algorithm=alg)
            assert np.array_equal(x, np.arange(n) * (R + 1) + it)  # input untouched
        assert np.array_equal(y, ref), (alg, it)
    assert slow_calls[0] == 1, "only the first call should check and choose"


@pytest.mark.parametrize("alg", ["native", "swing-bw"])
def test_float_results_stay_bit_identical(alg):
    rng = np.random.default_rng(R)
    x = rng.standard_normal(777)
    y = np.empty_like(x)
    for _ in range(3):
        x[...] = rng.standard_normal(777)
        swing_mpi.allreduce(WORLD, x, y, algorithm=alg)
        assert np.allclose(y, _ref(x), rtol=1e-12, atol=1e-12)
        assert _same_everywhere(y)


def test_alternating_buffers_and_algorithms(slow_calls):
    bufs = [(np.full(3, R + k, np.int64), np.empty(3, np.int64)) for k in range(3)]
    for it in range(4):
        for k, (x, y) in enumerate(bufs):
            alg = ALGS[(it + k) % 2 + 2]  # swing-bw / swing-lat by turns on each pair
            swing_mpi.allreduce(WORLD, x, y, algorithm=alg)
            assert np.array_equal(y, np.full(3, P * (P - 1) // 2 + P * k))
    # a pair's record follows its latest algorithm; after each algorithm's first call, the others find
    # its shape (the compiled core's record of that algorithm's plan) and take no full path (none where
    # the input is copied in first, as at p = 1)
    cored = any(v.ours for v in repeat.NATIVE_SHAPES.values())
    assert slow_calls[0] == (2 if cored else 12)
    assert cored or native.load() is None or P == 1


def test_dtype_changed_in_place_is_seen():
    x = np.arange(4, dtype=np.int64) + R
    y = np.empty(4, np.int64)
    swing_mpi.allreduce(WORLD, x, y, algorithm="auto")
    x.dtype = np.float64  # same bytes, now doubles (tiny positive subnormals)
    y.dtype = np.float64
    x[...] = np.arange(4) + R + 0.5
    swing_mpi.allreduce(WORLD, x, y, algorithm="auto")
    assert np.allclose(y, _ref(x))
    assert _same_everywhere(y)


def test_native_record_reduces_the_dtype_the_arrays_have_now():
    """The native repeat path lets mpi4py infer the datatype: a reinterpreted pair is reduced as it is now."""
    x = np.arange(4, dtype=np.int64) + R
    y = np.empty(4, np.int64)
    swing_mpi.allreduce(WORLD, x, y, algorithm="native")
    x.dtype = np.int32  # twice the elements
    y.dtype = np.int32
    x[...] = np.arange(8) * (R + 1)
    swing_mpi.allreduce(WORLD, x, y, algorithm="native")
    assert np.array_equal(y, np.arange(8) * (P * (P + 1) // 2))
    x.dtype = np.float32  # the send array alone: MPI's own error, on every rank
    with pytest.raises(ValueError, match="mismatch"):
        swing_mpi.allreduce(WORLD, x, y, algorithm="native")


@pytest.mark.parametrize("alg", ["native", "swing-bw"])
def test_size_cannot_change_in_place_under_a_record(alg):
    # numpy refuses ndarray.resize on an array with weak references (our records), even with
    # refcheck=False, so the size the record saw stays true; new arrays are the way to grow
    repeat.NATIVE_SHAPES.clear()  # (a shape seen before goes to MPI without a record on its first call)
    x = np.full(4, R, np.int64)
    y = np.empty(4, np.int64)
    swing_mpi.allreduce(WORLD, x, y, algorithm=alg)
    with pytest.raises(ValueError, match="resize"):
        x.resize(9, refcheck=False)
    x, y = np.resize(x, 9), np.empty(9, np.int64)
    x[...] = R + 1
    swing_mpi.allreduce(WORLD, x, y, algorithm=alg)
    assert np.array_equal(y, np.full(9, P * (P + 1) // 2))


@pytest.mark.parametrize("alg", ["native", "auto", "swing-bw"])
def test_recvbuf_made_read_only_raises_before_communicating(alg):
    x = np.ones(8)
    y = np.empty(8)
    swing_mpi.allreduce(WORLD, x, y, algorithm=alg)
    y.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        swing_mpi.allreduce(WORLD, x, y, algorithm=alg)
    y.flags.writeable = True
    swing_mpi.allreduce(WORLD, x, y, algorithm=alg)  # and nothing is left half-posted
    assert np.array_equal(y, np.full(8, float(P)))


def test_other_send_buffer_or_op_is_not_the_repeat():
    x1 = np.full(5, R + 1, np.int64)
    x2 = np.full(5, 2 * (R + 1), np.int64)
    y = np.empty(5, np.int64)
    for alg in ["native", "swing-bw"]:
        swing_mpi.allreduce(WORLD, x1, y, algorithm=alg)
        assert np.array_equal(y, _ref(x1))
        swing_mpi.allreduce(WORLD, x2, y, algorithm=alg)
        assert np.array_equal(y, _ref(x2))
        swing_mpi.allreduce(WORLD, x2, y, MPI.MAX, algorithm=alg)
        assert np.array_equal(y, _ref(x2, MPI.MAX))
        y[...] = x1
        swing_mpi.allreduce(WORLD, None, y, algorithm=alg)
        assert np.array_equal(y, _ref(x1))


def test_overlap_is_still_refused_after_a_good_call():
    big = np.arange(10, dtype=np.int64)
    y = np.empty(5, np.int64)
    swing_mpi.allreduce(WORLD, big[:5], y, algorithm="swing-bw")
    with pytest.raises(ValueError, match="overlap"):
        swing_mpi.allreduce(WORLD, big[:5], big[3:8], algorithm="swing-bw")


def test_new_arrays_every_call_and_many_buffers():
    for k in range(300):  # more than the records kept: they are dropped, results stay right
        x = np.full(2, R + k, np.int64)
        y = np.empty(2, np.int64)
        swing_mpi.allreduce(WORLD, x, y, algorithm="swing-lat" if k % 2 else "auto")
        assert np.array_equal(y, np.full(2, P * (P - 1) // 2 + P * k))
    assert len(repeat.RECORDS) <= repeat.REPEATS_MAX
    keep = []
    repeat.NATIVE_SHAPES.clear()
    for k in range(repeat.REPEATS_MAX + 20):  # arrays kept alive: the bound drops the records, not the arrays
        x, y = np.full(k + 1, R + k, np.int64), np.empty(k + 1, np.int64)  # each size its own record
        swing_mpi.allreduce(WORLD, x, y, algorithm="native")
        keep.append((x, y))
        assert 0 < len(repeat.NATIVE_RECORDS) <= repeat.REPEATS_MAX
    for k, (x, y) in enumerate(keep):
        y[...] = -1
        swing_mpi.allreduce(WORLD, x, y, algorithm="native")
        assert np.array_equal(y, np.full(k + 1, P * (P - 1) // 2 + P * k))


@pytest.mark.parametrize("alg", ["native", "swing-bw"])
@pytest.mark.parametrize("in_place", [False, True])
def test_records_hold_no_array_alive(alg, in_place):
    import gc
    import weakref

    repeat.NATIVE_SHAPES.clear()
    x = np.ones(16)
    y = np.ones(16)
    swing_mpi.allreduce(WORLD, MPI.IN_PLACE if in_place else x, y, algorithm=alg)
    records = repeat.NATIVE_RECORDS if alg == "native" else repeat.RECORDS
    key = id(y)
    assert key in records
    if alg == "native":
        assert repeat.LAST_NATIVE[0] is records[key]
    wx, wy = weakref.ref(x), weakref.ref(y)
    del x, y
    gc.collect()
    assert wx() is None and wy() is None
    assert key not in records  # a dead array's record leaves at once: its id may be reused
    assert repeat.LAST_NATIVE[0] is repeat.NO_RECORD or alg != "native"


def test_a_dead_send_array_drops_the_record():
    repeat.NATIVE_SHAPES.clear()  # (else new arrays of a shape seen before go to MPI without a record)
    y = np.empty(8)
    x = np.ones(8)
    swing_mpi.allreduce(WORLD, x, y, algorithm="native")
    assert id(y) in repeat.NATIVE_RECORDS
    del x
    assert id(y) not in repeat.NATIVE_RECORDS
    assert repeat.LAST_NATIVE[0] is repeat.NO_RECORD
    x2 = np.full(8, 2.0)  # may take the dead array's id: still a new array, the full path's answer
    swing_mpi.allreduce(WORLD, x2, y, algorithm="native")
    assert np.array_equal(y, np.full(8, 2.0 * P))


def test_last_record_and_the_dict_take_turns():
    """Calls alternating between arrays, options and dtypes: the last record is tried first, the dict next."""
    repeat.NATIVE_SHAPES.clear()  # (else the first calls go to MPI as new arrays of a shape seen before)
    x1, y1 = np.empty(8), np.empty(8)
    x2, y2 = np.empty(5, np.int64), np.empty(5, np.int64)
    for k in range(6):
        x1[...] = R + k
        x2[...] = R * k
        swing_mpi.allreduce(WORLD, x1, y1, algorithm="native")
        assert repeat.LAST_NATIVE[0] is repeat.NATIVE_RECORDS[id(y1)]
        swing_mpi.allreduce(WORLD, x2, y2, algorithm="native")
        assert repeat.LAST_NATIVE[0] is repeat.NATIVE_RECORDS[id(y2)]
        assert np.array_equal(y1, _ref(x1)) and np.array_equal(y2, _ref(x2))
        swing_mpi.allreduce(WORLD, x2, y2, MPI.MAX, algorithm="native")  # another op on the last record's arrays
        assert np.array_equal(y2, _ref(x2, MPI.MAX))
        swing_mpi.allreduce(WORLD, MPI.IN_PLACE, y2, algorithm="native")  # in place on the last record's recv
        assert np.array_equal(y2, P * _ref(x2, MPI.MAX))
    x1.dtype = np.int64  # both arrays reinterpreted in place: a new datatype, not the recorded one
    y1.dtype = np.int64
    x1[...] = R
    swing_mpi.allreduce(WORLD, x1, y1, algorithm="native")
    assert np.array_equal(y1, np.full(8, P * (P - 1) // 2))
    with pytest.raises(ValueError, match="recvbuf"):  # the usual error, not one from the last record
        swing_mpi.allreduce(WORLD, x1, None, algorithm="native")


@pytest.mark.parametrize("in_place", [False, True])
def test_persistent_arrays_of_a_shape_seen_before_get_a_record(in_place):
    """The first buffer's call records the shape; a second buffer of that shape gets its own record too."""
    repeat.NATIVE_SHAPES.clear()
    x1, y1 = np.full(3, R + 1.0), np.empty(3)
    x2, y2 = np.full(3, R + 2.0), np.empty(3)
    swing_mpi.allreduce(WORLD, MPI.IN_PLACE if in_place else x1, y1, algorithm="native")  # full path
    assert id(y1) in repeat.NATIVE_RECORDS
    calls = 2 * repeat.WATCH_EVERY + 3
    for k in range(calls):
        if in_place:
            y2[...] = x2
        swing_mpi.allreduce(WORLD, MPI.IN_PLACE if in_place else x2, y2, algorithm="native")
        assert np.array_equal(y2, _ref(x2))
        if in_place:
            y1[...] = x1
        swing_mpi.allreduce(WORLD, MPI.IN_PLACE if in_place else x1, y1, algorithm="native")  # its own record
        assert np.array_equal(y1, _ref(x1))
        if id(y2) in repeat.NATIVE_RECORDS:
            made = k
            break
    else:
        made = None
    assert made is not None and made <= 2, made  # the watch looks at the first call, then every WATCH_EVERY
    if not in_place:  # a new send array every call into the same receive array: no record is made for it
        y3 = np.empty(3)
        for k in range(calls):
            swing_mpi.allreduce(WORLD, np.full(3, float(R + k)), y3, algorithm="native")
            assert np.array_equal(y3, np.full(3, float(P * (P - 1) // 2 + P * k)))
            assert id(y3) not in repeat.NATIVE_RECORDS


def test_freed_communicator_raises_not_hangs():
    for alg in ["native", "swing-bw"]:
        c = WORLD.Dup()
        x = np.ones(4)
        y = np.empty(4)
        swing_mpi.allreduce(c, x, y, algorithm=alg)
        c.Free()
        with pytest.raises((TypeError, MPI.Exception)):
            swing_mpi.allreduce(c, x, y, algorithm=alg)


# -- new arrays of a shape that went to MPI (repeat.NATIVE_SHAPES) ---------------------------------

@pytest.mark.parametrize("alg", ["native", "auto"])
@pytest.mark.parametrize("in_place", [False, True, None])  # None: sendbuf=None, in place too
def test_new_arrays_of_a_native_shape_skip_the_full_path(alg, in_place, slow_calls):
    repeat.NATIVE_SHAPES.clear()
    for it in range(6):
        x = np.arange(5, dtype=np.int64) * (R + 1) + it  # new arrays every call
        y = np.empty(5, np.int64)
        ref = _ref(x)
        if in_place is False:
            swing_mpi.allreduce(WORLD, x, y, algorithm=alg)
            assert np.array_equal(x, np.arange(5) * (R + 1) + it)  # input untouched
        else:
            y[...] = x
            swing_mpi.allreduce(WORLD, MPI.IN_PLACE if in_place else None, y, algorithm=alg)
        assert np.array_equal(y, ref), it
    shapes = [v for k, v in repeat.NATIVE_SHAPES.items() if k[0] == "allreduce" and k[3] == alg]
    if alg == "native":
        assert shapes and not shapes[0].ours
    # a shape is decided once, whether MPI runs it or the compiled core's record of our plan; without the
    # compiled core a schedule's shape repeats the full path
    assert slow_calls[0] == (1 if shapes else 6)
    assert shapes or native.load() is None


def _state():
    from swing_mpi.state import find_state

    return find_state(WORLD)


@pytest.mark.skipif(native.load() is None, reason="no compiled core here")
@pytest.mark.parametrize("alg", ["swing-bw", "recdoub", "ring"])
@pytest.mark.parametrize("in_place", [False, True])
def test_the_core_record_runs_a_repeat_and_takes_one_number(alg, in_place):
    x = np.arange(9, dtype=np.float64) * (R + 1)
    y = np.empty(9) if not in_place else x.copy()
    send = (lambda: x) if not in_place else (lambda: MPI.IN_PLACE)
    swing_mpi.allreduce(WORLD, send(), y, algorithm=alg)
    t = repeat.NATIVE_RECORDS.get(id(y))
    run = t[6] if t is not None else None
    if run is None or type(run).__name__ != "Repeat":
        assert not in_place  # out of place, a plan that copies input bytes after the run has no record
        return
    st = _state()
    for _ in range(5):
        if in_place:
            y[...] = x
        seq = st.seq
        assert run(send(), y, MPI.SUM) is None  # what the repeat path calls
        assert st.seq == seq + 1
        assert np.allclose(y, _ref(x), rtol=1e-13)
        assert _same_everywhere(y)
    # what no longer fits is declined before any number is taken: nothing sent, the caller goes the full way
    seq = st.seq
    assert run(send(), np.empty(9, np.float32), MPI.SUM) is False  # another dtype
    assert run(send(), np.empty(8), MPI.SUM) is False  # another size
    assert run(send(), np.empty(18)[::2], MPI.SUM) is False  # not contiguous
    ro = np.empty(9)
    ro.flags.writeable = False
    assert run(send(), ro, MPI.SUM) is False  # read-only
    if not in_place:
        assert run(np.ones(9, np.int64), y, MPI.SUM) is False  # the input's dtype
    assert st.seq == seq


@pytest.mark.skipif(native.load() is None, reason="no compiled core here")
def test_every_path_takes_the_same_numbers_on_every_rank():
    """Every rank takes the same operation numbers, whichever path its call takes.

    Rank 0 repeats its arrays (the core's record), odd ranks pass new ones (the shape's record), the rest
    alternate, with nonblocking calls and a dropped plan cache in between: tags stay matched, results right.
    """
    x0 = np.arange(6, dtype=np.float64) + R
    y0 = np.empty(6)
    for it in range(12):
        if R == 0 or R % 2 == 0 and it % 2:
            x, y = x0, y0
        else:
            x, y = x0.copy(), np.empty(6)
        swing_mpi.allreduce(WORLD, x, y, algorithm="swing-lat")
        assert np.allclose(y, _ref(x0), rtol=1e-13) and _same_everywhere(y), it
        if it % 4 == 1:
            z = np.full(3, float(R))
            swing_mpi.iallreduce(WORLD, MPI.IN_PLACE, z, algorithm="swing-lat").Wait()
            assert np.array_equal(z, np.full(3, float(P * (P - 1) // 2)))
        if it == 6:
            _state().plans.clear()  # the records' plan is gone: they decline, the full path plans again


def test_floats_on_new_arrays_stay_bit_identical():
    rng = np.random.default_rng(R)
    for _ in range(4):
        x = rng.standard_normal(7)
        y = np.empty_like(x)
        swing_mpi.allreduce(WORLD, x, y, algorithm="native")
        assert np.allclose(y, _ref(x), rtol=1e-12, atol=1e-12)
        assert _same_everywhere(y)


def test_new_arrays_that_differ_take_the_full_path_and_its_errors(slow_calls):
    repeat.NATIVE_SHAPES.clear()
    swing_mpi.allreduce(WORLD, np.ones(6), np.empty(6), algorithm="native")
    assert slow_calls[0] == 1
    # every bad case below is the recorded shape (float64, 6 elements), so only the array checks stop it
    ro = np.empty(6)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        swing_mpi.allreduce(WORLD, np.ones(6), ro, algorithm="native")
    big = np.arange(12, dtype=np.float64)
    with pytest.raises(ValueError, match="overlap"):
        swing_mpi.allreduce(WORLD, big[:6], big[3:9], algorithm="native")
    with pytest.raises(ValueError, match="contiguous"):
        swing_mpi.allreduce(WORLD, np.ones(6), np.empty(12)[::2], algorithm="native")
    with pytest.raises(ValueError, match="datatype"):
        swing_mpi.allreduce(WORLD, np.ones(6, np.float32), np.empty(6), algorithm="native")
    with pytest.raises(ValueError, match="elements"):
        swing_mpi.allreduce(WORLD, np.ones(5), np.empty(6), algorithm="native")
    assert slow_calls[0] == 6
    # views that do not overlap are fine, and still go straight to MPI
    base = np.arange(12, dtype=np.float64) + R
    out = np.empty(12)[6:]
    swing_mpi.allreduce(WORLD, base[:6], out, algorithm="native")
    assert np.array_equal(out, _ref(base[:6].copy()))
    assert slow_calls[0] == 6
    # another op, option or communicator is another decision
    swing_mpi.allreduce(WORLD, np.ones(6), np.empty(6), MPI.MAX, algorithm="native")
    swing_mpi.allreduce(WORLD, np.ones(6), np.empty(6), algorithm="native", dims=(P,))
    assert slow_calls[0] == 8


def test_native_shapes_hold_no_array_alive_and_stay_bounded():
    import gc
    import weakref

    x, y = np.ones(3), np.empty(3)
    swing_mpi.allreduce(WORLD, x, y, algorithm="native")
    swing_mpi.allreduce(WORLD, np.ones(3), np.empty(3), algorithm="native")  # the shape path
    wx, wy = weakref.ref(x), weakref.ref(y)
    del x, y
    gc.collect()
    assert wx() is None and wy() is None
    for n in range(1, repeat.REPEATS_MAX + 20):
        swing_mpi.allreduce(WORLD, np.ones(n), np.empty(n), algorithm="native")
    assert len(repeat.NATIVE_SHAPES) <= repeat.REPEATS_MAX


@pytest.mark.parametrize("in_place", [False, True])
def test_reduce_scatter_block_and_allgather_on_new_arrays(in_place, monkeypatch):
    full = {"rs": 0, "ag": 0}
    orig = pipeline.call_args

    def counting(operation, *a):
        full["rs" if operation == "reduce_scatter_block" else "ag"] += 1
        return orig(operation, *a)

    monkeypatch.setattr(pipeline, "call_args", counting)
    repeat.NATIVE_SHAPES.clear()
    for it in range(5):
        x = (np.arange(3 * P, dtype=np.int64) + 1) * (R + 1) + it  # new arrays every call
        want = np.empty(3, np.int64)
        WORLD.Reduce_scatter_block(x, want, MPI.SUM)
        if in_place:
            y = x.copy()
            swing_mpi.reduce_scatter_block(WORLD, MPI.IN_PLACE, y, algorithm="native")
            assert np.array_equal(y[:3], want)
        else:
            y = np.empty(3, np.int64)
            swing_mpi.reduce_scatter_block(WORLD, x, y, algorithm="native")
            assert np.array_equal(y, want)
        g = np.full(2 * P, -1, np.int64)
        mine = np.array([R, it], np.int64)
        if in_place:
            g[2 * R:2 * R + 2] = mine
            swing_mpi.allgather(WORLD, MPI.IN_PLACE, g, algorithm="native")
        else:
            swing_mpi.allgather(WORLD, mine, g, algorithm="native")
        assert np.array_equal(g.reshape(P, 2), np.array([[r, it] for r in range(P)]))
    assert full == {"rs": 1, "ag": 1}  # decided once each; the other calls went straight to MPI
    # the recorded shapes do not let bad arrays through: the full checks' errors
    with pytest.raises(ValueError, match="overlap"):
        big = np.zeros(8 * P, np.int64)
        swing_mpi.allgather(WORLD, big[:2], big[:2 * P], algorithm="native")
    ro = np.empty(3 * P if in_place else 3, np.int64)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        swing_mpi.reduce_scatter_block(WORLD, MPI.IN_PLACE if in_place else np.ones(3 * P, np.int64), ro,
                                       algorithm="native")
    if not in_place:
        with pytest.raises(ValueError, match="datatype"):
            swing_mpi.allgather(WORLD, np.ones(2, np.float64), np.empty(2 * P, np.int64), algorithm="native")
