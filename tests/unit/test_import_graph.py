"""The package's import graph, read from the source: no import circle, and the simulator below the benchmark.

Every ``import`` and ``from … import`` of a module counts, wherever it is: at the top, inside a
function (a lazy import is still a dependency) and under ``if TYPE_CHECKING:`` (a circle of type
annotations is still a circle for the reader and for mypy). ``from .pkg import name`` is an edge to
the submodule ``pkg.name`` when there is one, else to ``pkg`` itself; the schedule registry's builders,
imported by name, are edges of ``swing_mpi.schedule``. The parent packages that
Python runs before a submodule are not edges: a package's ``__init__`` re-exporting its submodules
would otherwise make a circle of every package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from swing_mpi.schedule import ALGORITHMS

PACKAGE = Path(__file__).resolve().parents[2] / "swing_mpi"

SIMULATOR = "swing_mpi.netsim"
ABOVE_THE_SIMULATOR = ("swing_mpi.bench", "swing_mpi.calibrate", "swing_mpi.probe")
"""What the simulator must not reach, directly or through other modules: the benchmark and the probe
write the engine's costs; the simulator reads them from a file (:mod:`swing_mpi.engine_costs`)."""


def module_files(package: Path) -> dict[str, tuple[Path, bool]]:
    """Return ``dotted name -> (file, is a package)`` of every module under ``package``."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (path, is_pkg)
    return out


def _target(module: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """Return the absolute name that ``from <node.module>`` means inside ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_pkg:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    """Return ``module -> {imported module of the package: line of the first such import}``."""
    modules = module_files(package)
    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_pkg) in modules.items():
        edges = graph.setdefault(name, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found: list[str] = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names if a.name in modules]
            elif isinstance(node, ast.ImportFrom):
                target = _target(name, is_pkg, node)
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    found.append(sub if sub in modules else target)
            for other in found:
                if other in modules and other != name:
                    edges[other] = min(edges.get(other, node.lineno), node.lineno)
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """Return one import circle ``[a, b, …, a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (c := visit(w)):
                return c
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state and (c := visit(v)):
            return c
    return None


def reach(graph: dict[str, dict[str, int]], starts: list[str]) -> dict[str, str]:
    """Return every module reachable from ``starts``: ``module -> the module that imports it on the way``."""
    via: dict[str, str] = {s: s for s in starts}
    todo = list(starts)
    while todo:
        v = todo.pop()
        for w in graph.get(v, ()):
            if w not in via:
                via[w] = v
                todo.append(w)
    return via


def _describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_the_graph_sees_the_package():
    graph = import_graph(PACKAGE)
    assert len(graph) > 40
    assert "swing_mpi.schedule.base" in graph["swing_mpi.schedule.swing"]
    assert "swing_mpi.engine_costs" in graph["swing_mpi.netsim.params"]  # a function-level import counts


def test_no_import_circle():
    graph = import_graph(PACKAGE)
    for info in ALGORITHMS.values():  # the registry imports its builders by name
        graph["swing_mpi.schedule"].setdefault("swing_mpi.schedule" + info.target.split(":")[0], 0)
    cycle = find_cycle(graph)
    assert cycle is None, f"import circle: {_describe(cycle, graph)}"


@pytest.mark.parametrize("below", ABOVE_THE_SIMULATOR)
def test_the_simulator_does_not_reach_the_benchmark(below):
    graph = import_graph(PACKAGE)
    via = reach(graph, [m for m in graph if m == SIMULATOR or m.startswith(SIMULATOR + ".")])
    hit = sorted(m for m in via if m == below or m.startswith(below + "."))
    if hit:
        chain = [hit[0]]
        while via[chain[-1]] != chain[-1]:
            chain.append(via[chain[-1]])
        pytest.fail(f"{SIMULATOR} reaches {below}: {' <- '.join(chain)}")


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_a_circle_through_a_function_or_type_checking_is_found(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "from .a import f\n",
        "pkg/a.py": "from .sub import b\n\ndef f():\n    return b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "def g():\n    from ..a import f\n    return f\n",
    })
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b": 1} and graph["pkg.sub.b"] == {"pkg.a": 2}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]

    pkg = _write(tmp_path / "t", {
        "pkg/__init__.py": "",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n",
        "pkg/d.py": "import pkg.c\n",
    })
    assert find_cycle(import_graph(pkg)) == ["pkg.c", "pkg.d", "pkg.c"]


def test_a_package_and_its_submodules_are_no_circle(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "from .a import f\nfrom . import b\n",
        "pkg/a.py": "from . import b\n\ndef f():\n    return b\n",
        "pkg/b.py": "X = 1\n",
    })
    graph = import_graph(pkg)
    assert graph["pkg"] == {"pkg.a": 1, "pkg.b": 2}
    assert find_cycle(graph) is None
    assert set(reach(graph, ["pkg.a"])) == {"pkg.a", "pkg.b"}
