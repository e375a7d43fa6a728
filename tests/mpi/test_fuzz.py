"""Property-based fuzzing of every allreduce path against ``comm.Allreduce`` (under mpiexec).

No dependency beyond numpy: rank 0 draws the cases from a seeded RNG and
broadcasts them, so every rank runs the same collectives. A case is a random

* torus shape: a random factorisation of ``p`` into 1–3 sides (sides of 1
  included), in random order, or ``None`` (the default ring);
* count: 0 … 5000, skewed small, often exactly ``k·p`` or ``k·2D·p`` (±1),
  ``p ± 1`` or a power of two ± 1;
* datatype and op, valid combinations only (MPI-4 §6.9.2): arithmetic on
  integers and floats, MAX/MIN not on complex, bitwise on integers and
  ``MPI.BYTE``, logical on integers and ``C_BOOL``, MAXLOC/MINLOC on every
  predefined pair type (with ties in value and index), a commutative and a
  non-commutative user op; PROD with small factors; float inputs with signed
  zeros, infinities and NaNs where the result does not depend on the order;
* buffer spec (``buf``, ``[buf, dt]``, ``[buf, count, dt]`` on a longer
  buffer, ``[buf, typecode]``), in place or not;
* algorithm: every registered one, ``auto`` and ``native``;
* call: blocking, ``iallreduce`` (``Wait`` or a ``Test`` loop) or
  ``allreduce_init`` + ``Start``/``Wait`` (once or twice, new data each time),
  through the functions or through ``swing_mpi.Intracomm``.

Properties checked: equal to ``comm.Allreduce`` (bits for integer and other
exact ops; integer SUM/PROD against numpy's wrapping arithmetic instead, since
MPI leaves overflow open and Open MPI saturates 8- and 16-bit sums: see
``reference.py``; values for float MAX/MIN, a summation/product error bound for
float SUM/PROD and the user sum), bit-identical on all ranks, the send buffer
untouched, elements past ``count`` untouched, no exception. Verdicts and
result CRCs are gathered once at the end (one ``allgather``).

Environment:
    SWING_MPI_FUZZ_SEED   seed (default: drawn at random by rank 0; printed)
    SWING_MPI_FUZZ_CASES  number of cases (default depends on the size)
    SWING_MPI_FUZZ_ONLY   run only these case numbers (``3`` or ``3,17``)
    SWING_MPI_FUZZ_VERBOSE=1  rank 0 prints each case to stderr before running it

Case ``i`` depends only on (seed, p, i), so a failure replays with the seed
and ``SWING_MPI_FUZZ_ONLY=i``; the failure message prints the command.
"""

from __future__ import annotations

import math
import os
import sys
import zlib

import numpy as np
import pytest
from mpi4py import MPI
from reference import reference_allreduce, wraps

import swing_mpi
from swing_mpi import ALGORITHMS, rc
from swing_mpi.topology import prime_factors

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()

ALGOS = sorted(ALGORITHMS) + ["auto", "native"]
MAX_COUNT = 5000


def default_cases(p: int) -> int:
    """60 cases up to 8 ranks; fewer above, so the file stays < 20 s at 16 ranks on 2 cores."""
    return 60 if p <= 8 else max(12, 60 * 8 // p)


def _env_int(name: str) -> int | None:
    v = os.environ.get(name, "").strip()
    return int(v, 0) if v else None


# -- datatypes and ops (valid combinations only) ------------------------------------------

INT_CODES = "bhilqBHILQ"
FLOAT_CODES = "fdg"
COMPLEX_CODES = "FDG"
ARITH = ["SUM", "PROD", "MAX", "MIN"]
BITWISE = ["BAND", "BOR", "BXOR"]
LOGICAL = ["LAND", "LOR", "LXOR"]

# MPI pair type -> (value dtype, numpy struct); the struct layout is C's, so its itemsize is the extent
PAIRS = {
    "DOUBLE_INT": "d",
    "FLOAT_INT": "f",
    "TWOINT": "i",
    "LONG_INT": "l",
    "SHORT_INT": "h",
    "LONG_DOUBLE_INT": "g",
}


def pair_dtype(name: str) -> np.dtype:
    return np.dtype([("val", PAIRS[name]), ("loc", np.intc)], align=True)


# -- case generation (rank 0) ---------------------------------------------------------------

def random_dims(rng: np.random.Generator, p: int) -> tuple[int, ...] | None:
    """Return a random factorisation of p into 1–3 sides (sides of 1 allowed), random order; or None."""
    if rng.random() < 0.1:
        return None
    k = int(rng.integers(1, 4))
    sides = [1] * k
    for f in prime_factors(p):
        sides[int(rng.integers(k))] *= f
    if rng.random() < 0.7 and k > 1:  # mostly without sides of 1, which are a corner case
        nz = [s for s in sides if s > 1]
        sides = nz or [1]
    rng.shuffle(sides)
    return tuple(int(s) for s in sides)


def random_count(rng: np.random.Generator, p: int, ndims: int) -> int:
    r = rng.random()
    d = int(rng.integers(-1, 2))
    if r < 0.08:
        return int(rng.choice([0, 1, 2]))
    if r < 0.18:
        return max(0, p + d)
    if r < 0.32:
        return max(0, int(rng.integers(1, 9)) * p + d)
    if r < 0.46:
        return max(0, int(rng.integers(1, 9)) * 2 * ndims * p + d)
    if r < 0.52:
        return max(0, 2 ** int(rng.integers(1, 13)) + d)
    # log-uniform on 1 … MAX_COUNT+1: skewed small
    return min(MAX_COUNT, int(math.exp(rng.uniform(0, math.log(MAX_COUNT + 1)))) - 1)


def random_kind_op(rng: np.random.Generator) -> tuple[str, str]:
    r = rng.random()
    if r < 0.36:
        return "int:" + str(rng.choice(list(INT_CODES))), str(rng.choice(ARITH + BITWISE + LOGICAL))
    if r < 0.58:
        return "float:" + str(rng.choice(list(FLOAT_CODES), p=[0.4, 0.45, 0.15])), str(rng.choice(ARITH))
    if r < 0.66:
        return "complex:" + str(rng.choice(list(COMPLEX_CODES), p=[0.4, 0.45, 0.15])), \
            str(rng.choice(["SUM", "PROD"]))
    if r < 0.72:
        return "bool", str(rng.choice(LOGICAL))
    if r < 0.75:
        return "byte", str(rng.choice(BITWISE))
    if r < 0.9:
        return "pair:" + str(rng.choice(list(PAIRS))), str(rng.choice(["MAXLOC", "MINLOC"]))
    return "user", str(rng.choice(["usersum", "matmul"]))


def make_case(seed: int, p: int, i: int) -> dict:
    """Case i of a run: a function of (seed, p, i) only."""
    rng = np.random.default_rng([seed, p, i])
    dims = random_dims(rng, p)
    kind, op = random_kind_op(rng)
    count = random_count(rng, p, len(dims) if dims else 1)
    explicit_only = kind in ("byte", "user") or kind.startswith("pair:")
    spec = str(rng.choice(["dt", "count_dt"] if explicit_only else ["plain", "dt", "count_dt", "typecode"]))
    mode = str(rng.choice(["blocking", "iallreduce", "init"], p=[0.5, 0.25, 0.25]))
    return {
        "i": i,
        "algorithm": str(rng.choice(ALGOS)),
        "dims": dims,
        "count": count,
        "kind": kind,
        "op": op,
        "inplace": bool(rng.random() < 0.4),
        "spec": spec,
        "pad": int(rng.integers(1, 4)) if spec == "count_dt" else 0,
        "mode": mode,
        "api": str(rng.choice(["func", "intracomm"], p=[0.7, 0.3])),
        "repeat": int(rng.integers(1, 3)) if mode == "init" else 1,
        "testloop": bool(rng.random() < 0.5),
        "special": bool(rng.random() < 0.3),
        **random_nodes(rng, p),
    }


def random_nodes(rng: np.random.Generator, p: int) -> dict:
    """Make a quarter of the cases, where a node of 2-4 ranks divides p, run on a torus of nodes of K ranks.

    ``chunk``: the lanes' least bytes (16: every rank of a node leads a lane; None: the default).
    Drawn last, so the other fields of a case do not depend on it.
    """
    ks = [k for k in (2, 3, 4) if p % k == 0]
    if not ks or rng.random() >= 0.25:
        return {"node": None, "chunk": None}
    k = int(rng.choice(ks))
    return {"node": k, "dims": random_dims(rng, p // k) or (p // k,),
            "chunk": [16, None][int(rng.integers(2))]}


def describe(c: dict) -> str:
    dims = "x".join(map(str, c["dims"])) if c["dims"] else "None"
    extra = f" repeat={c['repeat']}" if c["mode"] == "init" else ""
    extra += " testloop" if c["mode"] == "iallreduce" and c["testloop"] else ""
    extra += " specials" if c["special"] else ""
    if c["node"]:
        dims += f" (nodes of {c['node']}{', chunk ' + str(c['chunk']) if c['chunk'] else ''})"
    return (f"case {c['i']}: {c['algorithm']} dims={dims} count={c['count']} {c['kind']} {c['op']} "
            f"inplace={c['inplace']} spec={c['spec']}{'+' + str(c['pad']) if c['pad'] else ''} "
            f"mode={c['mode']} api={c['api']}{extra}")


# -- per-rank data ---------------------------------------------------------------------------

class Setup:
    """The MPI objects for a kind: datatype, op, numpy dtype, user ops (created once)."""

    def __init__(self) -> None:
        self.usersum = MPI.Op.Create(_user_sum, commute=True)
        self.matmul = MPI.Op.Create(_matmul, commute=False)
        self.mat = MPI.DOUBLE.Create_contiguous(4).Commit()

    def free(self) -> None:
        self.usersum.Free()
        self.matmul.Free()
        self.mat.Free()

    def types(self, kind: str, opname: str) -> tuple[np.dtype, MPI.Datatype, MPI.Op, int]:
        """(numpy element dtype, MPI datatype, op, numpy items per MPI element)."""
        if kind == "user":
            if opname == "usersum":
                return np.dtype(np.float64), MPI.DOUBLE, self.usersum, 1
            return np.dtype(np.float64), self.mat, self.matmul, 4
        op = getattr(MPI, opname)
        if kind.startswith("pair:"):
            name = kind[5:]
            dt = pair_dtype(name)
            mdt = getattr(MPI, name)
            assert dt.itemsize == mdt.extent, (name, dt.itemsize, mdt.extent)
            return dt, mdt, op, 1
        if kind == "bool":
            return np.dtype(np.bool_), MPI.C_BOOL, op, 1
        if kind == "byte":
            return np.dtype(np.uint8), MPI.BYTE, op, 1
        code = kind.split(":")[1]
        return np.dtype(code), MPI.Datatype.fromcode(code), op, 1


def _user_sum(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, dtype=np.float64)
    b = np.frombuffer(inoutbuf, dtype=np.float64)
    b += a


def _matmul(inbuf, inoutbuf, datatype):  # inout = in · inout, on 2x2 matrices
    a = np.frombuffer(inbuf, dtype=np.float64).reshape(-1, 2, 2)
    b = np.frombuffer(inoutbuf, dtype=np.float64).reshape(-1, 2, 2)
    b[...] = a @ b


def make_data(c: dict, dt: np.dtype, per: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Return this rank's input: n elements (n·per numpy items) for the case's kind and op."""
    kind, opname = c["kind"], c["op"]
    m = n * per
    if kind == "bool":
        return rng.integers(0, 2, m).astype(bool)
    if kind == "byte":
        return rng.integers(0, 256, m).astype(np.uint8)
    if kind == "user":
        if opname == "matmul":  # 0/1 matrices: products stay exact integers, order matters
            return rng.integers(0, 2, m).astype(np.float64)
        return rng.standard_normal(m) * rng.choice([1e3, 1.0, 1e-3], m)
    if kind.startswith("pair:"):
        x = np.zeros(m, dt)
        x["val"] = rng.integers(0, 3, m)  # few values: many ties (MPI: the lowest index wins)
        x["loc"] = np.where(rng.random(m) < 0.5, R, rng.integers(0, 4, m))  # ties in the index too
        return x
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if opname == "PROD":
            vals = [1, 2, 3, 0] if dt.kind == "u" else [1, -1, 2, 3, 0]
            return rng.choice(vals, m, p=[0.4, 0.25, 0.2, 0.15] if dt.kind == "u" else
                              [0.3, 0.2, 0.2, 0.15, 0.15]).astype(dt)
        if opname in LOGICAL:
            return rng.choice(np.array([0, 1, 2, info.max] + ([-1] if dt.kind == "i" else []), dt), m)
        x = rng.integers(info.min, info.max, m, dtype=dt, endpoint=True)
        if opname in ("MAX", "MIN") and rng.random() < 0.5:  # extremes and ties
            x = rng.choice(np.array([info.min, info.max, 0, 1], dtype=dt), m)
        return x
    if dt.kind == "f":
        if opname == "PROD":  # signed zeros are fine: a product's sign does not depend on order
            vals = [0.5, 1.0, 2.0, -1.0, 1.25, -0.75] + ([0.0, -0.0] if c["special"] else [])
            x = rng.choice(vals, m).astype(dt)
        elif opname in ("MAX", "MIN"):
            if c["special"]:  # ties, signed zeros, infinities (no NaN: MPI's MAX is order-dependent on NaN)
                x = rng.choice([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.5], m).astype(dt)
            else:
                x = (rng.standard_normal(m) * 100).astype(dt)
        else:  # SUM: mixed magnitudes, so the grouping changes the rounding
            x = (rng.choice([1e6, -1e6, 1e-2, 3.7], m) * rng.standard_normal(m)).astype(dt)
            if c["special"] and m:  # one sign of infinity per case: +inf + -inf would make NaN payloads
                k = max(1, m // 50)  # depend on the order, also in MPI's own allreduce
                inf = np.inf if (c["i"] % 2) else -np.inf
                x[rng.integers(0, m, k)] = inf
                x[rng.integers(0, m, k)] = np.nan
        return x
    if dt.kind == "c":
        if opname == "PROD":
            return rng.choice([1, -1, 1j, -1j, 0.5 + 0.5j, 1.25], m).astype(dt)
        return (rng.standard_normal(m) * 1e3 + 1j * rng.standard_normal(m)).astype(dt)
    raise AssertionError(kind)


# -- running and checking one case ----------------------------------------------------------

def _fields(a: np.ndarray) -> np.ndarray:
    """Pair types: the fields' values without the struct padding (MPI leaves padding undefined)."""
    if a.dtype.names:
        return np.stack([a[f].astype(np.longdouble) for f in a.dtype.names]) if a.size else np.zeros(0)
    return a


_LD_BYTES = (10 if np.finfo(np.longdouble).nmant == 63 else np.dtype(np.longdouble).itemsize)
"""Significant bytes of a long double (x87 extended: 10 of 16, the rest is undefined padding)."""


def canonical_bytes(a: np.ndarray) -> bytes:
    """Return the bytes that carry the values of ``a``: no struct padding, no long-double padding."""
    if a.dtype.names:
        return b"".join(canonical_bytes(np.ascontiguousarray(a[f])) for f in a.dtype.names)
    if a.dtype == np.clongdouble:
        return canonical_bytes(np.ascontiguousarray(a).view(np.longdouble))
    if a.dtype == np.longdouble:
        return np.ascontiguousarray(a).view(np.uint8).reshape(len(a), a.itemsize)[:, :_LD_BYTES].tobytes()
    return np.ascontiguousarray(a).tobytes()


def _spec(c: dict, buf: np.ndarray, n: int, mdt: MPI.Datatype):
    s = c["spec"]
    if s == "plain":
        return buf
    if s == "dt":
        return [buf, mdt]
    if s == "count_dt":
        return [buf, n, mdt]
    return [buf, buf.dtype.char]  # typecode


def _call(c: dict, sendspec, recvspec, op: MPI.Op) -> None:
    alg, dims, mode = c["algorithm"], c["dims"], c["mode"]
    if c["api"] == "intracomm":
        comm = swing_mpi.Intracomm(WORLD, algorithm=alg, dims=dims)
        blocking, nonblocking, init = comm.Allreduce, comm.Iallreduce, comm.Allreduce_init
    else:
        def blocking(s, r, o):
            swing_mpi.allreduce(WORLD, s, r, o, algorithm=alg, dims=dims)

        def nonblocking(s, r, o):
            return swing_mpi.iallreduce(WORLD, s, r, o, algorithm=alg, dims=dims)

        def init(s, r, o):
            return swing_mpi.allreduce_init(WORLD, s, r, o, algorithm=alg, dims=dims)
    if mode == "blocking":
        blocking(sendspec, recvspec, op)
    elif mode == "iallreduce":
        req = nonblocking(sendspec, recvspec, op)
        if c["testloop"]:
            while not req.Test():
                pass
        else:
            req.Wait()
    else:
        raise AssertionError(mode)


def _tolerant(c: dict, dt: np.dtype) -> bool:
    return (dt.kind in "fc" and c["op"] in ("SUM", "PROD")) or c["op"] == "usersum"


def _error_scale(c: dict, x: np.ndarray, dt: np.dtype) -> np.ndarray | None:
    """Σ|x| (Π|x| for PROD) over all ranks, for the rounding-error bound of inexact ops."""
    if not _tolerant(c, dt):
        return None
    wide = np.longdouble if dt in (np.longdouble, np.clongdouble) else np.float64
    scale = np.empty(len(x), wide)
    WORLD.Allreduce(np.abs(x).astype(wide), scale, MPI.PROD if c["op"] == "PROD" else MPI.SUM)
    return scale


def _compare(c: dict, out: np.ndarray, ref: np.ndarray, scale: np.ndarray | None,
             dt: np.dtype) -> str | None:
    """None if ``out`` is right; else what is wrong (``scale``: see :func:`_error_scale`)."""
    opname = c["op"]
    tolerant = scale is not None
    if dt.names or (dt.kind in "fc" and opname in ("MAX", "MIN")):
        a, b = _fields(out), _fields(ref)  # values: -0.0 == 0.0 (MPI's own choice is order-dependent)
        if np.array_equal(a, b):
            return None
        bad = np.flatnonzero((a != b).reshape(a.shape[0], -1).any(axis=0) if a.ndim > 1 else a != b)
    elif not tolerant:
        if out.tobytes() == ref.tobytes():
            return None
        bad = np.flatnonzero(out.view(np.uint8).reshape(len(out), -1)
                             != ref.view(np.uint8).reshape(len(ref), -1)) if len(out) else []
        bad = np.unique(np.asarray(bad) // max(1, out.dtype.itemsize)) if len(out) else bad
    else:
        # error bound of a sum (product) of p terms in any order: (p-1)·eps·Σ|x| (Π|x|), with slack
        wide = scale.dtype
        eps = float(np.finfo(dt).eps)
        tol = 4 * max(P, 2) * eps * scale + 1e-300
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(out.astype(np.result_type(out.dtype, wide)) - ref)
        ok = (diff <= tol) | (out == ref) | (np.isnan(out) & np.isnan(ref))
        if ok.all():
            return None
        bad = np.flatnonzero(~ok)
    i = int(bad[0]) if len(bad) else 0
    got = out[i] if len(out) else None
    want = ref[i] if len(ref) else None
    return f"{len(bad)} element(s) differ from the reference, first [{i}]: got {got!r}, expected {want!r}"


def run_case(c: dict, st: Setup, seed: int) -> tuple[list[str], int]:
    """Return this rank's problems with case c, and a CRC of its results (compared across ranks)."""
    dt, mdt, op, per = st.types(c["kind"], c["op"])
    n = c["count"]
    problems: list[str] = []
    crcs = []
    mode = c["mode"]
    req = None
    pad = c["pad"] * per
    rc.ranks_per_node = c["node"]
    rc.node_chunk = c["chunk"]
    try:
        # buffers, bound once (persistent requests keep them)
        x = np.zeros(n * per + pad, dt)
        out = np.zeros(n * per + pad, dt)
        sendspec = MPI.IN_PLACE if c["inplace"] else _spec(c, x, n, mdt)
        recvspec = _spec(c, out, n, mdt)
        for it in range(c["repeat"]):
            rng = np.random.default_rng([seed, P, c["i"], it, R])
            data = make_data(c, dt, per, n, rng)
            x[: n * per] = data
            if pad:
                x[n * per:] = make_data(c, dt, per, c["pad"], rng)
            if c["inplace"]:
                out[...] = x
            else:
                out.view(np.uint8)[...] = 0xA5  # garbage, including the struct padding
            tail = out[n * per:].tobytes()  # bytes: copy() of a padded struct need not keep the padding
            x_before = x.tobytes()
            if wraps(op, dt) and c["algorithm"] != "native":
                ref = reference_allreduce(WORLD, data, op)  # integer overflow: wrapped, not MPI's choice
            else:
                ref = np.zeros(n * per, dt)
                WORLD.Allreduce([data, n, mdt], [ref, n, mdt], op)
            scale = _error_scale(c, data, dt)  # a collective: before ours, whatever happens there
            if mode == "init":
                if req is None:
                    if c["api"] == "intracomm":
                        comm = swing_mpi.Intracomm(WORLD, algorithm=c["algorithm"], dims=c["dims"])
                        req = comm.Allreduce_init(sendspec, recvspec, op)
                    else:
                        req = swing_mpi.allreduce_init(WORLD, sendspec, recvspec, op,
                                                       algorithm=c["algorithm"], dims=c["dims"])
                req.Start()
                req.Wait()
            else:
                _call(c, sendspec, recvspec, op)
            res = out[: n * per]
            why = _compare(c, res, ref, scale, dt)
            if why:
                problems.append(f"iteration {it}: {why}" if c["repeat"] > 1 else why)
            if not c["inplace"] and x.tobytes() != x_before:
                problems.append("the send buffer was modified")
            if out[n * per:].tobytes() != tail:
                problems.append(f"elements past count={n} were written")
            crcs.append(zlib.crc32(canonical_bytes(res)))
    except Exception as e:  # noqa: BLE001 - a raise on every rank is a finding, not a crash of the run
        problems.append(f"raised {type(e).__name__}: {e}")
    finally:
        if req is not None:
            try:
                req.Free()
            except Exception as e:  # noqa: BLE001
                problems.append(f"Free() raised {type(e).__name__}: {e}")
        rc.ranks_per_node = rc.node_chunk = None
    return problems, zlib.crc32(repr(crcs).encode())


# -- the test --------------------------------------------------------------------------------

def _seed_and_cases() -> tuple[int, list[dict]]:
    if R == 0:
        seed = _env_int("SWING_MPI_FUZZ_SEED")
        if seed is None:
            seed = int.from_bytes(os.urandom(4), "little")
        n = _env_int("SWING_MPI_FUZZ_CASES")
        n = default_cases(P) if n is None else n
        only = os.environ.get("SWING_MPI_FUZZ_ONLY", "").strip()
        idx = [int(s) for s in only.split(",") if s.strip()] if only else range(n)
        cases = [make_case(seed, P, i) for i in idx]
        payload = (seed, cases)
    else:
        payload = None
    return WORLD.bcast(payload, root=0)


def _native_inexact(c: dict) -> bool:
    """Tell whether the case is MPI's own allreduce of an inexact op.

    MPI's own allreduce need not give the same bits everywhere for inexact ops, and MPICH's
    does not (e.g. float MIN/MAX of 0.0 and -0.0 with Allreduce_init/Iallreduce): not our promise.
    """
    return c["algorithm"] == "native" and (c["kind"] == "user" or c["kind"].split(":")[0] in ("float", "complex"))


def test_make_case_is_a_function_of_seed_size_index():
    a = [make_case(12345, P, i) for i in range(30)]
    b = [make_case(12345, P, i) for i in reversed(range(30))][::-1]
    assert a == b
    for c in a:
        if c["dims"] is not None:
            assert math.prod(c["dims"]) * (c["node"] or 1) == P and 1 <= len(c["dims"]) <= 3
        assert 0 <= c["count"] <= MAX_COUNT + 1


def test_fuzz_allreduce_against_mpi(capsys):
    seed, cases = _seed_and_cases()
    n_default = default_cases(P)

    def say(text: str) -> None:  # past pytest's capture: still there if a hang gets the job killed
        if R == 0:
            with capsys.disabled():
                print(text, file=sys.stderr, flush=True)

    say(f"test_fuzz: p={P} seed={seed} cases={len(cases)}")
    verbose = os.environ.get("SWING_MPI_FUZZ_VERBOSE", "") not in ("", "0")
    st = Setup()
    try:
        mine = []
        for c in cases:
            if verbose:
                say(f"test_fuzz: {describe(c)}")
            mine.append(run_case(c, st, seed))
    finally:
        st.free()
    everyone = WORLD.allgather(mine)
    failures = []
    for k, c in enumerate(cases):
        bad = {r: everyone[r][k][0] for r in range(P) if everyone[r][k][0]}
        if bad:
            r0 = min(bad)
            failures.append(f"{describe(c)}\n    rank {r0}: {'; '.join(bad[r0])}"
                            + (f" (and {len(bad) - 1} more rank(s))" if len(bad) > 1 else ""))
        elif len({everyone[r][k][1] for r in range(P)}) != 1 and not _native_inexact(c):
            failures.append(f"{describe(c)}\n    results are not bit-identical across ranks")
    if failures:
        only = ",".join(str(c["i"]) for c in cases if any(describe(c) in f for f in failures))
        ncases = os.environ.get("SWING_MPI_FUZZ_CASES", str(n_default))
        replay = (f"SWING_MPI_FUZZ_SEED={seed} SWING_MPI_FUZZ_ONLY={only} MPIEXEC_TIMEOUT=120 "
                  f"mpiexec -n {P} python -m mpi4py -m pytest --with-mpi -q tests/mpi/test_fuzz.py"
                  f"  (whole run: SWING_MPI_FUZZ_SEED={seed} SWING_MPI_FUZZ_CASES={ncases})")
        pytest.fail(f"fuzz seed {seed}, p={P}: {len(failures)} of {len(cases)} cases failed\n"
                    + "\n".join(failures[:15]) + f"\nreplay: {replay}", pytrace=False)
