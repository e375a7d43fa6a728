"""Facts about an MPI op on a datatype that the algorithm choice needs.

The choice itself lives in :mod:`swing_mpi.choose`; it sees plain booleans
(exact, commutative, native bit-identical). This module is the one place that
turns an ``MPI.Op`` and an ``MPI.Datatype`` into those booleans.
"""

from __future__ import annotations

from mpi4py import MPI

from .buffers import numpy_dtype

__all__ = ["is_exact", "native_bit_identical"]

_EXACT_OPS = ("BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP")
_exact_cache: dict[tuple[int, int], bool] = {}


def is_exact(op: MPI.Op, datatype: MPI.Datatype) -> bool:
    """Tell whether ``op`` on ``datatype`` gives the same bits in any grouping (cached for predefined ones)."""
    if op.is_predefined and datatype.is_predefined:
        key = (op.py2f(), datatype.py2f())
        got = _exact_cache.get(key)
        if got is None:
            got = _exact_cache[key] = _is_exact(op, datatype)
        return got
    return _is_exact(op, datatype)


def _is_exact(op: MPI.Op, datatype: MPI.Datatype) -> bool:
    """Tell whether ``op`` on ``datatype`` gives the same bits in any grouping.

    True for integer (and bool) SUM/PROD/MAX/MIN, bitwise and logical ops and
    MAXLOC/MINLOC; false for floating-point SUM/PROD/MAX/MIN (rounding, signed
    zeros, NaNs) and for user-defined ops.
    """
    if any(op == getattr(MPI, n) for n in _EXACT_OPS if hasattr(MPI, n)):
        return True
    if any(op == o for o in (MPI.SUM, MPI.PROD, MPI.MAX, MPI.MIN)):
        dt = numpy_dtype(datatype)
        return dt is not None and dt.kind in "iub"
    return False


def native_bit_identical(op: MPI.Op, datatype: MPI.Datatype, exact: bool) -> bool:
    """Tell whether any MPI gives the same bits on every rank for ``op`` on ``datatype``.

    True for exact ops and for floating-point SUM/PROD: IEEE addition and
    multiplication are commutative, so a pairwise combine gives the same bits on
    both partners. Not for float MIN/MAX (MPICH's result with +0.0 and -0.0 mixed
    differs between ranks), and not for SUM on 8- and 16-bit integers: where it
    overflows, Open MPI's vectorised SUM saturates, while swing_mpi promises the
    wrapped value (as C and numpy compute it) under every MPI.
    """
    if op == MPI.SUM:
        dt = numpy_dtype(datatype)
        if dt is not None and dt.kind in "iu" and dt.itemsize <= 2:
            return False
    return exact or (op == MPI.SUM or op == MPI.PROD) and numpy_dtype(datatype) is not None
