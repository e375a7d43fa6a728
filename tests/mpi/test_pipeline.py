"""The path of one call through the package stays short (scripts/trace_call.py's tracer), under mpiexec.

mpiexec -n 2 python -m mpi4py -m pytest --with-mpi tests/mpi/test_pipeline.py
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI

import swing_mpi
from swing_mpi import repeat
from swing_mpi.state import comm_state

pytestmark = pytest.mark.mpi

_spec = importlib.util.spec_from_file_location("trace_call", Path(__file__).parents[2] / "scripts" / "trace_call.py")
assert _spec is not None and _spec.loader is not None
trace_call = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("trace_call", trace_call)  # its dataclass looks its module up there
_spec.loader.exec_module(trace_call)

MAX_MODULES = 9
"""Modules one call may run in: the public function's (api), the pipeline, its stages' (buffers: the
checked arguments; state: dims and the communicator's state; choose: the decision; repeat: the record for
the next call) and the run's (executor; with the Python engine, its reduction kernel's module, reducer, and
its waiting module)."""
MAX_CLIMBS = 10
"""Returns into a module the path had left (the run's modules seen as one, whose steps loop between them)."""


def _path(comm, *, algorithm, nbytes, check=False, **kw):
    n = max(1, nbytes // 8)
    arrays = [(np.full(n, comm.Get_rank() + 1.0), np.empty(n)) for _ in range(2)]

    def call(x, y):
        swing_mpi.allreduce(comm, x, y, MPI.SUM, algorithm=algorithm, check=check, **kw)

    call(*arrays[0])  # the communicator's state and plan exist: what every later call on new arrays finds
    repeat.NATIVE_SHAPES.clear()  # none recorded (earlier tests' would add a look into them: one more climb)
    path = trace_call.trace(lambda: call(*arrays[1]))
    assert arrays[1][1][0] == comm.Get_size() * (comm.Get_size() + 1) / 2
    return path


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("algorithm", ["auto", "swing-bw", "recdoub"])
def test_an_allreduce_on_new_arrays_visits_few_modules(algorithm):
    comm = MPI.COMM_WORLD.Dup()
    comm_state(comm).trial = False  # a settled call's path (a trial's calls: tests/mpi/test_online.py)
    try:
        path = _path(comm, algorithm=algorithm, nbytes=65536)
        assert path.steps[0] == "swing_mpi.api" and "swing_mpi.pipeline" in path.modules
        assert len(path.modules) <= MAX_MODULES, path.steps
        run = path.merged(trace_call.RUN, "swing_mpi.executor")  # the run's per-step loop grows with p
        assert run.climbs <= MAX_CLIMBS, run.steps
        if comm.Get_size() == 2:  # one step: the whole path
            assert path.climbs <= MAX_CLIMBS, path.steps
    finally:
        comm.Free()


@pytest.mark.mpi(min_size=2)
def test_a_checked_call_adds_only_the_check():
    comm = MPI.COMM_WORLD.Dup()
    try:
        plain = _path(comm, algorithm="swing-bw", nbytes=65536)
        checked = _path(comm, algorithm="swing-bw", nbytes=65536, check=True)
        # the check's agreement waits in swing_mpi.waiting's bounded collectives, which the plain call
        # no longer enters where the compiled core waits in C
        assert set(checked.modules) - set(plain.modules) <= {"swing_mpi.guard", "swing_mpi.waiting"}
        run = checked.merged(trace_call.RUN, "swing_mpi.executor")
        assert len(checked.modules) <= MAX_MODULES + 1 and run.climbs <= MAX_CLIMBS + 5, run.steps
    finally:
        comm.Free()


def test_the_tracer_counts_modules_and_climbs():
    path = trace_call.trace(lambda: swing_mpi.choose.keeps_order("recdoub", "allreduce"))
    assert path.modules[0] == "swing_mpi.choose" and path.climbs >= 1  # choose -> schedule -> choose
