"""The emulated torus lab: one network namespace per torus node, rate-limited veth links.

* :mod:`.plan` -- the lab as pure data (names, addresses, links, routes, command lines);
* :mod:`.system` -- running commands, namespaces, capabilities (:func:`lab_available`), the TCP
  congestion control this host lets a namespace use (:func:`choose_tcp_cc`),
  stale cleanup, and the launcher helpers :func:`find_mpiexec` and :func:`kill_group`;
* :mod:`.lab` -- :class:`Lab` builds the torus, runs MPI in it (one rank per node, or several
  on shared memory), tears it down;
* :mod:`.checks` -- route and link-rate checks (:class:`CheckResult`);
* :mod:`.agent` -- the TCP traffic agent the rate checks run in every node;
* :mod:`.cli` -- the ``swing-mpi lab`` / ``python -m swing_mpi.lab`` command.
"""

from .checks import CheckResult, RateResult
from .lab import MPI_ENV, NODE_VARIABLES, RANK_VARIABLES, Lab, lab_mpi_env
from .plan import Command, LabPlan, Link, Port, Route, make_plan
from .system import (
    LabError,
    LabReport,
    LabUnavailableError,
    MpiexecNotFoundError,
    TcpChoice,
    choose_tcp_cc,
    cleanup_stale,
    find_mpiexec,
    kill_group,
    lab_available,
    lab_report,
    list_namespaces,
    require_lab,
)

__all__ = [
    "Lab",
    "LabError",
    "LabUnavailableError",
    "MpiexecNotFoundError",
    "CheckResult",
    "RateResult",
    "lab_available",
    "lab_report",
    "LabReport",
    "choose_tcp_cc",
    "TcpChoice",
    "require_lab",
    "cleanup_stale",
    "list_namespaces",
    "find_mpiexec",
    "kill_group",
    "MPI_ENV",
    "RANK_VARIABLES",
    "NODE_VARIABLES",
    "lab_mpi_env",
    "LabPlan",
    "Link",
    "Port",
    "Route",
    "Command",
    "make_plan",
]
