"""``SWING_MPI_TIMEOUT``: a rank that never arrives makes the others raise TimeoutError naming it.

On a later call (the schedule's waits) and on a communicator's first call (its set-up's waits).
"""

from __future__ import annotations

import re
import time

import pytest

PROGRAM = """
    import sys, time
    import numpy as np
    from mpi4py import MPI
    import swing_mpi
    comm = MPI.COMM_WORLD
    algorithm, dims, first, check = sys.argv[1], sys.argv[2], sys.argv[3] == "first", sys.argv[3] == "check"
    algorithm = None if algorithm == "default" else algorithm
    x = np.ones(1000)
    y = np.empty(1000)
    if first:
        comm = comm.Dup()        # a communicator nobody has used with swing_mpi yet
        import swing_mpi.api     # imported before the clock starts: the timeout bounds waits, not imports
    else:
        swing_mpi.allreduce(comm, x, y, algorithm=algorithm, dims=dims)    # all ranks: fine
        assert (y == comm.size).all()
    comm.Barrier()
    if comm.rank == 1:
        time.sleep(60)           # never arrives (the abort below ends it)
    t0 = time.monotonic()
    try:
        swing_mpi.allreduce(comm, x, y, algorithm=algorithm, dims=dims, check=check)
    except TimeoutError as e:
        line = f"rank {comm.rank} TimeoutError after {time.monotonic() - t0:.2f} s: {e}"
        with open(f"timeout-rank{comm.rank}.txt", "w") as f:  # a file: the launcher may drop output on Abort
            f.write(line + "\\n")
        print(line, flush=True)
        if "waiting for rank 1 " not in str(e):
            time.sleep(1)        # stuck behind the ranks that wait for rank 1: let those report before the abort
        MPI.COMM_WORLD.Abort(3)  # as the message says: MPICH's Abort on comm waits for rank 1 to take a message
    else:
        print(f"rank {comm.rank} returned without the missing rank", flush=True)
"""


def _timeouts(launch, tmp_path, n, algorithm, dims, when):
    """Launch PROGRAM with rank 1 missing from the ``when`` call; return each report and the job's result.

    Checks what every report must hold: the job failed, no rank returned, no report comes from rank 1,
    each rank raised within the timeout (2 s) + 2 s, and the job ended within 40 s.
    """
    t0 = time.monotonic()
    r = launch(PROGRAM, n, algorithm, dims, when, env={"SWING_MPI_TIMEOUT": "2"}, timeout=100)
    elapsed = time.monotonic() - t0
    assert r.returncode != 0, r.stdout
    assert "returned without the missing rank" not in r.stdout, r.stdout
    reports = "".join(f.read_text() for f in sorted(tmp_path.glob("timeout-rank*.txt")))
    got = re.findall(r"rank (\d+) TimeoutError after ([\d.]+) s: (.*)", reports)
    assert got, r.stdout
    for rank, seconds, message in got:
        assert rank != "1"
        assert 2.0 <= float(seconds) < 4.0, (seconds, message)  # within the timeout + 2 s
    assert elapsed < 40, f"the job took {elapsed:.0f} s to end after the abort"
    return got, r


@pytest.mark.parametrize(("n", "algorithm", "dims"), [(2, "swing-lat", "2"), (4, "swing-bw", "2x2")])
def test_a_missing_rank_raises_timeout_error_naming_it(launch, tmp_path, n, algorithm, dims):
    got, r = _timeouts(launch, tmp_path, n, algorithm, dims, "later")
    for _, _, message in got:
        assert f"allreduce ({algorithm}" in message
        assert "waiting for rank" in message and "SWING_MPI_TIMEOUT" in message
        assert "end the job (MPI.COMM_WORLD.Abort())" in message
    if n == 2:
        assert re.search(r"waiting for rank 1 \((receive from|send to|receive from and send to) it\) in step 0 ",
                         got[0][2]), got[0][2]
    else:
        assert any("waiting for rank 1 " in m for _, _, m in got), r.stdout


@pytest.mark.parametrize(("n", "algorithm", "dims"), [(2, "default", "2"), (3, "swing-lat", "3"),
                                                      (4, "swing-bw", "2x2")])
def test_a_rank_missing_from_the_first_call_is_named_too(launch, tmp_path, n, algorithm, dims):
    """The set-up of a communicator's first call waits within the timeout, and names who did not come."""
    got, _ = _timeouts(launch, tmp_path, n, algorithm, dims, "first")
    for _, _, message in got:
        assert "the first call on this communicator" in message, message
        assert re.search(r"waiting for (rank \d+, )*rank 1\b", message), message
        assert "SWING_MPI_TIMEOUT" in message and "end the job (MPI.COMM_WORLD.Abort())" in message


def test_the_mismatch_check_of_a_later_call_waits_within_the_timeout(launch, tmp_path):
    r = launch(PROGRAM, 3, "swing-lat", "3", "check", env={"SWING_MPI_TIMEOUT": "2"}, timeout=100)
    assert r.returncode != 0, r.stdout
    reports = "".join(f.read_text() for f in sorted(tmp_path.glob("timeout-rank*.txt")))
    got = re.findall(r"rank (\d+) TimeoutError after ([\d.]+) s: (.*)", reports)
    assert got, r.stdout
    for rank, seconds, message in got:
        assert rank != "1" and 2.0 <= float(seconds) < 4.0, (rank, seconds, message)
        assert "the mismatch check of allreduce" in message and re.search(r"waiting for (rank \d+, )*rank 1\b", message)


def test_bad_timeout_value_is_an_error(launch):
    r = launch("import swing_mpi.executor\n", 1, env={"SWING_MPI_TIMEOUT": "soon"}, stderr_files=True)
    assert r.returncode != 0
    assert "SWING_MPI_TIMEOUT='soon'" in r.stderr, r.stderr
