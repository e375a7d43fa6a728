"""One opener for the schedule builders: every builder of the registry starts with ``open_schedule``."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

from swing_mpi.schedule import ALGORITHMS, build_schedule
from swing_mpi.schedule.base import Schedule, open_schedule


def test_one_rank_gives_the_empty_schedule():
    torus, alone = open_schedule("ring", 0, (1, 1), 5)
    assert torus.dims == (1, 1)
    assert alone == Schedule("ring", 0, 1, 5, (1, 1), (), (), {})
    torus, alone = open_schedule("ring", 3, (2, 2), 5)
    assert torus.size == 4 and alone is None


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("dims", [(1,), (1, 1)])
def test_every_algorithm_on_one_rank(name, dims):
    s = build_schedule(name, dims, 0, 7)
    assert (s.algorithm, s.size, s.count, s.dims, s.lanes, s.nsteps) == (name, 1, 7, dims, (), 0)


def _opens(fn) -> bool:
    """Tell whether ``fn`` calls ``open_schedule``, or hands over to a builder of its module that does."""
    tree = ast.parse(inspect.getsource(fn).lstrip())
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    if "open_schedule" in called:
        return True
    module = importlib.import_module(fn.__module__)
    return any(name.startswith("build_") and _opens(getattr(module, name))
               for name in called if name != fn.__name__ and hasattr(module, name))


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_builder_opens_with_the_opener(name):
    builder = inspect.unwrap(ALGORITHMS[name].builder())
    assert _opens(builder), f"{name}: {builder.__module__}.{builder.__name__} does not start with open_schedule"
