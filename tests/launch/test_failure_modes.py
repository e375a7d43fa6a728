"""An error on one rank must end the job, not hang it (mpiexec launched from here)."""

from __future__ import annotations

import re
import time

import pytest

PROGRAM = """
    import sys
    import numpy as np
    from mpi4py import MPI
    import swing_mpi
    comm = MPI.COMM_WORLD
    x = np.ones(1000)
    y = np.empty(1000)
    swing_mpi.allreduce(comm, x, y, algorithm="swing-bw")          # all fine
    if comm.rank == 1:
        bad = sys.argv[1]
        if bad == "buffer":   # a bad buffer on one rank only: ValueError there
            swing_mpi.allreduce(comm, x, np.empty(999), algorithm="swing-bw")
        elif bad == "op":     # a user op that raises in the middle of the schedule
            op = MPI.Op.Create(lambda a, b, t: 1 / 0, commute=True)
            swing_mpi.allreduce(comm, x, y, op, algorithm="swing-bw")
    else:
        swing_mpi.allreduce(comm, x, y, algorithm="swing-bw")
    print("finished", comm.rank, flush=True)
"""


@pytest.mark.parametrize("bad", ["buffer", "op"])
def test_error_on_one_rank_aborts_all_with_mpi4py_runner(launch, bad):
    t0 = time.time()
    r = launch(PROGRAM, 3, bad, stderr_files=True)  # the abort may drop the launcher's output
    elapsed = time.time() - t0
    assert r.returncode != 0, r.stdout
    assert elapsed < 50, f"took {elapsed:.0f} s: the job hung until MPIEXEC_TIMEOUT"
    # the failing rank reported its error: the traceback, ending in the exception that was raised
    err = r.stderr
    assert "Traceback" in err, err
    raised = [ln.split(":")[0] for ln in err.splitlines() if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", ln)]
    assert raised and raised[-1] == ("ValueError" if bad == "buffer" else "ZeroDivisionError"), err
    # ranks that already had all they needed may finish; the job still ends, non-zero
