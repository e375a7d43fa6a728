"""Transfer compilation: a schedule's transfers as byte ranges, scratch views and MPI datatypes.

:func:`compile_lanes` resolves every transfer of a schedule once per plan. :func:`plan_sources`
plans reading a separate input where the schedule first uses each byte (sent from it, or reduced
with a peer's data into the work vector) and writing the last reductions of result bytes straight
into the caller's ``out`` buffer, so a reduce-scatter never copies the parts it only sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
from mpi4py import MPI

from .schedule.base import COPY, REDUCE, Schedule

__all__ = ["Xfer", "Written", "Lanes", "Compiled", "SourcePlan", "compile_lanes", "plan_sources", "free_types",
           "segments"]


class Xfer:
    """A transfer resolved to byte offsets and scratch views."""

    __slots__ = ("peer", "send", "recv", "action", "peer_first", "send_buf", "recv_buf",
                 "send_elems", "recv_elems", "direct_send", "direct_recv", "send_type", "recv_type",
                 "src_pre", "src_send", "src_recv")

    def __init__(self, t: Any, ext: int) -> None:
        """Resolve transfer ``t`` (element ranges) for elements of ``ext`` bytes."""
        self.peer = t.peer
        self.send = [(a * ext, b * ext) for a, b in t.send]
        self.recv = [(a * ext, b * ext) for a, b in t.recv]
        self.action = t.action
        self.peer_first = t.peer_first
        self.send_elems = t.send_count
        self.recv_elems = t.recv_count
        # one contiguous range (or a datatype, see compile_lanes): sent from / received into the buffer itself
        self.direct_send = len(self.send) == 1
        self.direct_recv = len(self.recv) == 1 and t.action == COPY
        self.send_buf: np.ndarray | None = None
        self.recv_buf: np.ndarray | None = None
        self.send_type: MPI.Datatype | None = None
        """Several send ranges as one MPI datatype over the whole buffer (no packing copy)."""
        self.recv_type: MPI.Datatype | None = None
        """Several copied receive ranges as one MPI datatype (no unpacking copy)."""
        # reading a separate input on first use (see :func:`plan_sources`)
        self.src_pre: list[tuple[int, int]] = []
        """Input ranges copied into the work buffer before this transfer's send."""
        self.src_send: bool | list[tuple[int, int, bool]] | None = None
        """None: send from the work buffer; True: send the one range from the input; else the pieces
        ``(a, b, from_input)`` packed into the send scratch."""
        self.src_recv: list[tuple[int, int, int, bool, int]] | None = None
        """None: reduce into the work buffer as usual; else pieces ``(a, b, offset in recv_buf, first_use,
        out_offset)``: ``first_use`` reads the input instead of the work buffer, ``out_offset >= 0`` writes
        to ``out`` at that offset (the last write of result bytes) instead of the work buffer."""


class Written:
    """A set of byte ranges, kept sorted and merged (the part of the work buffer that holds data)."""

    def __init__(self) -> None:
        """Start empty."""
        self.ranges: list[tuple[int, int]] = []

    def pieces(self, a: int, b: int) -> list[tuple[int, int, bool]]:
        """Split ``[a, b)`` into ``(lo, hi, unwritten)`` pieces, in order."""
        out: list[tuple[int, int, bool]] = []
        pos = a
        for c, d in self.ranges:
            if d <= pos:
                continue
            if c >= b:
                break
            if c > pos:
                out.append((pos, c, True))
            out.append((max(c, pos), min(d, b), False))
            pos = min(d, b)
            if pos >= b:
                break
        if pos < b:
            out.append((pos, b, True))
        return out

    def add(self, a: int, b: int) -> None:
        """Mark ``[a, b)`` written."""
        if b <= a:
            return
        keep: list[tuple[int, int]] = []
        for c, d in self.ranges:
            if d < a or c > b:
                keep.append((c, d))
            else:
                a, b = min(a, c), max(b, d)
        keep.append((a, b))
        keep.sort()
        self.ranges = keep

    def total(self) -> int:
        """Bytes covered."""
        return sum(d - c for c, d in self.ranges)


Lanes = list[list[tuple[list[Xfer], bool]]]
"""Per lane, per step: the step's transfers and whether it ends by combining the slots."""


def _ranges_type(datatype: MPI.Datatype, ranges: list[tuple[int, int]], ext: int) -> MPI.Datatype:
    """Return the committed datatype covering byte ``ranges`` of a buffer, in order, as ``datatype`` elements."""
    return datatype.Create_hindexed([(b - a) // ext for a, b in ranges], [a for a, _ in ranges]).Commit()


def free_types(types: list[MPI.Datatype]) -> None:
    """Free a plan's datatypes (unless MPI is finalized)."""
    if not MPI.Is_finalized():
        for t in types:
            t.Free()


class Compiled(NamedTuple):
    """A schedule's transfers resolved for one datatype (see :func:`compile_lanes`)."""

    lanes: Lanes
    scratch: np.ndarray
    """Every transfer's staging buffer, one region per lane (a lane's steps run one at a time)."""
    types: list[MPI.Datatype]
    """The MPI datatypes made for transfers of several ranges (freed with the plan)."""
    req_peers: list[list[list[tuple[int, str]]]]
    """Per lane and step, who each request talks to, in the order they are posted (receives, then sends)."""


def _use_datatypes(xs: list[Xfer], datatype: MPI.Datatype, ext: int) -> None:
    """Send several ranges, and receive several copied ranges, as one MPI datatype over the buffer."""
    for x in xs:
        if len(x.send) > 1:
            x.send_type = _ranges_type(datatype, x.send, ext)
            x.direct_send = True
        if len(x.recv) > 1 and x.action == COPY:
            x.recv_type = _ranges_type(datatype, x.recv, ext)
            x.direct_recv = True


def _no_recv_into_sent(xs: list[Xfer]) -> None:
    """Never receive straight into bytes that the same step also sends."""
    sent = [r for x in xs for r in x.send]
    for x in xs:
        if x.direct_recv and any(a < d and c < b for a, b in x.recv for c, d in sent):
            x.direct_recv = False
            if x.recv_type is not None:
                x.recv_type.Free()
                x.recv_type = None


def _staged_bytes(xs: list[Xfer], ext: int) -> int:
    return sum((0 if x.direct_send else x.send_elems * ext) + (0 if x.direct_recv else x.recv_elems * ext) for x in xs)


class _Piece(NamedTuple):
    """A segment of a transfer: what :class:`Xfer` reads of a schedule's transfer."""

    peer: int
    send: tuple[tuple[int, int], ...]
    recv: tuple[tuple[int, int], ...]
    action: str
    peer_first: bool
    send_count: int
    recv_count: int


def _cut(ranges: Any, lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    """Return the element ranges holding packed positions ``lo..hi`` of ``ranges`` laid end to end."""
    out = []
    pos = 0
    for a, b in ranges:
        s, e = max(lo, pos), min(hi, pos + b - a)
        if s < e:
            out.append((a + s - pos, a + e - pos))
        pos += b - a
        if pos >= hi:
            break
    return tuple(out)


def _bounds(count: int, seg: int) -> list[tuple[int, int]]:
    """Cut ``count`` elements into equal parts of at most ``seg`` (both ends of a message cut alike)."""
    if count <= seg:
        return [(0, count)] if count else []
    k = -(-count // seg)
    per = -(-count // k)
    return [(i * per, min(count, (i + 1) * per)) for i in range(k)]


def segments(t: Any, seg: int) -> list[Any]:
    """Return transfer ``t`` cut into messages of at most ``seg`` elements each way (``t`` itself if short).

    The sender cuts what it sends and the receiver what it receives by the same rule from the same
    count, and both post the pieces in order, so MPI matches them piece for piece.
    """
    if seg <= 0 or t.send_count <= seg and t.recv_count <= seg:
        return [t]
    sb, rb = _bounds(t.send_count, seg), _bounds(t.recv_count, seg)
    out = []
    for i in range(max(len(sb), len(rb))):
        send = _cut(t.send, *sb[i]) if i < len(sb) else ()
        recv = _cut(t.recv, *rb[i]) if i < len(rb) else ()
        out.append(_Piece(t.peer, send, recv, t.action, t.peer_first,
                          sb[i][1] - sb[i][0] if i < len(sb) else 0, rb[i][1] - rb[i][0] if i < len(rb) else 0))
    return out


def compile_lanes(schedule: Schedule, datatype: MPI.Datatype, *, datatypes: bool, segment: int = 0) -> Compiled:
    """Resolve ``schedule``'s transfers to byte offsets and carve their scratch.

    ``datatypes``: a transfer of several ranges goes as one MPI datatype (predefined element types only);
    else it is packed into scratch by numpy. ``segment``: a transfer of more bytes than this goes as
    several messages (:func:`segments`; 0: never), so each part is reduced as soon as it is in.
    """
    ext = datatype.extent
    types = datatypes and datatype.is_predefined
    lanes: Lanes = []
    regions = []
    scratch_need = 0
    for lane in schedule.lanes:
        steps = []
        need = 0
        for st in lane:
            seg = segment // ext if segment > 0 else 0
            xs = [Xfer(piece, ext) for t in st.transfers for piece in segments(t, max(1, seg) if seg else 0)]
            if types:
                _use_datatypes(xs, datatype, ext)
            _no_recv_into_sent(xs)
            need = max(need, _staged_bytes(xs, ext))
            steps.append((xs, st.combine))
        regions.append(scratch_need)
        scratch_need += need
        lanes.append(steps)
    scratch = np.empty(scratch_need, np.uint8)
    for base, steps in zip(regions, lanes):
        for xs, _ in steps:
            off = base
            for x in xs:
                if x.send_elems and not x.direct_send:
                    x.send_buf = scratch[off:off + x.send_elems * ext]
                    off += x.send_elems * ext
                if x.recv_elems and not x.direct_recv:
                    x.recv_buf = scratch[off:off + x.recv_elems * ext]
                    off += x.recv_elems * ext
    made = [t for steps in lanes for xs, _ in steps for x in xs for t in (x.send_type, x.recv_type) if t is not None]
    req_peers = [[[(x.peer, "receive from") for x in xs if x.recv_elems]
                  + [(x.peer, "send to") for x in xs if x.send_elems] for xs, _ in steps] for steps in lanes]
    return Compiled(lanes, scratch, made, req_peers)


# -- reading a separate input where first used ---------------------------------------------------

class SourcePlan(NamedTuple):
    """What :meth:`Plan.start` and its finish do besides the transfers' own reads and writes."""

    from_input: list[tuple[int, int]]
    """Result bytes never written by the schedule: copied from the input at the end."""
    out_copy: list[tuple[int, int, int, bool]]
    """Result bytes not written into ``out`` by a reduction: ``(a, b, offset in out, from the input)``."""


def _parts(ranges: Any, written: Written, unwritten: bool) -> Iterator[tuple[int, int]]:
    """Yield the pieces of ``ranges`` that ``written`` covers (``unwritten``: that it does not)."""
    for a, b in ranges:
        for c, d, fresh in written.pieces(a, b):
            if fresh is unwritten:
                yield c, d


def _out_offset(out_at: list[tuple[int, int, int]], a: int) -> int:
    """Return where byte ``a`` of the work vector goes in ``out`` (``out_at``: (start, stop, offset) ranges)."""
    for lo, hi, off in out_at:
        if lo <= a < hi:
            return off + a - lo
    raise AssertionError(f"byte {a} is not in the result")


def _disjoint_lanes(lanes: Lanes) -> bool:
    """Whether no two lanes touch the same bytes and no step combines slots (lanes run in any interleaving)."""
    union, total = Written(), 0
    for steps in lanes:
        mine = Written()
        for xs, combine in steps:
            if combine:
                return False
            for x in xs:
                for a, b in x.send + x.recv:
                    mine.add(a, b)
        total += mine.total()
        for a, b in mine.ranges:
            union.add(a, b)
    return union.total() == total


def _last_reductions(steps: list[tuple[list[Xfer], bool]], results: Written) -> dict[int, Written]:
    """Per reduction of one lane (by ``id``): the result bytes it writes that nothing later reads or writes."""
    final: dict[int, Written] = {}
    later = Written()
    for xs, _ in reversed(steps):
        for x in reversed(xs):
            if x.recv_elems and x.action == REDUCE:
                fin = final[id(x)] = Written()
                for c, d in _parts(x.recv, results, unwritten=False):
                    for e, f in _parts([(c, d)], later, unwritten=True):
                        fin.add(e, f)
            for a, b in x.recv:
                later.add(a, b)
        for x in xs:
            for a, b in x.send:
                later.add(a, b)
    return final


def _send_from_input(x: Xfer, written: Written) -> None:
    """Set where ``x``'s send reads bytes not written yet: the input, directly or through the send scratch."""
    x.src_pre, x.src_send = [], None
    if not x.send_elems:
        return
    pieces = [pc for a, b in x.send for pc in written.pieces(a, b)]
    if not any(fresh for _, _, fresh in pieces):
        return
    if not x.direct_send:
        x.src_send = pieces
    elif all(fresh for _, _, fresh in pieces):
        x.src_send = True
    else:  # one direct message mixing both: copy the input's part into the work buffer first
        x.src_pre = [(a, b) for a, b, fresh in pieces if fresh]
        for a, b in x.src_pre:
            written.add(a, b)


def _recv_pieces(x: Xfer, written: Written, final: Written) -> Iterator[tuple[int, int, int, bool, bool]]:
    """Yield ``x``'s received ranges as ``(a, b, offset in recv_buf, unwritten so far, last write of a result)``."""
    off = 0
    for a, b in x.recv:
        for c, d, fresh in written.pieces(a, b):
            for e, f, not_final in final.pieces(c, d):
                yield e, f, off + e - a, fresh, not not_final
        off += b - a


def _reduce_from_input(x: Xfer, written: Written, final: Written, out_at: list[tuple[int, int, int]],
                       redirected: Written) -> None:
    """Set how ``x``'s reduction reads bytes not written yet (from the input) and writes final ones (into out)."""
    x.src_recv = None
    if x.recv_elems and x.action == REDUCE:
        pieces = []
        for a, b, off, fresh, last in _recv_pieces(x, written, final):
            oo = _out_offset(out_at, a) if last else -1
            pieces.append((a, b, off, fresh, oo))
            if last:
                redirected.add(a, b)
        if any(fresh or oo >= 0 for _, _, _, fresh, oo in pieces):
            x.src_recv = pieces
    for a, b in x.recv:
        written.add(a, b)


def plan_sources(lanes: Lanes, *, slots: int, wanted: list[tuple[int, int]]) -> SourcePlan | None:
    """Plan reading a separate input where first used, and writing the result where it is wanted.

    *Input*: the work buffer starts empty; a walk over each lane's steps in order tracks which
    bytes have been written. Until a byte is written, a send reads it from the input, and the first
    reduction into it computes ``peer op input`` into the work buffer. *Output* (``wanted``: the
    result's byte ranges, concatenated in ``out``): a reduction that is the last write to result
    bytes writes into ``out`` instead of the work buffer. Sets each transfer's ``src_*`` fields.

    Returns None (copy the input first and the result last) where lanes share bytes or the
    schedule uses slots.
    """
    if slots > 1 or not _disjoint_lanes(lanes):
        return None
    out_at: list[tuple[int, int, int]] = []
    results = Written()
    off = 0
    for a, b in wanted:
        out_at.append((a, b, off))
        off += b - a
        results.add(a, b)
    redirected, written_all = Written(), Written()
    for steps in lanes:
        final = _last_reductions(steps, results)
        written = Written()
        for xs, _ in steps:
            for x in xs:  # the sends of a step are posted before any of its data is applied
                _send_from_input(x, written)
            for x in xs:
                _reduce_from_input(x, written, final.get(id(x), Written()), out_at, redirected)
        for a, b in written.ranges:
            written_all.add(a, b)
    from_input = list(_parts(wanted, written_all, unwritten=True))
    out_copy = [(e, f, _out_offset(out_at, e), fresh)
                for a, b in wanted for c, d, fresh in written_all.pieces(a, b)
                for e, f in _parts([(c, d)], redirected, unwritten=True)]
    return SourcePlan(from_input, out_copy)
