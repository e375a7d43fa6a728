"""The reference a swing_mpi result is compared with: ``MPI_Allreduce``, except where MPI leaves it open.

Integer SUM and PROD that overflow have no result MPI defines: MPICH wraps around (as C's unsigned
arithmetic and numpy do), Open MPI's vectorised SUM on 8- and 16-bit integers saturates (int8
73 + 73 gives 127 on a long vector, -110 on a one-element one). swing_mpi always wraps, with the
same bits on every rank. For those (op, type) pairs the reference is therefore computed here: every
rank's input gathered and reduced with numpy in rank order (wrapping arithmetic is associative and
commutative, so any order gives these bits). Everything else is compared with the MPI library.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

__all__ = ["wraps", "reference_allreduce", "builds"]


def wraps(op: MPI.Op, dtype: np.dtype) -> bool:
    """Tell whether ``op`` on ``dtype`` is integer arithmetic whose overflow MPI leaves undefined."""
    return np.dtype(dtype).kind in "iu" and (op == MPI.SUM or op == MPI.PROD)


def reference_allreduce(comm: MPI.Intracomm, data: np.ndarray, op: MPI.Op,
                        datatype: MPI.Datatype | None = None) -> np.ndarray:
    """Return the allreduce of every rank's ``data`` (collective: call it on every rank).

    ``MPI_Allreduce`` on ``[data, datatype]``, except integer SUM/PROD (see the module doc),
    reduced here with numpy's wrapping arithmetic.
    """
    if wraps(op, data.dtype) and not data.dtype.names:
        parts = comm.allgather(np.ascontiguousarray(data))
        out = parts[0].copy()
        ufunc = np.add if op == MPI.SUM else np.multiply
        for part in parts[1:]:
            ufunc(out, part, out=out)
        return out
    out = np.empty_like(data)
    if datatype is None:
        comm.Allreduce(data, out, op)
    else:
        comm.Allreduce([data, datatype], [out, datatype], op)
    return out


def builds(algorithm: str, dims: tuple[int, ...], rank: int) -> bool:
    """Tell whether ``algorithm`` has a schedule on ``dims`` (some need a torus of their own shape)."""
    from swing_mpi.schedule import build_schedule

    try:
        build_schedule(algorithm, dims, rank, 8)
    except ValueError:
        return False
    return True
