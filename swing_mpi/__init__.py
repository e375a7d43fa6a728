"""swing_mpi: the Swing allreduce (De Sensi et al., NSDI 2024) for torus networks, on MPI.

Drop-in use::

    from mpi4py import MPI
    import swing_mpi
    comm = swing_mpi.Intracomm(MPI.COMM_WORLD)   # Allreduce, Reduce_scatter(_block), Allgather are now ours
    comm.Allreduce(sendbuf, recvbuf, op=MPI.SUM)

or call :func:`allreduce`, :func:`reduce_scatter_block`, :func:`reduce_scatter`
and :func:`allgather` directly. The schedule generator, topology and simulator
(``swing_mpi.schedule``, ``swing_mpi.topology``, ``swing_mpi.simulate``)
import no MPI; the MPI side is imported on first use of one of its names.
:data:`rc` holds the ``SWING_MPI_*`` settings, read from the environment here (:mod:`swing_mpi.config`).
"""

from __future__ import annotations

from typing import Any

from .config import rc
from .schedule import ALGORITHMS
from .topology import Torus

__version__ = "0.1.0"

_API = ("allreduce", "iallreduce", "allreduce_init", "Request", "Intracomm")
_COLLECTIVES = ("reduce_scatter_block", "ireduce_scatter_block", "reduce_scatter_block_init",
                "reduce_scatter", "ireduce_scatter", "reduce_scatter_init",
                "allgather", "iallgather", "allgather_init")

__all__ = [*_API, *_COLLECTIVES, "CollectiveMismatchError", "CollectiveError", "ALGORITHMS", "Torus", "rc",
           "__version__"]


def __getattr__(name: str) -> Any:
    """Import the MPI side on first use of one of its names."""
    if name in _API or name in _COLLECTIVES:
        from . import api, collectives
        value = getattr(api if name in _API else collectives, name)
        globals()[name] = value  # later lookups are plain module attributes, not this hook
        return value
    if name == "CollectiveMismatchError":
        from .guard import CollectiveMismatchError
        globals()[name] = CollectiveMismatchError
        return CollectiveMismatchError
    if name == "CollectiveError":
        from .errors import CollectiveError
        globals()[name] = CollectiveError
        return CollectiveError
    raise AttributeError(f"module 'swing_mpi' has no attribute {name!r}")
