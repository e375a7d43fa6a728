"""Run the schedules of all ``p`` ranks in one process (the test oracle).

:func:`simulate` moves every message of every step between numpy arrays,
exactly as the executor would over MPI, and checks the schedule's contract on
the way: every message sent at (lane, step) is expected by its receiver at
the same (lane, step) with the same length, nothing is left unmatched, and
lanes touch disjoint elements. It returns each rank's final vector and, if
asked, a trace of the messages (for the cost model).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .schedule.base import COPY, REDUCE, Schedule

__all__ = ["simulate", "Message", "ScheduleError"]

BinaryOp = Callable[[np.ndarray, np.ndarray], np.ndarray]


class ScheduleError(AssertionError):
    """A schedule broke its contract (unmatched message, wrong length, …)."""


@dataclass(frozen=True)
class Message:
    """One message of a simulated run: ``count`` elements from ``src`` to ``dst`` at (lane, step)."""

    lane: int
    step: int
    src: int
    dst: int
    count: int
    port: int | None


def _pack(vec: np.ndarray, ranges) -> np.ndarray:
    if not ranges:
        return vec[:0].copy()
    return np.concatenate([vec[a:b] for a, b in ranges])


def simulate(
    schedules: Sequence[Schedule],
    inputs: Sequence[np.ndarray],
    op: BinaryOp = np.add,
    *,
    trace: list[Message] | None = None,
) -> list[np.ndarray]:
    """Run ``schedules`` (one per rank) on copies of ``inputs``.

    ``op(a, b)`` must return ``a op b`` elementwise (the left operand first).
    """
    p = len(schedules)
    if len(inputs) != p:
        raise ValueError("need one input per rank")
    vecs = []
    for r, s in enumerate(schedules):
        if s.rank != r or s.size != p:
            raise ScheduleError(f"schedule {r} says rank {s.rank} of {s.size}")
        x = np.asarray(inputs[r])
        if len(x) != s.count:
            raise ValueError(f"rank {r}: input has {len(x)} elements, schedule {s.count}")
        if s.slots == 1:
            vecs.append(np.array(x, copy=True))
        else:
            v = np.zeros(s.slots * s.count, dtype=x.dtype)
            v[s.input_slot * s.count:(s.input_slot + 1) * s.count] = x
            vecs.append(v)
    nlanes = max(len(s.lanes) for s in schedules)
    for s in schedules:
        if len(s.lanes) not in (0, nlanes):
            raise ScheduleError(f"rank {s.rank} has {len(s.lanes)} lanes, others {nlanes}")
    _check_disjoint_lanes(schedules)
    for lane in range(nlanes):
        nsteps = max(len(s.lanes[lane]) for s in schedules if s.lanes)
        for step in range(nsteps):
            # post: pack every send of this step before anyone applies anything
            inbox: dict[tuple[int, int], list[np.ndarray]] = {}
            for s in schedules:
                if not s.lanes or step >= len(s.lanes[lane]):
                    continue
                for t in s.lanes[lane][step].transfers:
                    if t.send_count:
                        if not 0 <= t.peer < p or t.peer == s.rank:
                            raise ScheduleError(f"rank {s.rank} sends to bad peer {t.peer}")
                        inbox.setdefault((s.rank, t.peer), []).append(_pack(vecs[s.rank], t.send))
                        if trace is not None:
                            trace.append(Message(lane, step, s.rank, t.peer, t.send_count, t.port))
            # complete: every receiver takes its messages, in transfer order
            for s in schedules:
                if not s.lanes or step >= len(s.lanes[lane]):
                    continue
                v = vecs[s.rank]
                for t in s.lanes[lane][step].transfers:
                    if not t.recv_count:
                        continue
                    queue = inbox.get((t.peer, s.rank))
                    if not queue:
                        raise ScheduleError(
                            f"lane {lane} step {step}: rank {s.rank} expects {t.recv_count} "
                            f"elements from {t.peer}, which sends nothing")
                    data = queue.pop(0)
                    if len(data) != t.recv_count:
                        raise ScheduleError(
                            f"lane {lane} step {step}: rank {s.rank} expects {t.recv_count} "
                            f"elements from {t.peer}, gets {len(data)}")
                    off = 0
                    for a, b in t.recv:
                        chunk = data[off:off + b - a]
                        off += b - a
                        if t.action == COPY:
                            v[a:b] = chunk
                        elif t.action == REDUCE:
                            v[a:b] = op(chunk, v[a:b]) if t.peer_first else op(v[a:b], chunk)
                        else:
                            raise ScheduleError(f"unknown action {t.action!r}")
                if s.lanes[lane][step].combine:
                    n = s.count
                    for i in range(1, s.slots):
                        v[i * n:(i + 1) * n] = op(v[(i - 1) * n:i * n], v[i * n:(i + 1) * n])
            left = {k: len(q) for k, q in inbox.items() if q}
            if left:
                raise ScheduleError(f"lane {lane} step {step}: unmatched messages {left}")
    return [v[s.result_slot * s.count:(s.result_slot + 1) * s.count] for v, s in zip(vecs, schedules)]


def _check_disjoint_lanes(schedules: Sequence[Schedule]) -> None:
    """Raise if two lanes of one rank send or receive the same element (they run concurrently)."""
    for s in schedules:
        if len(s.lanes) < 2:
            continue
        n = s.count * s.slots
        covered = np.zeros((len(s.lanes), n), dtype=bool)
        for li, lane in enumerate(s.lanes):
            bounds = [ab for st in lane for t in st.transfers for ab in (*t.send, *t.recv)]
            if not bounds:
                continue
            edges = np.zeros(n + 1, dtype=np.int64)  # +1 where a range starts, -1 where it ends
            ab = np.asarray(bounds, dtype=np.int64)
            np.add.at(edges, ab[:, 0], 1)
            np.add.at(edges, ab[:, 1], -1)
            covered[li] = np.cumsum(edges[:n]) > 0
        shared = covered.sum(axis=0) > 1
        if shared.any():
            first = int(np.argmax(shared))
            a, b = np.flatnonzero(covered[:, first])[:2]
            raise ScheduleError(f"rank {s.rank}: lanes {int(a)} and {int(b)} share elements")
