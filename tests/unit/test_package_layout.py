"""The package's shape: every module small, with an explicit ``__all__``, no private name imported across modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "swing_mpi"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
MAX_LINES = 600


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def test_the_package_is_where_the_tests_look():
    assert (PACKAGE / "__init__.py").is_file() and len(MODULES) > 40


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_is_over_600_lines(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{_name(path)} has {n} lines: split it by job"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_private_name_crosses_a_module(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            assert not private, f"{_name(path)} imports {private} from {'.' * node.level}{node.module or ''}"


@pytest.mark.parametrize("path", [p for p in MODULES if p.name not in ("__main__.py",)], ids=_name)
def test_every_module_declares_its_public_names(path):
    tree = ast.parse(path.read_text())
    declared = any(isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                        for t in node.targets) for node in tree.body)
    assert declared, f"{_name(path)} has no __all__"
