"""The pure-Python engine's reduction kernel: :class:`Reducer`, ``local = peer op local`` on byte views.

numpy's ufunc where it is exactly MPI's operation, ``Op.Reduce_local`` for everything else; the
compiled core (:mod:`swing_mpi.native`) picks the same split (:func:`swing_mpi.program.kernel_for`).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .buffers import OP_NAMES, numpy_dtype

__all__ = ["Reducer", "op_name", "ufunc_for"]


def op_name(op: MPI.Op) -> str | None:
    """Return the name of the predefined ``op`` (``SUM``...), None for a user op."""
    for name in OP_NAMES:
        if op == getattr(MPI, name):
            return name
    return None


def ufunc_for(op: MPI.Op) -> np.ufunc | None:
    """Return numpy's ufunc for the predefined ``op``, if there is one."""
    for mpi_op, uf in ((MPI.SUM, np.add), (MPI.PROD, np.multiply), (MPI.MAX, np.maximum),
                       (MPI.MIN, np.minimum), (MPI.BAND, np.bitwise_and),
                       (MPI.BOR, np.bitwise_or), (MPI.BXOR, np.bitwise_xor)):
        if op == mpi_op:
            return uf
    return None


class Reducer:
    """``local = peer op local`` or ``local = local op peer`` on byte views.

    Uses a numpy ufunc where it is exactly MPI's operation (SUM on integer,
    float and complex types, PROD on integer and float ones; MAX, MIN and
    bitwise ops on integers); everything else goes through ``op.Reduce_local``
    (all predefined ops and datatypes, pair types for MAXLOC/MINLOC, user ops).
    Not complex PROD: numpy's complex multiply rounds differently in place and
    out of place (its loops differ in fused multiply-adds), so two ranks that
    combine the same values, one into its own buffer and one into another,
    would not get the same bits; the MPI library's loop is one loop.
    """

    def __init__(self, op: MPI.Op, datatype: MPI.Datatype) -> None:
        """Pick the ufunc for ``op`` on ``datatype``, if one is exactly MPI's operation."""
        self.op = op
        self.datatype = datatype
        self.extent = datatype.extent
        self.ufunc: np.ufunc | None = None
        self.dtype = numpy_dtype(datatype)
        self._view = self.dtype if self.dtype is not None else np.dtype(np.uint8)
        if self.dtype is not None:
            uf = ufunc_for(op)
            kind = self.dtype.kind
            if uf is not None:
                if op == MPI.SUM and kind in "iufc" or op == MPI.PROD and kind in "iuf":
                    self.ufunc = uf
                elif kind in "iu":
                    self.ufunc = uf
        self._tmp = np.empty(0, np.uint8)

    def __call__(self, peer: np.ndarray, local: np.ndarray, peer_first: bool) -> None:
        """Reduce the bytes ``peer`` into ``local`` (``peer_first``: ``peer op local``)."""
        n = len(local) // self.extent
        if not n:
            return
        if self.ufunc is not None:
            a = peer.view(self._view)
            b = local.view(self._view)
            if peer_first:
                self.ufunc(a, b, out=b)
            else:
                self.ufunc(b, a, out=b)
            return
        if peer_first:
            self.op.Reduce_local([peer, n, self.datatype], [local, n, self.datatype])
        else:
            # local op peer: reduce into the peer's (scratch) copy, then copy back
            self.op.Reduce_local([local, n, self.datatype], [peer, n, self.datatype])
            local[...] = peer

    def first(self, peer: np.ndarray, given: np.ndarray, local: np.ndarray, peer_first: bool) -> None:
        """``local = peer op given`` (``given op peer``): the first reduction into bytes still only in the input."""
        if self.ufunc is not None and len(local) // self.extent:
            a = peer.view(self._view)
            g = given.view(self._view)
            b = local.view(self._view)
            if peer_first:
                self.ufunc(a, g, out=b)
            else:
                self.ufunc(g, a, out=b)
            return
        local[...] = given
        self(peer, local, peer_first)
