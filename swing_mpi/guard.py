"""The mismatch check: every rank's count, datatype, op, algorithm and dims, compared before any data moves.

MPI calls a collective erroneous when its arguments differ between ranks, and checks nothing: a
count that differs hangs or truncates, a different datatype or op silently corrupts the result, a
different algorithm (say ``$SWING_MPI_ALGORITHM`` set on some ranks only) deadlocks, since the
ranks then wait for messages their peers never send. With the check on, each call first gathers a
fixed-size signature of its arguments from every rank (one ``Allgather`` of
:data:`SIGNATURE_LEN` 64-bit integers on the library's private communicator) and compares them.
On a mismatch every rank raises the same :class:`CollectiveMismatchError`, naming each field that
differs and its values with the ranks that passed them; no data has moved, and the communicator
stays usable for the next (correct) call.

The check is off by default: it costs one small ``Allgather`` per call, about the time of an
8-byte allreduce. Turn it on for a whole job with ``SWING_MPI_CHECK=1`` (``swing_mpi.rc.check``, read
at import as MPI libraries read their variables at ``MPI_Init``) or for one communicator with
``swing_mpi.Intracomm(comm, check=True)`` (``check=False`` turns it off there even when the
variable is set).

The same check covers :func:`~swing_mpi.reduce_scatter_block`, :func:`~swing_mpi.reduce_scatter`
and :func:`~swing_mpi.allgather` (``check=`` on each, and their ``i…``/``…_init`` forms).

What is compared: the operation (allreduce, reduce-scatter, all-gather: one rank calling another
collective than its peers is caught too); the element count (a reduce-scatter's whole vector and a
checksum of its ``recvcounts``; an all-gather's block); the datatype's size and extent, and, between ranks that pass
a predefined datatype, the datatype itself (a derived type is accepted beside a predefined one of
the same size and extent, whose type signature it may well share); the op (user-defined ops
cannot be told apart across processes: only that the op is user-defined and its commutativity are
compared); the algorithm that will run (after ``auto`` has chosen, so a choice that came out
differently is caught too); and the torus dims.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

import numpy as np
from mpi4py import MPI

from .buffers import OP_NAMES, check_comm_op
from .config import rc
from .state import comm_state
from .waiting import wait_collective

__all__ = ["CollectiveMismatchError", "SIGNATURE_LEN", "MAX_DIMS", "OPERATIONS", "signature",
           "counts_checksum", "describe", "verify", "private"]


MAX_DIMS = 32
"""Dims compared one by one (the executor supports tori of up to 32 dimensions)."""

OPERATIONS = ("allreduce", "reduce_scatter_block", "reduce_scatter", "allgather")
"""The collectives the check knows (a signature stores the index)."""

# signature layout: one int64 per slot
(_STATUS, _OPERATION, _COUNT, _COUNTS, _DT_KIND, _DT_CODE, _DT_SIZE, _DT_EXTENT, _OP_KIND, _OP_CODE,
 _OP_COMMUTE, _ALGO, _NDIMS) = range(13)
_DIMS = 13
SIGNATURE_LEN = _DIMS + MAX_DIMS
"""Length of a signature, in 64-bit integers."""

_PREDEFINED, _DERIVED = 1, 2
_ERRORS = (TypeError, ValueError)
"""A rank whose arguments fail the local checks shares that (status ``1 + index`` here) instead of a signature."""


class CollectiveMismatchError(ValueError):
    """A collective's arguments differ between ranks (raised on every rank, before any data moves).

    ``fields`` maps each differing field (``"count"``, ``"datatype"``, ``"op"``, ``"algorithm"``,
    ``"dims"``) to ``{value: [ranks]}``.
    """

    def __init__(self, message: str, fields: dict[str, dict[str, list[int]]]) -> None:
        """Keep ``fields`` beside the message."""
        super().__init__(message)
        self.fields = fields


_ALGORITHM_TABLE: tuple[str, ...] = ()


def _algorithm_table() -> tuple[str, ...]:
    """Return every algorithm name, sorted (the same table on every rank); computed once."""
    global _ALGORITHM_TABLE
    if not _ALGORITHM_TABLE:
        from .choose import algorithm_names

        _ALGORITHM_TABLE = tuple(sorted(algorithm_names()))
    return _ALGORITHM_TABLE


def counts_checksum(counts: Sequence[int] | None) -> int:
    """Return a checksum of a reduce-scatter's ``recvcounts`` (0 for None): equal lists, equal sums."""
    if counts is None:
        return 0
    return zlib.crc32(np.asarray(list(counts), np.int64).tobytes()) + 1


def signature(*, count: int, datatype: MPI.Datatype, op: MPI.Op, algorithm: str,
              dims: Sequence[int], operation: str = "allreduce", counts: Sequence[int] | None = None) -> np.ndarray:
    """Return this rank's signature of a call: :data:`SIGNATURE_LEN` int64 values."""
    dt_pre, op_pre = datatype.is_predefined, op.is_predefined
    names = _algorithm_table()
    dims = tuple(dims)
    head = [0, OPERATIONS.index(operation) if operation in OPERATIONS else -1, count, counts_checksum(counts),
            _PREDEFINED if dt_pre else _DERIVED, datatype.py2f() if dt_pre else 0, datatype.size, datatype.extent,
            _PREDEFINED if op_pre else _DERIVED, op.py2f() if op_pre else 0, int(op.Is_commutative()),
            names.index(algorithm) if algorithm in names else -1, len(dims)]
    tail = list(dims[:MAX_DIMS])
    return np.array(head + tail + [0] * (MAX_DIMS - len(tail)), np.int64)


def _datatype_name(row: np.ndarray) -> str:
    size, extent = int(row[_DT_SIZE]), int(row[_DT_EXTENT])
    if row[_DT_KIND] == _PREDEFINED:
        try:
            name = MPI.Datatype.f2py(int(row[_DT_CODE])).Get_name()
        except MPI.Exception:
            name = ""
        return name or f"predefined datatype #{int(row[_DT_CODE])}"
    return f"derived datatype of size {size}, extent {extent}"


def _op_name(row: np.ndarray) -> str:
    if row[_OP_KIND] == _PREDEFINED:
        code = int(row[_OP_CODE])
        for name in OP_NAMES:
            op = getattr(MPI, name, None)
            if op is not None and op.py2f() == code:
                return f"MPI.{name}"
        return f"predefined op #{code}"
    return "a user-defined op" + ("" if row[_OP_COMMUTE] else " (non-commutative)")


def _algorithm_name(row: np.ndarray) -> str:
    names = _algorithm_table()
    i = int(row[_ALGO])
    return names[i] if 0 <= i < len(names) else "an unknown algorithm"


def _dims_text(row: np.ndarray) -> str:
    n = int(row[_NDIMS])
    dims = [int(d) for d in row[_DIMS:_DIMS + min(n, MAX_DIMS)]]
    return "x".join(map(str, dims)) + ("x..." if n > MAX_DIMS else "") if n else "()"


def _ranks_text(ranks: list[int]) -> str:
    """Return ``ranks`` as ``0, 2-5, 7``."""
    parts: list[str] = []
    start = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(parts)


def _groups(rows: np.ndarray, text: Callable[[np.ndarray], str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for rank, row in enumerate(rows):
        out.setdefault(text(row), []).append(rank)
    return out


def _status_text(row: np.ndarray) -> str:
    status = int(row[_STATUS])
    if not status:
        return "valid"
    name = _ERRORS[status - 1].__name__ if 0 < status <= len(_ERRORS) else "an error"
    return f"rejected locally ({name})"


def describe(rows: np.ndarray) -> tuple[str, dict[str, dict[str, list[int]]]] | None:
    """Return (message, fields) for the gathered signatures ``rows`` (one per rank), or None if they agree.

    Every rank calls this on the same gathered rows and so reaches the same verdict.
    """
    rows = np.asarray(rows, np.int64).reshape(-1, SIGNATURE_LEN)
    fields: dict[str, dict[str, list[int]]] = {}
    if rows[:, _STATUS].any():  # a rank's arguments failed its local checks: its other slots mean nothing
        fields["arguments"] = _groups(rows, _status_text)
        return _message(fields), fields
    if len(set(rows[:, _OPERATION].tolist())) > 1:  # different collectives: their other fields do not compare
        fields["operation"] = _groups(rows, lambda r: OPERATIONS[int(r[_OPERATION])]
                                      if 0 <= r[_OPERATION] < len(OPERATIONS) else "another collective")
        return _message(fields), fields
    if len(set(rows[:, _COUNT].tolist())) > 1:
        fields["count"] = _groups(rows, lambda r: str(int(r[_COUNT])))
    elif len(set(rows[:, _COUNTS].tolist())) > 1:
        fields["recvcounts"] = _groups(rows, lambda r: f"recvcounts with checksum {int(r[_COUNTS]):#x}")
    predefined = rows[rows[:, _DT_KIND] == _PREDEFINED]
    if (len({(int(r[_DT_SIZE]), int(r[_DT_EXTENT])) for r in rows}) > 1
            or len(set(predefined[:, _DT_CODE].tolist())) > 1):
        fields["datatype"] = _groups(rows, _datatype_name)
    if len({(int(r[_OP_KIND]), int(r[_OP_CODE]), int(r[_OP_COMMUTE])) for r in rows}) > 1:
        fields["op"] = _groups(rows, _op_name)
    if len(set(rows[:, _ALGO].tolist())) > 1:
        fields["algorithm"] = _groups(rows, _algorithm_name)
    if len({tuple(r[_NDIMS:].tolist()) for r in rows}) > 1:
        fields["dims"] = _groups(rows, _dims_text)
    if not fields:
        return None
    return _message(fields), fields


def _message(fields: dict[str, dict[str, list[int]]]) -> str:
    return "; ".join(f"{field} differs: " + "; ".join(f"{value} on {_ranks_text(ranks)}"
                                                     for value, ranks in groups.items())
                     for field, groups in fields.items())


def verify(comm: MPI.Intracomm, *, count: int = 0, datatype: MPI.Datatype = MPI.BYTE, op: MPI.Op = MPI.SUM,
           algorithm: str = "", dims: Sequence[int] = (), operation: str = "allreduce",
           error: Exception | None = None, counts: Sequence[int] | None = None) -> None:
    """Compare this call's arguments with every other rank's; raise :class:`CollectiveMismatchError` if any differ.

    Collective over ``comm`` (pass the library's private duplicate, so no user message can match):
    one ``Allgather`` of the signatures. Every rank raises, or none does. ``error``: this rank's
    arguments failed its local checks; the others learn it (and raise), this rank raises ``error``.
    """
    if error is not None:
        mine = np.zeros(SIGNATURE_LEN, np.int64)
        mine[_STATUS] = next((i + 1 for i, kind in enumerate(_ERRORS) if isinstance(error, kind)), len(_ERRORS) + 1)
    else:
        mine = signature(count=count, datatype=datatype, op=op, algorithm=algorithm, dims=dims,
                         operation=operation, counts=counts)
    rows = np.empty((comm.Get_size(), SIGNATURE_LEN), np.int64)
    req = MPI.Comm.Iallgather(comm, [mine, MPI.INT64_T], [rows, MPI.INT64_T])  # MPI's, not swing_mpi.Intracomm's
    wait_collective(req, comm, f"the mismatch check of {operation}", rc.timeout, keep=(mine, rows))  # bounded
    if error is not None:
        raise error
    if (rows == mine).all():  # the common case: every rank agrees
        return
    found = describe(rows)
    if found is not None:
        message, fields = found
        what = "collective" if "operation" in fields else operation  # the same words on every rank
        raise CollectiveMismatchError(f"{what}: arguments differ between ranks ({message}); "
                                      f"nothing was sent, the communicator is still usable", fields)


def private(comm: MPI.Intracomm) -> MPI.Intracomm:
    """Return the private communicator a checked call compares on (collective on a communicator's first use).

    Made before the arguments are checked, so every rank has it before anything can differ; without
    a communicator nothing can be compared (``TypeError`` on this rank).
    """
    check_comm_op(comm)
    return comm_state(comm).comm
