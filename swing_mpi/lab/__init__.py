"""The emulated torus lab: one network namespace per torus node, rate-limited veth links.

* :mod:`.plan` -- the lab as pure data (names, addresses, links, routes, command lines);
* :mod:`.netns` -- :class:`Lab` builds it, checks it, runs MPI in it, tears it down;
* :mod:`.cli` -- the ``swing-mpi lab`` / ``python -m swing_mpi.lab`` command.
"""

from .netns import (
    MPI_ENV,
    CheckResult,
    Lab,
    LabError,
    LabUnavailable,
    RateResult,
    cleanup_stale,
    find_mpiexec,
    lab_available,
    list_namespaces,
    require_lab,
)
from .plan import Command, LabPlan, Link, Port, Route, make_plan

__all__ = [
    "Lab",
    "LabError",
    "LabUnavailable",
    "CheckResult",
    "RateResult",
    "lab_available",
    "require_lab",
    "cleanup_stale",
    "list_namespaces",
    "find_mpiexec",
    "MPI_ENV",
    "LabPlan",
    "Link",
    "Port",
    "Route",
    "Command",
    "make_plan",
]
