"""Torus topology: dims, rank <-> coordinates, ports and hop distances.

Coordinates follow MPI's Cartesian convention (row-major, last dimension
fastest), so a communicator made with ``MPI.Compute_dims``/``Create_cart``
maps one to one: on a 4x4 torus rank 1 is (0, 1) and rank 4 is (1, 0).

A *port* is one direction of one dimension. Port ``2*k`` goes ``+1`` along
dimension ``k``, port ``2*k + 1`` goes ``-1``.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, Union

__all__ = ["Torus", "DimsLike", "parse_dims", "node_dims", "balanced_dims", "prime_factors", "require_two_nodes"]

DimsLike = Union["Torus", str, int, Sequence[int], None]


def prime_factors(n: int) -> list[int]:
    """Prime factors of ``n``, ascending, with repeats."""
    out, f = [], 2
    while f * f <= n:
        while n % f == 0:
            out.append(f)
            n //= f
        f += 1
    if n > 1:
        out.append(n)
    return out


def balanced_dims(p: int, ndims: int) -> tuple[int, ...]:
    """Factor ``p`` into ``ndims`` balanced sides, largest first.

    The same rule as ``MPI.Compute_dims``: place prime factors, largest first,
    onto the currently smallest side.
    """
    if p < 1:
        raise ValueError(f"number of ranks must be >= 1, got {p}")
    if ndims < 1:
        raise ValueError(f"number of dimensions must be >= 1, got {ndims}")
    dims = [1] * ndims
    for f in sorted(prime_factors(p), reverse=True):
        i = dims.index(min(dims))
        dims[i] *= f
    return tuple(sorted(dims, reverse=True))


def require_two_nodes(dims: Sequence[int]) -> None:
    """Raise ``ValueError`` for a network of one node, where a model or simulation has nothing to say.

    An allreduce on one rank moves nothing and takes no time (its goodput would be infinite): the
    library's calls handle it, but the cost model and the network simulator are asked about networks.
    """
    if math.prod(dims) < 2:
        raise ValueError(f"dims {'x'.join(map(str, dims))} make one node: an allreduce there moves nothing "
                         "and takes no time; give at least 2 nodes")


def _is_int(x: Any) -> bool:
    """Return whether ``x`` is an integer (Python's or numpy's): not a bool, not a whole float."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def parse_dims(spec: Any, p: int | None = None) -> tuple[int, ...]:
    """Turn ``"4x4"``, ``(4, 4)``, ``16`` or ``None`` into a dims tuple.

    ``None`` means a 1-D ring of ``p``; ``"2d"``/``"3d"`` a balanced
    factorisation of ``p`` into that many sides (like ``MPI.Compute_dims``).
    Raises ``ValueError`` with what was given and what was expected.
    """
    if spec is None:
        if p is None:
            raise ValueError("dims=None needs the number of ranks p")
        return (p,)
    if isinstance(spec, Torus):
        dims: tuple[int, ...] = spec.dims
    elif isinstance(spec, str) and re.fullmatch(r"\s*\d+\s*d\s*", spec.lower()):
        # "2d", "3d": a balanced factorisation of p, like MPI.Compute_dims
        if p is None:
            raise ValueError(f"dims {spec!r} needs the number of ranks p")
        dims = balanced_dims(p, int(spec.lower().strip()[:-1]))
    elif isinstance(spec, str):
        text = spec.strip().lower().replace("×", "x").replace("*", "x")
        if not re.fullmatch(r"\s*-?\d+(\s*x\s*-?\d+)*\s*", text):
            raise ValueError(
                f"cannot parse dims {spec!r}: expected sides joined by 'x', e.g. '4x4' or '2x2x4'"
            )
        dims = tuple(int(s) for s in text.split("x"))
    elif _is_int(spec):
        dims = (int(spec),)
    else:
        try:
            items = list(spec)
        except TypeError:
            raise ValueError(f"cannot use {spec!r} as torus dims: expected e.g. (4, 4) or '4x4'") from None
        if not all(_is_int(s) for s in items):
            raise ValueError(f"torus dims must be integers, e.g. (4, 4) or '4x4', got {spec!r}")
        dims = tuple(int(s) for s in items)
    if not dims:
        raise ValueError("torus dims must have at least one side")
    if any(d < 1 for d in dims):
        raise ValueError(f"torus sides must be >= 1, got {'x'.join(map(str, dims))}")
    if p is not None and math.prod(dims) != p:
        raise ValueError(
            f"torus dims {'x'.join(map(str, dims))} hold {math.prod(dims)} ranks, "
            f"but the communicator has {p} (dims of nodes must divide the ranks)"
        )
    return dims


@lru_cache(maxsize=64)
def _node_dims(spec: Any, p: int) -> tuple[int, ...] | None:
    try:
        dims = parse_dims(spec)
    except ValueError:
        return None  # "2d" and bad specs: parse_dims(spec, p) says what is wrong
    n = math.prod(dims)
    return None if n == p or p % n else dims


def node_dims(spec: Any, p: int) -> tuple[int, ...] | None:
    """Return ``spec``'s dims where they are a torus of nodes: fewer places than the ``p`` ranks, dividing them.

    ``None``: a torus of ranks (product ``p``), or dims for :func:`parse_dims` to accept or refuse.
    """
    try:
        return _node_dims(spec, p)
    except TypeError:  # unhashable (a list): not cached
        return _node_dims.__wrapped__(spec, p)


@dataclass(frozen=True)
class Torus:
    """A torus with sides ``dims`` (row-major ranks, last dimension fastest)."""

    dims: tuple[int, ...]

    def __post_init__(self) -> None:
        """Validate and normalise ``dims``."""
        object.__setattr__(self, "dims", parse_dims(self.dims))

    # -- construction -----------------------------------------------------
    @classmethod
    def from_spec(cls, spec: DimsLike, p: int | None = None, *, ndims: int | None = None) -> Torus:
        """Dims from a tuple, a ``"4x4"`` string, ``ndims`` (balanced) or a ring of ``p``."""
        if ndims is not None:
            if spec is not None:
                raise ValueError("give either dims or ndims, not both")
            if p is None:
                raise ValueError("ndims needs the number of ranks p")
            return cls(balanced_dims(p, ndims))
        return cls(parse_dims(spec, p))

    @classmethod
    def from_cartcomm(cls, comm: Any) -> Torus:
        """Build the torus of an mpi4py ``Cartcomm`` (its own dims)."""
        dims = tuple(comm.Get_topo()[0]) if hasattr(comm, "Get_topo") else tuple(comm.dims)
        return cls(dims)

    # -- basic facts ------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of nodes."""
        return math.prod(self.dims)

    @property
    def ndims(self) -> int:
        """Number of dimensions."""
        return len(self.dims)

    @property
    def nports(self) -> int:
        """Ports per node, ``2D``."""
        return 2 * self.ndims

    def __str__(self) -> str:
        """Format as ``4x4``."""
        return "x".join(map(str, self.dims))

    @cached_property
    def _strides(self) -> tuple[int, ...]:
        strides, s = [], 1
        for d in reversed(self.dims):
            strides.append(s)
            s *= d
        return tuple(reversed(strides))

    def coords(self, rank: int) -> tuple[int, ...]:
        """Coordinates of ``rank`` (MPI Cartesian order)."""
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is outside a torus of {self.size} ranks")
        return tuple((rank // s) % d for s, d in zip(self._strides, self.dims))

    def rank(self, coords: Iterable[int]) -> int:
        """Rank of ``coords``; each coordinate is taken modulo its side."""
        c = tuple(coords)
        if len(c) != self.ndims:
            raise ValueError(f"expected {self.ndims} coordinates, got {c}")
        return sum((x % d) * s for x, d, s in zip(c, self.dims, self._strides))

    def shift(self, rank: int, dim: int, offset: int) -> int:
        """Return the rank ``offset`` steps away from ``rank`` along ``dim`` (wrapping)."""
        c = list(self.coords(rank))
        c[dim] = (c[dim] + offset) % self.dims[dim]
        return self.rank(c)

    def neighbor(self, rank: int, port: int) -> int:
        """Return the neighbour on ``port`` (``2k``: +1 along k, ``2k+1``: -1 along k)."""
        if not 0 <= port < self.nports:
            raise ValueError(f"port {port} out of range for a {self.ndims}-D torus")
        return self.shift(rank, port // 2, 1 if port % 2 == 0 else -1)

    @staticmethod
    def ring_distance(a: int, b: int, d: int) -> int:
        """Hops between ``a`` and ``b`` on a ring of ``d``, the shorter way round."""
        x = (b - a) % d
        return min(x, d - x)

    def distance(self, a: int, b: int) -> int:
        """Minimal hop count between ``a`` and ``b`` with wrap-around."""
        return sum(
            self.ring_distance(x, y, d) for x, y, d in zip(self.coords(a), self.coords(b), self.dims)
        )

    def port_towards(self, a: int, b: int) -> int | None:
        """Return the port ``a`` leaves by on a minimal dimension-order route to ``b``.

        The first differing coordinate is fixed first; the shorter way round is
        taken, and a tie (distance exactly d/2) goes the ``+`` way.
        """
        for k, (x, y, d) in enumerate(zip(self.coords(a), self.coords(b), self.dims)):
            if x != y:
                fwd = (y - x) % d
                return 2 * k if fwd <= d - fwd else 2 * k + 1
        return None
