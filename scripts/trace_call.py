"""Trace the path of one ``swing_mpi.allreduce`` call through the package's modules (``sys.setprofile``).

    mpiexec -n 2 python -m mpi4py scripts/trace_call.py [--check] [--algorithm auto] [--bytes 65536]

After a warmup call on other arrays (the communicator's state, tuning and plan exist), one call on new
arrays of the same shape is traced from the public function: every change of the running ``swing_mpi``
module is a step. Rank 0 prints the modules visited, how many times the path returns into a module it
had left ("climbs back"), how often each module is entered, and the path itself. :func:`trace` is what
tests/mpi/test_pipeline.py uses to keep the path from growing back.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["Path", "trace", "main", "RUN"]

RUN = {"swing_mpi.executor", "swing_mpi.waiting", "swing_mpi.transfers"}
"""The run's modules: a plan's steps go back and forth between them once per step (more steps, more p)."""


@dataclass(frozen=True)
class Path:
    """The modules one call ran in, in order (a new entry each time the running module changes)."""

    steps: tuple[str, ...]
    returns: tuple[bool, ...]
    """Per step: the path came back into that module (a return), not down into it (a call)."""

    @property
    def climbs(self) -> int:
        """Returns into a module the path had left (a callee's module returning to its caller's)."""
        return sum(self.returns)

    def merged(self, modules: set[str], name: str) -> Path:
        """Return the path with ``modules`` seen as one module ``name`` (a stage's own helpers)."""
        steps: list[str] = []
        returns: list[bool] = []
        for m, r in zip(self.steps, self.returns):
            m = name if m in modules else m
            if not steps or steps[-1] != m:
                steps.append(m)
                returns.append(r)
        return Path(tuple(steps), tuple(returns))

    @property
    def modules(self) -> tuple[str, ...]:
        """Every module visited, in order of first visit."""
        return tuple(dict.fromkeys(self.steps))

    @property
    def entries(self) -> Counter:
        """How often the path enters each module."""
        return Counter(self.steps)


def trace(fn: Callable[[], Any], package: str = "swing_mpi") -> Path:
    """Run ``fn()`` under ``sys.setprofile`` and return the path of ``package``'s modules it ran in."""
    stack: list[str] = []
    steps: list[str] = []
    returns: list[bool] = []

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        mod = frame.f_globals.get("__name__", "")
        if not (mod == package or mod.startswith(package + ".")):
            return
        if event == "call":
            if not stack or stack[-1] != mod:
                steps.append(mod)
                returns.append(False)
            stack.append(mod)
            return
        if stack:
            stack.pop()
        if stack and stack[-1] != mod:
            steps.append(stack[-1])
            returns.append(True)

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return Path(tuple(steps), tuple(returns))


def main() -> None:
    """Trace one call on rank 0's view and print the path."""
    import swing_mpi

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algorithm", default="auto")
    ap.add_argument("--bytes", type=int, default=65536)
    ap.add_argument("--check", action="store_true", help="compare the arguments across ranks (check=True)")
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    n = max(1, args.bytes // 8)

    arrays = [(np.full(n, comm.Get_rank() + 1.0), np.empty(n)) for _ in range(2)]

    def call(x: np.ndarray, y: np.ndarray) -> None:
        swing_mpi.allreduce(comm, x, y, MPI.SUM, algorithm=args.algorithm, check=args.check)

    call(*arrays[0])
    path = trace(lambda: call(*arrays[1]))  # new arrays: not a repeat
    if comm.Get_rank() == 0:
        short = [m.removeprefix("swing_mpi.") for m in path.steps]
        print(f"allreduce {args.bytes} B algorithm={args.algorithm} check={args.check} on {comm.Get_size()} ranks")
        print(f"modules visited: {len(path.modules)}; climbs back: {path.climbs}; steps: {len(path.steps)}")
        print("entries: " + ", ".join(f"{m.removeprefix('swing_mpi.')} {k}" for m, k in path.entries.most_common()))
        print("path: " + " -> ".join(short))
        run = path.merged(RUN, "swing_mpi.executor")
        print(f"with the run's modules ({', '.join(sorted(m.removeprefix('swing_mpi.') for m in RUN))}) as one: "
              f"{len(run.modules)} modules, {run.climbs} climbs back")


if __name__ == "__main__":
    main()
