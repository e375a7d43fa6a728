"""The options of ``swing-mpi bench`` as data: their defaults, the algorithm lists and :class:`Config`.

Below :mod:`~swing_mpi.bench.cli` (which adds them to a parser and runs) and
:mod:`~swing_mpi.bench.measure` (which reads a :class:`Config`); imports no MPI.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from ..schedule import AUTO, NATIVE
from ..units import parse_rate, parse_size, parse_sizes, parse_time
from .points import DEFAULT_MAX_BYTES, point_sizes
from .results import ALLREDUCE, COLLECTIVES

__all__ = [
    "QUICK_SIZES", "DEFAULT_SIZES", "DEFAULT_ITERS", "DEFAULT_WARMUP", "DEFAULT_MAX_TIME", "STARTS", "DTYPES", "OPS",
    "ITEMSIZE", "DESCRIPTION", "registered_algorithms", "parse_algorithms", "Config",
]

QUICK_SIZES = "8,1K,32K,1M"
"""``--quick``: a few sizes up to 1 MiB."""

DEFAULT_SIZES = "8:1M"
DEFAULT_ITERS = 20
DEFAULT_WARMUP = 3
DEFAULT_MAX_TIME = 5.0

STARTS = ("auto", "barrier", "sync")
"""``--start``: how a timed call starts (:class:`swing_mpi.bench.timing.SyncStart` for ``sync``;
``auto``: :func:`swing_mpi.bench.timing.auto_start` picks one of the other two)."""

DTYPES = ("float64", "float32", "int64", "int32", "uint8", "complex128")
OPS = ("sum", "prod", "max", "min", "band", "bor", "bxor")
ITEMSIZE = {"float64": 8, "float32": 4, "int64": 8, "int32": 4, "uint8": 1, "complex128": 16}

_MPI_NAME = {"reduce_scatter": "reduce_scatter_block"}
"""``--collective``'s name -> the collective's name here (MPI's: the reduce-scatter of equal blocks)."""

DESCRIPTION = "swing-mpi bench: our collectives against the MPI library's own, side by side (run under mpiexec)"


def registered_algorithms(collective: str = ALLREDUCE) -> tuple[str, ...]:
    """Return our algorithms for ``collective``, as the registry marks them (read at run time, no MPI)."""
    from ..schedule import ALGORITHMS

    family = COLLECTIVES[collective].registry
    return tuple(name for name, info in ALGORITHMS.items() if family in info.collectives)


def parse_algorithms(spec: str | None, known: Sequence[str] | None = None, *,
                     collective: str = ALLREDUCE) -> list[str]:
    """Turn ``"native,swing-bw,auto"`` into a list; ``None``/``"all"``: ``native`` + every registered one.

    ``all`` may appear inside a list (``auto,all``). ``known``: the algorithms
    to accept (default: the registry's for ``collective``). Unknown names raise
    ``ValueError``.
    """
    known = tuple(registered_algorithms(collective) if known is None else known)
    every = [NATIVE] + [a for a in known if a not in (NATIVE, AUTO)]
    if spec is None or not str(spec).strip():
        return every
    out: list[str] = []
    for name in str(spec).split(","):
        name = name.strip()
        if not name:
            continue
        for n in every if name == "all" else [name]:
            if n not in (NATIVE, AUTO) and n not in known:
                what = "algorithm" if collective == ALLREDUCE else f"algorithm for {collective}"
                raise ValueError(f"unknown {what} {n!r}; known: {', '.join((AUTO, NATIVE) + known)}, all")
            if n not in out:
                out.append(n)
    if not out:
        raise ValueError(f"no algorithms in {spec!r}")
    return out


class Config:
    """The parsed options with defaults (``--quick``) applied; pure data."""

    def __init__(self, args: argparse.Namespace) -> None:
        """Read ``args`` (from :func:`build_parser`); raise ``ValueError`` for options that do not fit."""
        quick = bool(getattr(args, "quick", False))
        self.collective: str = getattr(args, "collective", None) or ALLREDUCE
        self.collective = _MPI_NAME.get(self.collective, self.collective)
        if self.collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {self.collective!r}; known: {', '.join(COLLECTIVES)}")
        self.dtype: str = args.dtype
        # what is really sent: whole elements, at least one (8 B of float64 for --sizes 1:8); the
        # reduce-scatter and all-gather round again to whole blocks per rank when p is known
        asked = parse_sizes(args.sizes if args.sizes else (QUICK_SIZES if quick else DEFAULT_SIZES))
        self.sizes = point_sizes(asked, ITEMSIZE[self.dtype])
        self.rounded = sorted({n for n in asked if n not in self.sizes})
        """Sizes asked for that are not whole elements (measured rounded: rank 0 says so)."""
        self.algorithms = parse_algorithms(args.algorithms, collective=self.collective)
        self.dims: str | None = args.dims
        self.node_env: str | None = getattr(args, "node_env", None)
        if self.node_env and not self.dims:
            raise ValueError("--node-env needs --dims (the torus the node numbers refer to)")
        if COLLECTIVES[self.collective].reduces:
            self.op: str = args.op or "sum"
        elif args.op:
            raise ValueError(f"--op: {self.collective} takes no reduction op")
        else:
            self.op = "none"
        self.warmup: int = args.warmup if args.warmup is not None else (2 if quick else DEFAULT_WARMUP)
        self.iters: int = args.iters if args.iters is not None else (10 if quick else DEFAULT_ITERS)
        if self.iters < 1 or self.warmup < 0:
            raise ValueError("--iters must be >= 1 and --warmup >= 0")
        self.max_bytes = parse_size(args.max_bytes) if args.max_bytes is not None else DEFAULT_MAX_BYTES
        self.max_time: float = args.max_time if args.max_time is not None else DEFAULT_MAX_TIME
        self.places = ["out", "in"] if args.both else (["in"] if args.inplace else ["out"])
        self.check = not args.no_check
        self.interleave = not getattr(args, "blocked", False)
        self.batch: int = getattr(args, "batch", 1)
        if self.batch < 1:
            raise ValueError(f"--batch must be >= 1, got {self.batch}")
        settle = getattr(args, "settle", None)
        self.settle: int = 0 if settle is None else int(settle)
        if self.settle < 0:
            raise ValueError(f"--settle must be >= 0, got {self.settle}")
        streak = getattr(args, "streak", None)
        self.streak: int = 1 if streak is None else int(streak)
        if self.streak < 1:
            raise ValueError(f"--streak must be >= 1, got {self.streak}")
        if self.streak > 1 and not self.interleave:
            raise ValueError("--streak K gives each algorithm turns of K calls in the round robin; "
                             "--blocked times all of an algorithm's calls in one block already: use one of them")
        self.start: str = getattr(args, "start", None) or "auto"
        if self.start not in STARTS:
            raise ValueError(f"--start {self.start!r}: expected one of {', '.join(STARTS)}")
        self.seed: int = args.seed
        self.label: str | None = args.label
        self.csv: str | None = args.csv
        self.json: str | None = args.json
        self.plot: str | None = args.plot
        self.bw_unit: str = args.bw_unit
        link = getattr(args, "model_link", None)
        alpha = getattr(args, "model_alpha", None)
        self.model_rate: float | None = parse_rate(link, "--model-link") if link is not None else None
        """Bits per second."""
        self.model_alpha: float | None = parse_time(alpha, "--model-alpha") if alpha is not None else None
        """Seconds."""
        self.model_congestion: str = getattr(args, "model_congestion", "routed")
        self.quiet: bool = args.quiet
        if self.dtype == "complex128" and self.op in ("max", "min"):
            raise ValueError("max/min are not defined for complex numbers")
        if self.op in ("band", "bor", "bxor") and not self.dtype.startswith(("int", "uint")):
            raise ValueError(f"--op {self.op} needs an integer --dtype")

    def model_params(self) -> dict[str, Any] | None:
        """Return the model's keyword arguments (link rate in B/s, α in s, congestion), or ``None``."""
        if self.model_rate is None:
            return None
        return {"link_bytes_per_s": self.model_rate / 8,
                "alpha": self.model_alpha or 0.0, "congestion": self.model_congestion}
