"""Our requests are mpi4py requests: every ``MPI.Request``/``MPI.Prequest`` call takes them, mixed with MPI's own.

At 8 B, 64 KiB and 4 MiB, for ``auto``, ``native``, ``swing-bw`` and ``recdoub`` (run under mpiexec at
2-8 ranks, with ``SWING_MPI_ENGINE=python`` and ``c``, on MPICH and Open MPI).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi
from swing_mpi.progress import ENGINE
from swing_mpi.request import CancelError, PersistentRequest, Request

pytestmark = pytest.mark.mpi

WORLD = MPI.COMM_WORLD
P = WORLD.Get_size()
R = WORLD.Get_rank()
SIZES = [8, 64 << 10, 4 << 20]
ALGORITHMS = ["auto", "native", "swing-bw", "recdoub"]
CASES = [(n, a) for n in SIZES for a in ALGORITHMS]
IDS = [f"{n}B-{a}" for n, a in CASES]
DEADLINE = 60.0
"""Seconds a polling loop may take before the test calls it a hang."""


def _vectors(nbytes, k=0):
    n = max(1, nbytes // 8)
    x = np.arange(n, dtype=np.float64) + R + k
    return x, np.zeros(n), np.arange(n, dtype=np.float64) * P + P * (P - 1) / 2 + k * P


def _halo(k=0):
    """Start a plain MPI exchange around the ring (receive from the left, send to the right), as real codes mix in."""
    got = np.zeros(3, np.int64)
    mine = np.full(3, R * 10 + k, np.int64)
    left, right = (R - 1) % P, (R + 1) % P
    return [WORLD.Irecv(got, left, 51), WORLD.Isend(mine, right, 51)], got, ((R - 1) % P) * 10 + k


def _until(check):
    t = time.monotonic()
    while not check():
        assert time.monotonic() - t < DEADLINE, "no progress: a hang"


def _ours(req):
    return isinstance(req, Request)


def test_the_progress_thread_runs_under_mpi4pys_default():
    assert MPI.Query_thread() == MPI.THREAD_MULTIPLE
    c = swing_mpi.Intracomm(WORLD, algorithm="swing-bw")
    x, y, want = _vectors(64)
    c.Iallreduce(x, y).Wait()
    assert ENGINE.enabled and np.allclose(y, want)


@pytest.mark.parametrize(("nbytes", "algorithm"), CASES, ids=IDS)
def test_nonblocking_in_mpis_waits_mixed_with_plain_requests(nbytes, algorithm):
    c = swing_mpi.Intracomm(WORLD, algorithm=algorithm)
    x, y, want = _vectors(nbytes)
    req = c.Iallreduce(x, y)
    assert isinstance(req, MPI.Request)
    if algorithm in ("swing-bw", "recdoub") and P > 1:
        assert _ours(req)
    halo, got, left = _halo()
    statuses = [MPI.Status() for _ in range(3)]
    assert MPI.Request.Waitall([req, *halo], statuses) is True
    assert np.allclose(y, want) and (got == left).all()
    assert statuses[0].Get_error() == MPI.SUCCESS and req == MPI.REQUEST_NULL

    for k, how in enumerate(("Waitany", "Waitsome", "Testall", "Testany", "Testsome")):
        x, y, want = _vectors(nbytes, k + 1)
        halo, got, left = _halo(k + 1)
        reqs = [c.Iallreduce(x, y), *halo]
        if how == "Waitany":
            for _ in reqs:
                assert MPI.Request.Waitany(reqs) != MPI.UNDEFINED
        elif how == "Waitsome":
            _until(lambda reqs=reqs: MPI.Request.Waitsome(reqs) is None)
        elif how == "Testall":
            _until(lambda reqs=reqs: MPI.Request.Testall(reqs))
        elif how == "Testany":
            _until(lambda reqs=reqs: MPI.Request.Testany(reqs) == (MPI.UNDEFINED, True))
        else:
            _until(lambda reqs=reqs: MPI.Request.Testsome(reqs) is None)
        assert all(r == MPI.REQUEST_NULL for r in reqs), how
        assert np.allclose(y, want) and (got == left).all(), how


@pytest.mark.parametrize(("nbytes", "algorithm"), CASES, ids=IDS)
def test_nonblocking_instance_methods(nbytes, algorithm):
    c = swing_mpi.Intracomm(WORLD, algorithm=algorithm)
    x, y, want = _vectors(nbytes)
    st = MPI.Status()
    assert c.Iallreduce(x, y).Wait(st) is True
    assert st.Get_error() == MPI.SUCCESS and np.allclose(y, want)

    x, y, want = _vectors(nbytes, 1)
    req = c.Iallreduce(x, y)
    _until(req.Get_status)
    assert req != MPI.REQUEST_NULL  # Get_status leaves it as it is
    assert req.Test(st) and req == MPI.REQUEST_NULL and np.allclose(y, want)
    assert req.Test() and req.Wait()  # a null request: complete at once, as in MPI

    x, y, want = _vectors(nbytes, 2)
    req = c.Iallreduce(x, y)
    _until(req.Test)
    assert np.allclose(y, want)

    x, y, want = _vectors(nbytes, 3)
    req = c.Iallreduce(x, y)
    handle = req.py2f()
    assert MPI.Request.f2py(handle) == req
    if _ours(req):
        with pytest.raises(CancelError, match="cannot be cancelled"):
            req.Cancel()
    req.Wait()
    assert np.allclose(y, want)

    x, y, want = _vectors(nbytes, 4)
    req = c.Iallreduce(x, y)
    if not _ours(req):  # Open MPI 5 refuses to free its own active collective request: MPI's matter
        req.Wait()
        return
    req.Free()  # MPI: the operation still completes; the progress thread finishes it
    assert req == MPI.REQUEST_NULL
    _until(lambda: np.allclose(y, want))
    WORLD.Barrier()


@pytest.mark.parametrize(("nbytes", "algorithm"), CASES, ids=IDS)
def test_persistent_in_mpis_startall_mixed_with_plain_persistent_requests(nbytes, algorithm):
    c = swing_mpi.Intracomm(WORLD, algorithm=algorithm)
    x, y, want = _vectors(nbytes)
    req = c.Allreduce_init(x, y)
    assert isinstance(req, MPI.Prequest)
    if algorithm in ("swing-bw", "recdoub") and P > 1:
        assert isinstance(req, PersistentRequest)
    got = np.zeros(2, np.int64)
    mine = np.zeros(2, np.int64)
    plain = [WORLD.Recv_init(got, (R - 1) % P, 52), WORLD.Send_init(mine, (R + 1) % P, 52)]
    try:
        for k in range(4):
            x[:] = np.arange(len(x)) + R + k
            mine[:] = R + k
            every = [plain[0], req, plain[1]]
            MPI.Prequest.Startall(every)
            if k % 2 and isinstance(req, PersistentRequest):
                # MPICH 5.0.2's Testall over its own persistent collective and point-to-point requests
                # reports "Pending request" in a status: MPI's matter, not tested here
                _until(lambda every=every: MPI.Request.Testall(every))
            else:
                assert MPI.Request.Waitall(every)
            assert np.allclose(y, want + k * P), k
            assert (got == (R - 1) % P + k).all()
        for k in range(3):
            x[:] = np.arange(len(x)) + R + 10 + k
            req.Start()
            st = MPI.Status()
            if k == 0:
                assert req.Wait(st) is True and st.Get_error() == MPI.SUCCESS
            elif k == 1:
                _until(req.Test)
            else:
                _until(req.Get_status)
                req.Wait()
            assert np.allclose(y, want + (10 + k) * P), k
            assert req != MPI.REQUEST_NULL  # inactive, ready to start again
        x[:] = np.arange(len(x)) + R
        MPI.Prequest.Startall([req])
        idx = MPI.Request.Waitany([req])
        assert idx == 0 and np.allclose(y, want)
        if isinstance(req, PersistentRequest):
            with pytest.raises(CancelError):
                req.Cancel()
    finally:
        req.Free()
        for r in plain:
            r.Free()
    assert req == MPI.REQUEST_NULL


@pytest.mark.parametrize("algorithm", ["swing-bw", "recdoub"])
def test_several_persistent_requests_started_together_in_any_order(algorithm):
    """Startall over several of ours (a different list order on each rank): each owns its tags, none mix."""
    c = swing_mpi.Intracomm(WORLD, algorithm=algorithm)
    vecs = [_vectors(64 << 10, k) for k in range(3)]
    reqs = [c.Allreduce_init(x, y) for x, y, _ in vecs]
    order = reqs[R % 3:] + reqs[:R % 3]
    for _ in range(3):
        MPI.Prequest.Startall(order)
        MPI.Request.Waitall(order[::-1])
    for (_, y, want) in vecs:
        assert np.allclose(y, want)
    c.Allreduce(vecs[0][0], vecs[0][1])  # a blocking call in between keeps its own numbering
    for r in reqs:
        r.Free()


def test_swing_request_waitall_drives_ours_and_takes_statuses():
    c = swing_mpi.Intracomm(WORLD, algorithm="swing-bw")
    x, y, want = _vectors(64 << 10)
    halo, got, left = _halo()
    reqs = [c.Iallreduce(x, y), *halo]
    statuses = [MPI.Status() for _ in reqs]
    assert swing_mpi.Request.Waitall(reqs, statuses)
    assert np.allclose(y, want) and (got == left).all()
    x, y, want = _vectors(8)
    reqs = [c.Iallreduce(x, y)]
    _until(lambda: swing_mpi.Request.Testall(reqs))
    assert np.allclose(y, want)


def test_the_halves_give_mpi_requests_too():
    c = swing_mpi.Intracomm(WORLD, algorithm="swing-bw")
    n = 3
    x = np.arange(n * P, dtype=np.float64) + R
    y = np.zeros(n)
    g = np.zeros(n * P)
    reqs = [c.Ireduce_scatter_block(x, y), c.Iallgather(x[:n], g)]
    MPI.Request.Waitall(reqs)
    assert np.allclose(y, np.arange(R * n, R * n + n) * P + P * (P - 1) / 2)
    assert np.allclose(g, np.concatenate([np.arange(n) + r for r in range(P)]))
    pers = [c.Reduce_scatter_block_init(x, y), c.Allgather_init(x[:n], g)]
    y[:] = 0
    g[:] = 0
    MPI.Prequest.Startall(pers)
    MPI.Request.Waitall(pers)
    assert np.allclose(y, np.arange(R * n, R * n + n) * P + P * (P - 1) / 2)
    assert np.allclose(g, np.concatenate([np.arange(n) + r for r in range(P)]))
    for r in pers:
        r.Free()
