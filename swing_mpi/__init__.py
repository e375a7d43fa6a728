"""swing_mpi: the Swing allreduce (De Sensi et al., NSDI 2024) for torus networks, on MPI.

Drop-in use::

    from mpi4py import MPI
    import swing_mpi
    comm = swing_mpi.Intracomm(MPI.COMM_WORLD)   # Allreduce is now Swing's
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)

or call :func:`allreduce` directly. The schedule generator, topology and
simulator (``swing_mpi.schedule``, ``swing_mpi.topology``,
``swing_mpi.simulate``) import no MPI.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["allreduce", "iallreduce", "allreduce_init", "Request", "Intracomm", "ALGORITHMS", "Torus",
           "__version__"]

from .schedule import ALGORITHMS
from .topology import Torus


def __getattr__(name: str) -> Any:  # the MPI side is imported on first use
    if name in ("allreduce", "iallreduce", "allreduce_init", "Request", "Intracomm"):
        from . import api
        value = getattr(api, name)
        globals()[name] = value  # later lookups are plain module attributes (this hook cost 2 µs a call)
        return value
    raise AttributeError(f"module 'swing_mpi' has no attribute {name!r}")
