"""Facts about an MPI op on a datatype that the decision needs (defined with the other argument checks).

The decision itself lives in :mod:`swing_mpi.choose`; it sees plain booleans (exact, commutative,
native bit-identical), which :mod:`swing_mpi.buffers` derives from an ``MPI.Op`` and an
``MPI.Datatype`` while it checks a call's arguments.
"""

from __future__ import annotations

from .buffers import is_exact, native_bit_identical

__all__ = ["is_exact", "native_bit_identical"]
