"""Variables read once, at import (jobs launched from here).

``$SWING_MPI_ALGORITHM``, ``$SWING_MPI_DIMS``, ``$SWING_MPI_CHECK``, ``$SWING_MPI_WAIT`` and
``$SWING_MPI_SLEEP_US``.
"""

from __future__ import annotations

import pytest

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
    r = launch(PROGRAM, 2, env={"SWING_MPI_ALGORITHM": "bogus"}, stderr_files=True)
    assert r.returncode != 0
    assert "unknown algorithm 'bogus'" in r.stderr, r.stderr


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


NATIVE_THEN_CHECK_PROGRAM = """
    import numpy as np
    from mpi4py import MPI
    import swing_mpi
    comm = MPI.COMM_WORLD
    p = comm.size
    calls = {
        "allreduce": lambda n: swing_mpi.allreduce(comm, np.ones(n), np.empty(n), algorithm="native", check=check),
        "reduce_scatter_block": lambda n: swing_mpi.reduce_scatter_block(
            comm, np.ones(n * p), np.empty(n), algorithm="native", check=check),
        "allgather": lambda n: swing_mpi.allgather(comm, np.ones(n), np.empty(n * p), algorithm="native",
                                                   check=check),
    }
    for name, call in calls.items():
        check = False
        call(8)  # unchecked: a shape that went to MPI, not to be remembered while calls check by default
        check = None
        try:
            call(7 if comm.rank == 1 else 8)  # ranks 0 and 2 must check too, or rank 1 waits alone
            print("no error", flush=True)
        except swing_mpi.CollectiveMismatchError:
            print("mismatch", name, flush=True)
    print("ok", flush=True)
"""


def test_unchecked_native_calls_leave_the_default_check_on(launch):
    r = launch(NATIVE_THEN_CHECK_PROGRAM, 3, env={"SWING_MPI_CHECK": "1"})
    assert r.returncode == 0, r.stdout
    for name in ("allreduce", "reduce_scatter_block", "allgather"):
        assert r.stdout.count(f"mismatch {name}") == 3, r.stdout
    assert r.stdout.count("ok") == 3, r.stdout


WAIT_PROGRAM = """
    import numpy as np
    from mpi4py import MPI
    import swing_mpi
    comm = MPI.COMM_WORLD
    x = np.arange(1000, dtype=np.int64) * (comm.rank + 1)
    y = np.empty_like(x)
    for alg in ("swing-bw", "ring"):  # several lanes (Waitsome) and one (Waitall)
        swing_mpi.allreduce(comm, x, y, algorithm=alg)
        assert np.array_equal(y, np.arange(1000, dtype=np.int64) * (comm.size * (comm.size + 1) // 2)), alg
    print("ok", flush=True)
"""


@pytest.mark.parametrize("env", [{"SWING_MPI_WAIT": "spin"}, {"SWING_MPI_WAIT": "yield", "SWING_MPI_SLEEP_US": "300"},
                                 {"SWING_MPI_WAIT": "backoff"}, {"SWING_MPI_WAIT": "auto"}, {}])
def test_wait_settings_are_exact(launch, env):
    r = launch(WAIT_PROGRAM, 4, env=env)
    assert r.returncode == 0, r.stdout
    assert r.stdout.count("ok") == 4, r.stdout


@pytest.mark.parametrize(("var", "value", "message"), [
    ("SWING_MPI_WAIT", "busy", "SWING_MPI_WAIT='busy': expected one of auto, yield, spin, backoff"),
    ("SWING_MPI_SLEEP_US", "-5", "SWING_MPI_SLEEP_US='-5': expected microseconds >= 0"),
])
def test_bad_wait_settings_are_errors_at_import(launch, var, value, message):
    r = launch(WAIT_PROGRAM, 2, env={var: value}, stderr_files=True)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


POLICY_PROGRAM = """
    from mpi4py import MPI
    import swing_mpi
    from swing_mpi.state import comm_state
    print("policy", comm_state(MPI.COMM_WORLD).wait_policy, flush=True)
"""


@pytest.mark.parametrize("n", [1, 3, 4])
def test_an_unset_wait_policy_follows_the_ranks_per_core_of_the_host(launch, n):
    import os
    import re

    r = launch(POLICY_PROGRAM, n)
    assert r.returncode == 0, r.stdout
    got = re.findall(r"policy (\w+)", r.stdout)
    cores = len(os.sched_getaffinity(0))  # the launcher binds no ranks here: each may run on every core
    # more ranks than cores: they share memory here (MPI moves the bytes with their CPUs), so they yield
    assert got == ["yield" if n > cores else "spin"] * n, (got, cores)
