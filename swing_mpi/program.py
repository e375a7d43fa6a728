"""A plan's steps as the compiled core's flat program (the format is in ``_core.c``'s header).

:func:`compile_program` walks a plan's resolved transfers (:mod:`swing_mpi.transfers`) exactly as
the pure-Python executor runs them (:meth:`swing_mpi.executor.Plan._post` and ``_apply``), and emits
what that code would do as records: the copies made before a step's messages are posted, the
messages, and the copies and reductions that apply received data, each with the messages it must wait
for. Both engines therefore post the same messages in the same order and combine the same bytes in
the same order: the results are the same bits whichever engine a rank runs.

An apply waits for the messages that touch the bytes it writes (a send still reading them, a
receive still writing them) or that write the bytes it reads (its own receive): so a block is reduced
as soon as it is in, while the lane's other messages, and the other lanes', are still on the wire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .schedule.base import REDUCE

if TYPE_CHECKING:
    from .transfers import Lanes, Xfer

__all__ = ["WORK", "SRC", "OUT", "SCRATCH", "compile_program", "kernel_for"]

WORK, SRC, OUT, SCRATCH = 0, 1, 2, 3
RECV, SEND = 0, 1
COPY_OP, REDUCE_OP, FIRST_OP, COPY_BACK_OP = 0, 1, 2, 3
ALL = -1
"""An apply that waits for every message of its lane-step."""

_OPS = {"SUM": 0, "PROD": 1, "MAX": 2, "MIN": 3, "BAND": 4, "BOR": 5, "BXOR": 6}
_TYPES = {("i", 1): 0, ("i", 2): 1, ("i", 4): 2, ("i", 8): 3, ("u", 1): 4, ("u", 2): 5, ("u", 4): 6, ("u", 8): 7,
          ("f", 4): 8, ("f", 8): 9}


def kernel_for(op_name: str | None, dtype: np.dtype | None, ufunc: bool) -> int | None:
    """Return the core's kernel for the reducer's case: ``-1`` (``MPI_Reduce_local``), a C loop, or None.

    ``ufunc``: the pure-Python executor reduces this case with a numpy ufunc (else with
    ``Reduce_local``, which the core calls too). None: a ufunc case the core has no loop for
    (float16, long double, complex256): such a plan runs on the pure-Python executor.
    Complex SUM is the SUM of its float parts, element by element.
    """
    if not ufunc:
        return -1
    if dtype is None or op_name not in _OPS:
        return None
    kind, size = dtype.kind, dtype.itemsize
    if kind == "c" and op_name == "SUM":
        kind, size = "f", size // 2
    t = _TYPES.get((kind, size))
    if t is None:
        return None
    return _OPS[op_name] * 16 + t


class _Emitter:
    def __init__(self, scratch: np.ndarray) -> None:
        self.scratch_at = scratch.__array_interface__["data"][0]
        self.pre: list[tuple[int, int, int, int, int]] = []
        self.msgs: list[tuple[int, int, int, int, int, int]] = []
        self.touch: list[list[tuple[int, int, int]]] = []  # per message: (base, a, b) it reads or writes
        self.applies: list[tuple[tuple[int, ...], list[tuple[int, int, int]], list[tuple[int, int, int]]]] = []

    def off(self, view: np.ndarray) -> int:
        return int(view.__array_interface__["data"][0] - self.scratch_at)

    def msg(self, kind: int, base: int, off: int, count: int, type_idx: int, peer: int,
            touch: list[tuple[int, int, int]]) -> None:
        self.msgs.append((kind, base, off, count, type_idx, peer))
        self.touch.append(touch)

    def apply(self, kind: int, dst: tuple[int, int], a: tuple[int, int], b: tuple[int, int] | None, nbytes: int,
              peer_first: bool, whole: bool = False) -> None:
        bb = b if b is not None else (WORK, 0)
        rec = (kind, dst[0], dst[1], a[0], a[1], bb[0], bb[1], nbytes, int(peer_first))
        writes = [(dst[0], dst[1], dst[1] + nbytes)]
        reads = [(a[0], a[1], a[1] + nbytes)] + ([(b[0], b[1], b[1] + nbytes)] if b is not None else [])
        if kind == REDUCE_OP and not peer_first:
            writes.append(reads[0])  # Reduce_local of ``local op peer`` writes the peer's copy first
        self.applies.append((rec, writes, reads) if not whole else (rec, [], []))
        if whole:
            self.applies[-1] = (rec + (ALL,), [], [])

    def split_sent(self) -> None:
        """Reduce into the received chunks first, copy the sums back after: segments reduce while sends fly.

        A reduction into a block this rank is sending must wait for that send to complete (MPI forbids
        writing a buffer in flight), and MPI may complete a step's sends only after all its receives.
        Where every apply of the lane-step reduces a received chunk into a block being sent, the blocks
        are disjoint, and there are two or more (segments), each becomes ``chunk = peer op local`` (the
        same operands in the same order, so the same bits), waiting only for its receive, followed after
        all of them by a copy of the chunk into the block, which waits for the send and for its sum (the
        core runs it as soon as both are done, ahead of the sums still waiting for their data). Only for
        the C loops (a reduction through ``MPI_Reduce_local`` cannot write into its own operand), and
        only where the rank has threads to spare: the copies cost a pass over the block, which a rank
        whose own thread moves the data (shared memory, every core busy) pays without gaining any overlap.
        """
        if len(self.applies) < 2:
            return
        sent = [t for m, t in zip(self.msgs, self.touch) if m[0] == SEND]
        for rec, writes, _ in self.applies:
            if not (len(rec) == 9 and rec[0] == REDUCE_OP and rec[1] == WORK and rec[3] == SCRATCH
                    and any(_overlap(t, writes[:1]) for t in sent)):
                return
        blocks = sorted((rec[2], rec[2] + rec[7]) for rec, _, _ in self.applies)
        if any(b[0] < a[1] for a, b in zip(blocks, blocks[1:])):
            return  # two chunks reduced into one block (several peers in a step): each must see the other's sum
        sums: list[tuple[tuple[int, ...], list[tuple[int, int, int]], list[tuple[int, int, int]]]] = []
        copies: list[tuple[tuple[int, ...], list[tuple[int, int, int]], list[tuple[int, int, int]]]] = []
        for i, (rec, _, _) in enumerate(self.applies):
            _, _, a, _, c, _, _, n, pf = rec
            sums.append(((FIRST_OP, SCRATCH, c, SCRATCH, c, WORK, a, n, pf), [(SCRATCH, c, c + n)],
                         [(SCRATCH, c, c + n), (WORK, a, a + n)]))
            # a copy back names its sum (apply i): it may run ahead of the other sums once that one is done
            copies.append(((COPY_BACK_OP, WORK, a, SCRATCH, c, WORK, i, n, 0), [(WORK, a, a + n)],
                           [(SCRATCH, c, c + n)]))
        self.applies = sums + copies

    def record(self, lane: int) -> list[int]:
        out = [lane, len(self.pre), len(self.msgs), len(self.applies)]
        for p in self.pre:
            out += p
        for m in self.msgs:
            out += m
        for rec, writes, reads in self.applies:
            if len(rec) == 10:  # waits for every message
                out += rec
                continue
            deps = [i for i, (m, touch) in enumerate(zip(self.msgs, self.touch))
                    if _overlap(touch, writes) or m[0] == RECV and _overlap(touch, reads)]
            out += [*rec, len(deps), *deps]
        return out


def _overlap(xs: list[tuple[int, int, int]], ys: list[tuple[int, int, int]]) -> bool:
    return any(p == q and a < d and c < b for p, a, b in xs for q, c, d in ys)


def _post(em: _Emitter, xs: list[Xfer], has_src: bool, type_index: dict[int, int], elem: int) -> None:
    """Emit what :meth:`Plan._post` does for one lane-step."""
    for x in xs:
        if x.recv_elems:
            if x.recv_type is not None:
                em.msg(RECV, WORK, 0, 1, type_index[id(x.recv_type)], x.peer, [(WORK, a, b) for a, b in x.recv])
            elif x.direct_recv:
                a, b = x.recv[0]
                em.msg(RECV, WORK, a, x.recv_elems, 0, x.peer, [(WORK, a, b)])
            else:
                assert x.recv_buf is not None
                o = em.off(x.recv_buf)
                em.msg(RECV, SCRATCH, o, x.recv_elems, 0, x.peer, [(SCRATCH, o, o + x.recv_elems * elem)])
    for x in xs:
        if not x.send_elems:
            continue
        how: bool | list[tuple[int, int, bool]] | None = None
        if has_src:
            for a, b in x.src_pre:
                em.pre.append((WORK, a, SRC, a, b - a))
            how = x.src_send
        if isinstance(how, list):
            assert x.send_buf is not None
            o = em.off(x.send_buf)
            pos = o
            for a, b, fresh in how:
                em.pre.append((SCRATCH, pos, SRC if fresh else WORK, a, b - a))
                pos += b - a
            em.msg(SEND, SCRATCH, o, x.send_elems, 0, x.peer, [(SCRATCH, o, pos)])
            continue
        base = SRC if how is True and has_src else WORK
        if x.send_type is not None:
            em.msg(SEND, base, 0, 1, type_index[id(x.send_type)], x.peer, [(base, a, b) for a, b in x.send])
        elif x.direct_send:
            a, b = x.send[0]
            em.msg(SEND, base, a, x.send_elems, 0, x.peer, [(base, a, b)])
        else:
            assert x.send_buf is not None
            o = em.off(x.send_buf)
            pos = o
            for a, b in x.send:
                em.pre.append((SCRATCH, pos, WORK, a, b - a))
                pos += b - a
            em.msg(SEND, SCRATCH, o, x.send_elems, 0, x.peer, [(SCRATCH, o, pos)])


def _apply(em: _Emitter, xs: list[Xfer], combine: bool, has_src: bool, has_out: bool, slots: int,
           vec_bytes: int) -> None:
    """Emit what :meth:`Plan._apply` does for one lane-step."""
    for x in xs:
        if not x.recv_elems or x.direct_recv:
            continue
        assert x.recv_buf is not None
        rb = em.off(x.recv_buf)
        if x.src_recv is not None and (has_src or has_out):
            for a, b, off, fresh, oo in x.src_recv:
                chunk = (SCRATCH, rb + off)
                given = (SRC, a) if fresh and has_src else None
                if oo >= 0 and has_out:
                    em.apply(FIRST_OP, (OUT, oo), chunk, (WORK, a) if given is None else given, b - a, x.peer_first)
                elif given is not None:
                    em.apply(FIRST_OP, (WORK, a), chunk, given, b - a, x.peer_first)
                else:
                    em.apply(REDUCE_OP, (WORK, a), chunk, None, b - a, x.peer_first)
            continue
        off = 0
        for a, b in x.recv:
            chunk = (SCRATCH, rb + off)
            off += b - a
            if x.action == REDUCE:
                em.apply(REDUCE_OP, (WORK, a), chunk, None, b - a, x.peer_first)
            else:
                em.apply(COPY_OP, (WORK, a), chunk, None, b - a, False)
    if combine:
        n = vec_bytes
        for i in range(1, slots):
            em.apply(REDUCE_OP, (WORK, i * n), (WORK, (i - 1) * n), None, n, True, whole=True)


def compile_program(lanes: Lanes, scratch: np.ndarray, types: list, elem: int, *, has_src: bool, has_out: bool,
                    slots: int, vec_bytes: int, split_sent: bool = False) -> np.ndarray:
    """Return the int64 program of a plan's ``lanes`` run with (``has_src``) a separate input, (``has_out``) an out.

    ``types``: the plan's derived datatypes (the program names them by position, 1 on); ``elem``:
    bytes of one element; ``split_sent``: segments of a sent block reduced into their received
    chunks first (:meth:`_Emitter.split_sent`; only where the reduction is one of the C loops).
    """
    type_index = {id(t): i + 1 for i, t in enumerate(types)}
    nsteps = max((len(steps) for steps in lanes), default=0)
    prog: list[int] = [nsteps]
    for k in range(nsteps):
        live = [(lane, steps[k]) for lane, steps in enumerate(lanes) if k < len(steps)]
        prog.append(len(live))
        for lane, (xs, combine) in live:
            em = _Emitter(scratch)
            _post(em, xs, has_src, type_index, elem)
            _apply(em, xs, combine, has_src, has_out, slots, vec_bytes)
            if split_sent:
                em.split_sent()
            prog += em.record(lane)
    return np.array(prog, np.int64)
