"""Nodes as MPI itself reports them: hydra's hosts (MPICH), several ranks on each (jobs launched from here).

``mpiexec -launcher fork -hosts a:K,b:K,...`` starts every rank on this machine but tells MPICH
that they are on different hosts: ``Split_type(COMM_TYPE_SHARED)`` then gives each host's ranks,
which is how :mod:`swing_mpi.nodes` finds nodes without ``$SWING_MPI_RANKS_PER_NODE``.
Open MPI's launcher has no such pretence: skipped there (tests/mpi covers it with the variable).
"""

from __future__ import annotations

import subprocess

import pytest

PROGRAM = """
    import sys
    import numpy as np
    from mpi4py import MPI
    import swing_mpi
    from swing_mpi.nodes import node_layout
    comm = MPI.COMM_WORLD
    dims = sys.argv[1]
    for n in (1, 5000, 300_000):
        x = np.arange(n, dtype=np.int64) * (comm.rank + 1)
        y = np.empty_like(x)
        swing_mpi.allreduce(comm, x, y, dims=dims, algorithm="swing-bw")
        assert np.array_equal(y, np.arange(n) * (comm.size * (comm.size + 1) // 2)), n
    layout = node_layout(comm)
    print("node", comm.rank, layout.k, layout.nodes, layout.node, layout.local, flush=True)
"""


def _hydra(mpiexec) -> bool:
    out = subprocess.run([str(mpiexec), "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=60).stdout
    return "HYDRA" in out


def _run(launch, hosts: str, n: int, dims: str) -> subprocess.CompletedProcess:
    # MPICH over TCP between the hosts, as in the lab: a shared window left open at exit fails its finalize
    return launch(PROGRAM, n, dims, mpiexec_args=("-launcher", "fork", "-hosts", hosts),
                  env={"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"})


def test_hydra_hosts_are_the_nodes(mpiexec, launch):
    if not _hydra(mpiexec):
        pytest.skip("not MPICH's hydra: no -launcher fork -hosts to pretend several hosts")
    r = _run(launch, "a:2,b:2,c:2", 6, "3")
    assert r.returncode == 0, r.stdout
    rows = sorted(tuple(int(v) for v in ln.split()[1:]) for ln in r.stdout.splitlines() if ln.startswith("node "))
    assert rows == [(r, 2, 3, r // 2, r % 2) for r in range(6)]


def test_hosts_of_different_sizes_are_an_error(mpiexec, launch):
    if not _hydra(mpiexec):
        pytest.skip("not MPICH's hydra: no -launcher fork -hosts to pretend several hosts")
    r = _run(launch, "a:3,b:1", 4, "2")
    assert r.returncode != 0
    assert "the nodes hold different numbers of ranks: 3 on the node of rank 0, 1 on the node of rank 3" in r.stdout
