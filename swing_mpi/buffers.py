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

__all__ = ["BufferSpec", "DeviceBuffer", "parse_buffer", "is_in_place", "numpy_dtype", "check_comm_op",
           "check_same_datatype"]


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


def parse_buffer(spec: Any, *, writable: bool, where: str) -> BufferSpec:
    """Validate an mpi4py buffer spec; ``where`` names it in error messages."""
    if type(spec) is np.ndarray:  # the common case, in a tenth of the time: a dtype inferred before
        known = _NUMPY_TYPES.get(spec.dtype)
        if known is not None:
            flags = spec.flags
            if flags.c_contiguous and (flags.writeable or not writable):
                data = spec.reshape(-1).view(np.uint8) if spec.size else np.zeros(0, np.uint8)
                return BufferSpec(data, spec.size, known[0], known[1])
    count = None
    dt = None
    if isinstance(spec, (tuple, list)):
        parts = list(spec)
        if not 1 <= len(parts) <= 3:
            raise ValueError(f"{where}: a buffer spec has 1 to 3 items, got {len(parts)}")
        obj = parts[0]
        if len(parts) == 2:
            if isinstance(parts[1], int) and not isinstance(parts[1], bool):
                count = parts[1]
            else:
                dt = parts[1]
        elif len(parts) == 3:
            count, dt = parts[1], parts[2]
            if not (isinstance(count, int) and not isinstance(count, bool)):
                raise TypeError(f"{where}: count must be an int, got {type(count).__name__}")
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
    elif count * extent > nbytes:
        raise ValueError(f"{where}: count {count} needs {count * extent} bytes, "
                         f"the buffer has {nbytes}")
    data = np.frombuffer(mv.cast("B"), dtype=np.uint8)[: count * extent] if nbytes else np.zeros(0, np.uint8)
    if type(spec) is np.ndarray and len(_NUMPY_TYPES) < 64:  # inferred from the format alone
        _NUMPY_TYPES[spec.dtype] = (datatype, extent)
    return BufferSpec(data, count, datatype, extent)


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
    """Raise ``ValueError`` unless the two buffers hold the same kind of element."""
    if send.datatype != recv.datatype and (
            send.datatype.size != recv.datatype.size or send.extent != recv.extent
            or _code(send.datatype) != _code(recv.datatype)):
        raise ValueError(f"sendbuf datatype {send.datatype.Get_name()} does not match "
                         f"recvbuf datatype {recv.datatype.Get_name()}")
