"""mpi4py buffer specs -> (byte view, count, datatype), with the checks.

Accepted like ``Comm.Allreduce``: ``buf``, ``[buf, datatype]``,
``[buf, count]``, ``[buf, count, datatype]`` (a tuple or a list; a datatype
may be an ``MPI.Datatype`` or a typecode string such as ``"d"``). Without a
datatype, the buffer's PEP-3118 format decides (as in mpi4py). ``buf`` is any
object with the buffer protocol (numpy arrays, ``bytearray``, ``array.array``,
``memoryview``…); it must be C-contiguous. Objects in host memory that only
offer ``__array_interface__`` or DLPack (torch CPU tensors, JAX CPU arrays) are
viewed through numpy and take the same path. Device memory (DLPack on a device,
``__cuda_array_interface__``) is handed to the MPI library's own collective by
the API: numpy cannot reduce it.

Everything here is checked locally, before any communication. What MPI itself
calls erroneous and we cannot see locally (counts or datatypes that differ
between ranks, different ops or algorithms on different ranks) is checked by
the opt-in mismatch check (:mod:`swing_mpi.guard`, ``SWING_MPI_CHECK=1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

__all__ = ["BufferSpec", "DeviceBuffer", "Args", "parse_buffer", "is_in_place", "numpy_dtype", "check_comm_op",
           "check_same_datatype", "call_args", "is_exact", "native_bit_identical", "check_op_on", "OP_NAMES"]


class DeviceBuffer(Exception):  # noqa: N818 (a signal to hand the call over, not an error)
    """The buffer is not a Python buffer, only DLPack or ``__cuda_array_interface__``.

    Possibly device memory: the API hands the call to the MPI library's own
    collective, which understands those protocols.
    """


@dataclass(frozen=True)
class BufferSpec:
    """A validated buffer: ``data`` is a ``uint8`` view of ``count·extent`` bytes."""

    data: np.ndarray
    count: int
    datatype: MPI.Datatype
    extent: int

    @property
    def nbytes(self) -> int:
        """Bytes of the ``count`` elements."""
        return self.count * self.extent


def is_in_place(buf: Any) -> bool:
    """Tell whether ``buf`` asks for an in-place operation (``MPI.IN_PLACE`` or ``None``)."""
    return buf is None or buf is MPI.IN_PLACE


def _datatype(dt: Any, where: str) -> MPI.Datatype:
    if isinstance(dt, MPI.Datatype):
        if dt == MPI.DATATYPE_NULL:
            raise ValueError(f"{where}: MPI.DATATYPE_NULL is not a datatype")
        return dt
    if isinstance(dt, str):
        try:
            return MPI.Datatype.fromcode(dt)
        except (KeyError, ValueError):
            raise ValueError(f"{where}: unknown typecode {dt!r}") from None
    raise TypeError(f"{where}: expected an MPI.Datatype or a typecode string, got {type(dt).__name__}")


def _format_datatype(fmt: str, where: str) -> MPI.Datatype:
    code = fmt.lstrip("@=<>!")
    try:
        return MPI.Datatype.fromcode(code)
    except (KeyError, ValueError):
        raise ValueError(
            f"{where}: cannot infer an MPI datatype from buffer format {fmt!r}; "
            f"pass one explicitly, e.g. [buf, MPI.DOUBLE_INT]") from None


_DLPACK_HOST = (1, 3)
"""DLPack device types in host memory: ``kDLCPU`` and ``kDLCUDAHost`` (pinned, CPU-addressable)."""


class _Exported:
    """One versioned DLPack export of ``obj`` (``max_version=(1, 0)``), for ``np.from_dlpack``.

    Producers of the pre-1.0 protocol (no ``max_version``) raise ``TypeError`` here and go to
    the MPI library: their capsules may free the tensor's description as soon as the capsule
    dies, while a numpy view keeps using it until the view itself dies.
    """

    def __init__(self, obj: Any, device: Any) -> None:
        """Export now."""
        self._capsule = obj.__dlpack__(max_version=(1, 0))
        self._device = device

    def __dlpack__(self, **kw: Any) -> Any:
        """Return the export (once)."""
        return self._capsule

    def __dlpack_device__(self) -> Any:
        """Return the producer's device."""
        return self._device


def _memoryview(obj: Any, where: str, writable: bool = False) -> memoryview:
    """Return a view of ``obj``'s memory: the buffer protocol, else a CPU array interface or DLPack export.

    Objects in host memory that offer only ``__array_interface__`` or ``__dlpack__`` (torch CPU
    tensors, JAX CPU arrays) are viewed through numpy, without a copy, so our algorithms reduce
    them. Device memory (``__cuda_array_interface__``, DLPack on a device, or a DLPack export numpy
    cannot take, or takes read-only where ``writable`` is asked) raises :class:`DeviceBuffer`.
    """
    try:
        return memoryview(obj)
    except TypeError:
        pass
    if hasattr(obj, "__cuda_array_interface__"):
        raise DeviceBuffer(where)
    if hasattr(obj, "__array_interface__"):
        return np.asarray(obj).data  # writable as the interface says
    if hasattr(obj, "__dlpack__"):
        try:
            device = obj.__dlpack_device__()
            view = np.from_dlpack(_Exported(obj, device)) if device[0] in _DLPACK_HOST else None
        except (AttributeError, TypeError, ValueError, BufferError, RuntimeError):
            view = None
        if view is None or writable and not view.flags.writeable:
            raise DeviceBuffer(where)  # MPI's own collective writes through the export
        return view.data
    raise TypeError(f"{where}: {type(obj).__name__} does not support the buffer protocol")


_NUMPY_TYPES: dict[np.dtype, tuple[MPI.Datatype, int]] = {}
"""What :func:`parse_buffer` inferred for a plain numpy array of each dtype: (datatype, extent)."""


def parse_buffer(spec: Any, *, writable: bool, where: str, blocks: int = 1) -> BufferSpec:
    """Validate an mpi4py buffer spec; ``where`` names it in error messages.

    ``blocks``: the buffer holds one block per rank (an all-gather's receive buffer, a
    reduce-scatter-block's input), where mpi4py reads an explicit count as the count of one block.
    """
    if type(spec) is np.ndarray:  # the common case, in a tenth of the time: a dtype inferred before
        known = _NUMPY_TYPES.get(spec.dtype)
        if known is not None:
            flags = spec.flags
            if flags.c_contiguous and (flags.writeable or not writable):
                data = spec.reshape(-1).view(np.uint8) if spec.size else np.zeros(0, np.uint8)
                return BufferSpec(data, spec.size, known[0], known[1])
    count: Any = None
    displ: Any = 0
    dt = None
    if isinstance(spec, (tuple, list)):
        parts = list(spec)
        if not 1 <= len(parts) <= 4:
            raise ValueError(f"{where}: a buffer spec has 1 to 4 items, got {len(parts)}")
        obj = parts[0]
        if len(parts) == 2:
            if isinstance(parts[1], (tuple, list)) or _is_int(parts[1]):
                count = parts[1]
            else:
                dt = parts[1]
        elif len(parts) == 3:
            count, dt = parts[1], parts[2]
        elif len(parts) == 4:  # [data, count, displ, datatype]
            count, displ, dt = parts[1], parts[2], parts[3]
        if isinstance(count, (tuple, list)):  # [data, (count, displ), datatype]
            if len(parts) == 4 or len(count) != 2:
                raise ValueError(f"{where}: expected (count, displacement), got {count!r}")
            count, displ = count
        if count is not None and not _is_int(count):
            raise TypeError(f"{where}: count must be an int, got {type(count).__name__}")
        if not _is_int(displ):
            raise TypeError(f"{where}: displacement must be an int, got {type(displ).__name__}")
        if displ < 0:
            raise ValueError(f"{where}: displacement must be >= 0, got {displ}")
        count, displ = None if count is None else int(count) * blocks, int(displ)
    else:
        obj = spec
    if obj is None and isinstance(spec, (tuple, list)) and count in (None, 0):
        obj = bytearray()  # mpi4py: [None, MPI.INT] is an empty (writable) buffer
        count = 0
        if dt is None:
            raise ValueError(f"{where}: [None] needs a datatype, e.g. [None, MPI.INT]")
    if obj is None or obj is MPI.IN_PLACE or obj is MPI.BOTTOM:
        raise ValueError(f"{where}: expected a buffer, got {obj!r}")
    mv = _memoryview(obj, where, writable)
    if not mv.c_contiguous:
        raise ValueError(f"{where}: the buffer is not C-contiguous (pass a contiguous copy)")
    if writable and mv.readonly:
        raise ValueError(f"{where}: the buffer is read-only")
    datatype = _datatype(dt, where) if dt is not None else _format_datatype(mv.format, where)
    extent = datatype.extent
    if datatype.lb != 0 or extent <= 0 or datatype.true_lb < 0 or datatype.true_extent > extent:
        raise ValueError(f"{where}: datatype {datatype.Get_name() or datatype} has a lower bound "
                         f"or holes outside its extent; only contiguous element types are supported")
    nbytes = mv.nbytes
    if count is None:
        if nbytes % extent:
            raise ValueError(f"{where}: buffer of {nbytes} bytes is not a whole number of "
                             f"{extent}-byte elements")
        count = nbytes // extent
    elif count < 0:
        raise ValueError(f"{where}: count must be >= 0, got {count}")
    elif (displ + count) * extent > nbytes:
        at = f" from element {displ}" if displ else ""
        raise ValueError(f"{where}: count {count}{at} needs {(displ + count) * extent} bytes, "
                         f"the buffer has {nbytes}")
    start = displ * extent
    data = (np.frombuffer(mv.cast("B"), dtype=np.uint8)[start:start + count * extent] if nbytes
            else np.zeros(0, np.uint8))
    if type(spec) is np.ndarray and len(_NUMPY_TYPES) < 64:  # inferred from the format alone
        _NUMPY_TYPES[spec.dtype] = (datatype, extent)
    return BufferSpec(data, count, datatype, extent)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def numpy_dtype(datatype: MPI.Datatype) -> np.dtype | None:
    """Return the numpy dtype of a predefined datatype, or ``None``."""
    try:
        code = datatype.tocode()
        dt = np.dtype(code)
    except (KeyError, ValueError, TypeError):
        return None
    if dt.itemsize != datatype.size or dt.itemsize != datatype.extent:
        return None
    return dt


def check_comm_op(comm: Any, op: Any = None) -> None:
    """Raise ``TypeError`` unless ``comm`` is an intracommunicator (and ``op``, if given, an op)."""
    if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
        raise TypeError(f"comm must be an mpi4py intracommunicator, got {comm!r}")
    if comm.Is_inter():
        raise TypeError("comm is an intercommunicator; only intracommunicators are supported")
    if op is not None and (not isinstance(op, MPI.Op) or op == MPI.OP_NULL):
        raise TypeError(f"op must be an MPI.Op, got {op!r}")


def _code(dt: MPI.Datatype) -> str | None:
    try:
        return dt.tocode()
    except (KeyError, ValueError):
        return None


def check_same_datatype(send: BufferSpec, recv: BufferSpec) -> None:
    """Raise ``ValueError`` unless the two buffers hold the same kind of element (named as mpi4py names it)."""
    if send.datatype != recv.datatype and (
            send.datatype.size != recv.datatype.size or send.extent != recv.extent
            or _code(send.datatype) != _code(recv.datatype)):
        raise ValueError(f"mismatch in send and receive MPI datatypes: sendbuf {send.datatype.Get_name()}, "
                         f"recvbuf {recv.datatype.Get_name()}")


# -- op facts: what the decision needs to know of an MPI op on a datatype ------------------------

_EXACT_OPS = ("BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR", "MAXLOC", "MINLOC", "REPLACE", "NO_OP")
_exact_cache: dict[tuple[int, int], bool] = {}


def is_exact(op: MPI.Op, datatype: MPI.Datatype) -> bool:
    """Tell whether ``op`` on ``datatype`` gives the same bits in any grouping (cached for predefined ones)."""
    if op.is_predefined and datatype.is_predefined:
        key = (op.py2f(), datatype.py2f())
        got = _exact_cache.get(key)
        if got is None:
            got = _exact_cache[key] = _is_exact(op, datatype)
        return got
    return _is_exact(op, datatype)


def _is_exact(op: MPI.Op, datatype: MPI.Datatype) -> bool:
    """Tell whether ``op`` on ``datatype`` gives the same bits in any grouping.

    True for integer (and bool) SUM/PROD/MAX/MIN, bitwise and logical ops and
    MAXLOC/MINLOC; false for floating-point SUM/PROD/MAX/MIN (rounding, signed
    zeros, NaNs) and for user-defined ops.
    """
    if any(op == getattr(MPI, n) for n in _EXACT_OPS if hasattr(MPI, n)):
        return True
    if any(op == o for o in (MPI.SUM, MPI.PROD, MPI.MAX, MPI.MIN)):
        dt = numpy_dtype(datatype)
        return dt is not None and dt.kind in "iub"
    return False


def native_bit_identical(op: MPI.Op, datatype: MPI.Datatype, exact: bool) -> bool:
    """Tell whether any MPI gives the same bits on every rank for ``op`` on ``datatype``.

    True for exact ops and for floating-point SUM/PROD: IEEE addition and
    multiplication are commutative, so a pairwise combine gives the same bits on
    both partners. Not for float MIN/MAX (MPICH's result with +0.0 and -0.0 mixed
    differs between ranks), and not for SUM on 8- and 16-bit integers: where it
    overflows, Open MPI's vectorised SUM saturates, while swing_mpi promises the
    wrapped value (as C and numpy compute it) under every MPI.
    """
    if op == MPI.SUM:
        dt = numpy_dtype(datatype)
        if dt is not None and dt.kind in "iu" and dt.itemsize <= 2:
            return False
    return exact or (op == MPI.SUM or op == MPI.PROD) and numpy_dtype(datatype) is not None


_facts_cache: dict[tuple[int, int], tuple[bool, bool]] = {}

OP_NAMES = ("SUM", "PROD", "MAX", "MIN", "LAND", "BAND", "LOR", "BOR", "LXOR", "BXOR", "MAXLOC", "MINLOC",
            "REPLACE", "NO_OP")
"""The predefined ops, by their names in ``MPI`` (for messages)."""


def check_op_on(op: MPI.Op, datatype: MPI.Datatype) -> None:
    """Raise ``TypeError`` if the MPI library does not define the predefined ``op`` on ``datatype``.

    Asked of the library itself (``Reduce_local`` on one zero element), so the answer is exactly its
    own: ``BAND`` on ``MPI.DOUBLE``, ``MAXLOC`` on anything but a pair type, ``SUM`` on a derived type
    are refused, as ``comm.Allreduce`` refuses them. Every rank raises alike, before any data moves;
    found out in the middle of a schedule, only the ranks that reduce would fail and the others would
    wait for them. A user-defined op is not called here: it defines itself for what it is given.
    """
    if not op.is_predefined:
        return
    a = np.zeros(max(datatype.extent, 1), np.uint8)
    b = np.zeros_like(a)
    try:
        op.Reduce_local([a, 1, datatype], [b, 1, datatype])
    except MPI.Exception as e:
        name = next((f"MPI.{n}" for n in OP_NAMES if hasattr(MPI, n) and op == getattr(MPI, n)), repr(op))
        kind = datatype.Get_name() or ("a derived datatype" if not datatype.is_predefined else repr(datatype))
        raise TypeError(f"op {name} is not defined on datatype {kind} "
                        f"(the MPI library: {e.Get_error_string().strip()})") from None


def op_facts(op: MPI.Op, datatype: MPI.Datatype) -> tuple[bool, bool]:
    """Return ``(exact, native_ok)`` of ``op`` on ``datatype`` (cached for predefined ones).

    Raises ``TypeError`` where the MPI library does not define the op on the datatype
    (:func:`check_op_on`; an answer that is cached is one that passed).
    """
    key = (op.py2f(), datatype.py2f()) if op.is_predefined and datatype.is_predefined else None
    got = _facts_cache.get(key) if key is not None else None
    if got is None:
        check_op_on(op, datatype)
        exact = is_exact(op, datatype)
        got = (exact, native_bit_identical(op, datatype, exact))
        if key is not None:
            _facts_cache[key] = got
    return got


# -- a call's arguments, checked on this rank -------------------------------------------------------

class Args:
    """A collective's checked arguments: the buffers, the element counts and the op's facts."""

    __slots__ = ("send", "recv", "count", "counts", "datatype", "nbytes", "exact", "commutative", "native_ok")

    def __init__(self, send: BufferSpec | None, recv: BufferSpec, count: int, counts: list[int] | None,
                 op: MPI.Op | None, nbytes: int) -> None:
        """Keep the buffers; derive the op's facts (an all-gather's ``op`` is ``None``: nothing is reduced)."""
        self.send = send
        """``None``: in place."""
        self.recv = recv
        self.count = count
        """What the mismatch check compares: an allreduce's elements, a reduce-scatter's whole vector, an
        all-gather's block."""
        self.counts = counts
        """Every rank's block (reduce-scatter, all-gather), in rank order."""
        self.datatype = recv.datatype
        self.nbytes = nbytes
        """Bytes of the whole vector (what the decision prices)."""
        if op is None:
            self.exact, self.commutative, self.native_ok = True, True, True
        else:
            self.exact, self.native_ok = op_facts(op, recv.datatype)
            self.commutative = op.Is_commutative()


def _no_overlap(send: BufferSpec, recv: BufferSpec, what: str) -> None:
    if send.count and recv.count and np.shares_memory(send.data, recv.data):
        raise ValueError(f"sendbuf and recvbuf overlap; use MPI.IN_PLACE for an in-place {what}")


def call_args(operation: str, comm: Any, sendbuf: Any, recvbuf: Any, op: Any, recvcounts: Any = None) -> Args:
    """Check a collective's arguments on this rank (``operation``: a :data:`swing_mpi.guard.OPERATIONS` name).

    Raises ``TypeError``/``ValueError`` for bad ones and :class:`DeviceBuffer` for buffers only the MPI
    library can reduce. A ``recvcounts=None`` reduce-scatter gathers the counts (collective) before it
    raises any local error, so an error on one rank reaches every rank.
    """
    check_comm_op(comm, op)
    if op is None and operation != "allgather":
        raise TypeError(f"op must be an MPI.Op, got None (an {operation} reduces: MPI.SUM, MPI.MAX, ...)")
    # mpi4py reads an explicit count of a buffer of one block per rank as the count of a block
    in_place = is_in_place(sendbuf)
    p = comm.Get_size()
    whole = operation == "allgather" or operation == "reduce_scatter_block" and in_place
    recv = parse_buffer(recvbuf, writable=True, where="recvbuf", blocks=p if whole else 1)
    send = None if in_place else parse_buffer(sendbuf, writable=False, where="sendbuf",
                                              blocks=p if operation == "reduce_scatter_block" else 1)
    if send is not None and (operation != "reduce_scatter" or recvcounts is not None):
        # before the counts, as mpi4py: 4 int32 into 16 bytes is a datatype mismatch, not a count one
        # (a reduce-scatter that gathers its counts checks it there, so that every rank raises alike)
        check_same_datatype(send, recv)
    if operation == "allreduce":
        if send is not None:
            if send.count != recv.count:
                raise ValueError(f"sendbuf has {send.count} elements, recvbuf {recv.count}")
            if send.count and np.shares_memory(send.data, recv.data):
                raise ValueError("sendbuf and recvbuf overlap; use MPI.IN_PLACE for an in-place allreduce")
        return Args(send, recv, recv.count, None, op, recv.count * recv.extent)
    if operation == "allgather":
        return _allgather_args(comm, send, recv)
    counts = _reduce_scatter_counts(operation, comm, send, recv, recvcounts)
    if send is not None:
        _no_overlap(send, recv, operation)
    total = sum(counts)
    a = Args(send, recv, total, counts, op, total * recv.extent)
    a.native_ok = True  # each rank gets its own block: no two ranks' results need to be bit-identical
    return a


def _allgather_args(comm: Any, send: BufferSpec | None, recv: BufferSpec) -> Args:
    p = comm.Get_size()
    if send is None:
        if recv.count % p:
            raise ValueError(f"in-place allgather: recvbuf has {recv.count} elements, not a multiple of {p} ranks")
        n = recv.count // p
    else:
        n = send.count
        if recv.count != n * p:
            raise ValueError(f"allgather: recvbuf has {recv.count} elements, needs {p} x {n} "
                             f"(sendbuf's count times the ranks)")
        _no_overlap(send, recv, "allgather")
    return Args(send, recv, n, [n] * p, None, n * p * recv.extent)


def _reduce_scatter_counts(what: str, comm: Any, send: BufferSpec | None, recv: BufferSpec,
                           recvcounts: Any) -> list[int]:
    """Return every rank's block of a reduce-scatter (``what``: with or without ``_block``)."""
    p, rank = comm.Get_size(), comm.Get_rank()
    if what == "reduce_scatter_block":
        if send is None:
            if recv.count % p:
                raise ValueError(f"in-place {what}: recvbuf has {recv.count} elements, not a multiple of {p} ranks")
            return [recv.count // p] * p
        if send.count != recv.count * p:
            raise ValueError(f"{what}: sendbuf has {send.count} elements, expected {p} x {recv.count} "
                             f"(recvbuf's count times the ranks)")
        return [recv.count] * p
    if recvcounts is None:
        counts = _gathered_counts(what, comm, send, recv)
    else:
        counts = _check_counts(recvcounts, p)
    total = sum(counts)
    if send is None:
        if recv.count < total:
            raise ValueError(f"in-place {what}: recvbuf has {recv.count} elements, sum(recvcounts) is {total}")
    else:
        if send.count != total:
            raise ValueError(f"{what}: sendbuf has {send.count} elements, sum(recvcounts) is {total}")
        if recv.count < counts[rank]:
            raise ValueError(f"{what}: recvbuf has {recv.count} elements, recvcounts[{rank}] is {counts[rank]}")
    return counts


def _gathered_counts(what: str, comm: Any, send: BufferSpec | None, recv: BufferSpec) -> list[int]:
    """Gather every rank's receive count (as mpi4py does for ``recvcounts=None``); every rank raises alike."""
    problem: Exception | None = None
    if send is None:
        problem = ValueError(f"in-place {what} needs recvcounts")
    else:
        try:
            check_same_datatype(send, recv)
        except (TypeError, ValueError) as e:
            problem = e
    got = comm.allgather(None if problem is not None or send is None else (recv.count, send.count))
    if problem is not None:
        raise problem
    if None in got:
        bad = [r for r, c in enumerate(got) if c is None]
        raise ValueError(f"{what}: rank(s) {bad} rejected their arguments; no data moved")
    counts = [int(c) for c, _ in got]
    total = sum(counts)
    wrong = [r for r, (_, sc) in enumerate(got) if sc != total]
    rank = comm.Get_rank()
    if rank in wrong:
        raise ValueError(f"{what}: sendbuf has {got[rank][1]} elements, sum(recvcounts) is {total}")
    if wrong:  # every rank sees every sendbuf's length: all raise, none waits
        raise ValueError(f"{what}: the sendbuf of rank(s) {wrong} does not hold sum(recvcounts) = {total} "
                         f"elements; no data moved")
    return counts


def _check_counts(recvcounts: Any, p: int) -> list[int]:
    try:
        given = None if isinstance(recvcounts, (str, bytes)) else list(recvcounts)
    except TypeError:
        given = None
    if given is None or not all(_is_int(c) for c in given):
        raise TypeError(f"recvcounts must be a sequence of {p} integers, got {recvcounts!r}")
    counts = [int(c) for c in given]
    if len(counts) != p:
        raise ValueError(f"recvcounts has {len(counts)} entries, the communicator {p} ranks")
    if any(c < 0 for c in counts):
        raise ValueError(f"recvcounts must be >= 0, got {counts}")
    return counts
