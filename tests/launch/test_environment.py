"""``$SWING_MPI_ALGORITHM`` and ``$SWING_MPI_DIMS`` are read once, at import (jobs launched from here)."""

from __future__ import annotations

PROGRAM = """
    import os
    import numpy as np
    from mpi4py import MPI
    import swing_mpi
    from swing_mpi import api
    comm = MPI.COMM_WORLD
    print("algorithm", api.resolve(None, comm.size, 8, MPI.SUM, MPI.DOUBLE))
    print("dims", api.dims_for(comm, None))
    os.environ["SWING_MPI_ALGORITHM"] = "bogus"   # too late: read at import
    x = np.arange(6.0)
    y = np.empty(6)
    swing_mpi.allreduce(comm, x, y)
    assert np.array_equal(y, x * comm.size)
    print("ok", flush=True)
"""


def test_variables_read_at_import(launch):
    r = launch(PROGRAM, 4, env={"SWING_MPI_ALGORITHM": "recdoub", "SWING_MPI_DIMS": "2x2"})
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("algorithm recdoub") == 4, r.stdout
    assert r.stdout.count("dims (2, 2)") == 4, r.stdout
    assert r.stdout.count("ok") == 4, r.stdout


def test_unknown_algorithm_in_environment_is_an_error(launch):
    r = launch(PROGRAM, 2, env={"SWING_MPI_ALGORITHM": "bogus"})
    assert r.returncode != 0
    assert "unknown algorithm 'bogus'" in r.stdout, r.stdout


CHECK_PROGRAM = """
    import numpy as np
    from mpi4py import MPI
    import swing_mpi
    comm = MPI.COMM_WORLD
    n = 7 if comm.rank == 1 else 8
    for check in (None, True):
        try:
            swing_mpi.allreduce(comm, np.ones(n), np.empty(n), algorithm="swing-bw", check=check)
            print("no error", flush=True)
        except swing_mpi.CollectiveMismatchError as e:
            print("mismatch:", e, flush=True)
    x = np.ones(8)
    y = np.empty(8)
    swing_mpi.allreduce(comm, x, y, algorithm="swing-bw", check=False)  # off for this call
    assert (y == comm.size).all()
    print("ok", flush=True)
"""


def test_swing_mpi_check_turns_the_mismatch_check_on_for_every_call(launch):
    r = launch(CHECK_PROGRAM, 3, env={"SWING_MPI_CHECK": "1"})
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("mismatch: allreduce: arguments differ between ranks (count differs: "
                          "8 on ranks 0, 2; 7 on rank 1)") == 6, r.stdout
    assert r.stdout.count("ok") == 3, r.stdout
