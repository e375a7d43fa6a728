"""The schedule vocabulary: plain data, no MPI.

A :class:`Schedule` is what one rank does. It has *lanes* (independent
sub-collectives working on disjoint parts of the vector, e.g. Swing's ``2D``
plain and mirrored collectives); each lane is a sequence of :class:`Step`; each
step is a set of :class:`Transfer` with peers. The executor posts all
transfers of a step at once and applies the received data when the whole step
has completed; lanes move on independently of each other.

Every message is posted at the same (lane, step index) by its sender and its
receiver, and messages between one pair of ranks in one lane are matched in
step order. Those two rules make any schedule deadlock-free on MPI and let the
simulator check it message by message.

Ranges are ``(start, stop)`` in elements of the whole vector.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..topology import Torus

__all__ = ["Range", "Transfer", "Step", "Schedule", "REDUCE", "COPY", "ranges_len", "merge_ranges", "lane_signs",
           "port_lanes", "open_schedule"]

Range = tuple[int, int]

REDUCE = "reduce"
"""Received data is combined with the local data."""
COPY = "copy"
"""Received data overwrites the local data."""


def ranges_len(ranges: tuple[Range, ...]) -> int:
    """Return the number of elements ``ranges`` cover."""
    return sum(b - a for a, b in ranges)


def lane_signs(dims: tuple[int, ...]) -> tuple[int, ...]:
    """Directions of the lanes of an all-ports schedule: ``(1, -1)`` (plain and mirrored), or ``(1,)``.

    A ring of 2 has one neighbour, so on a torus whose sides are all 2 (a
    hypercube: 2, 2x2, 2x2x2, ...) a mirrored lane would move exactly as its
    plain twin, peer for peer and block for block: it would only double the
    messages. There the ``D`` plain lanes alone use every link. On any other
    shape the mirrored lanes go the other way round the longer rings.
    """
    active = [d for d in dims if d > 1]
    return (1,) if active and all(d == 2 for d in active) else (1, -1)


def port_lanes(dims: tuple[int, ...]) -> list[tuple[str, int, int]]:
    """Return ``(name, start dimension, sign)`` of every lane of an all-ports schedule.

    ``plain-k`` for every dimension ``k`` of side > 1, then ``mirrored-k``
    unless :func:`lane_signs` leaves them out.
    """
    active = [k for k, d in enumerate(dims) if d > 1]
    return [(f"{'plain' if sign == 1 else 'mirrored'}-{k}", k, sign) for sign in lane_signs(dims) for k in active]


def merge_ranges(ranges: list[Range] | tuple[Range, ...]) -> tuple[Range, ...]:
    """Drop empty ranges and merge touching ones, keeping order."""
    out: list[Range] = []
    for a, b in ranges:
        if b <= a:
            continue
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return tuple(out)


@dataclass(frozen=True)
class Transfer:
    """One exchange with ``peer`` inside a step.

    ``send`` is sent to ``peer`` (packed in range order); ``recv`` is what
    ``peer`` sends back, applied to those ranges: ``REDUCE`` or ``COPY``.
    With ``REDUCE`` and ``peer_first`` the result is ``peer op local``,
    otherwise ``local op peer`` (this keeps non-commutative ops in rank order
    and makes both partners of a symmetric exchange compute bit-identical
    values). Either side may be empty (a one-way message).
    """

    peer: int
    send: tuple[Range, ...] = ()
    recv: tuple[Range, ...] = ()
    action: str = REDUCE
    peer_first: bool = False
    port: int | None = None
    """The torus port the message leaves by (for display and the model)."""

    @property
    def send_count(self) -> int:
        """Elements sent."""
        return ranges_len(self.send)

    @property
    def recv_count(self) -> int:
        """Elements received."""
        return ranges_len(self.recv)


@dataclass(frozen=True)
class Step:
    """The transfers a lane posts at once; received data is applied when all have completed."""

    transfers: tuple[Transfer, ...] = ()
    phase: str = ""
    """``reduce-scatter``, ``all-gather``, ``exchange``, ``fold``, ``unfold``, …"""
    combine: bool = False
    """After the transfers: reduce slots ``0 … slots−1`` in rank order into the
    last slot (``((s0 op s1) op s2) …``), the same expression on every rank."""


@dataclass(frozen=True)
class Schedule:
    """Everything one rank does for one allreduce of ``count`` elements."""

    algorithm: str
    rank: int
    size: int
    count: int
    dims: tuple[int, ...]
    lanes: tuple[tuple[Step, ...], ...]
    lane_names: tuple[str, ...] = ()
    meta: dict[str, object] = field(default_factory=dict, compare=False, hash=False)
    """Builder facts: ``owned`` (per lane, the range each rank owns after the reduce-scatter), ``result``
    (the element ranges that hold this rank's result; default the whole vector), ``fallback``, …"""
    slots: int = 1
    """Work buffer length in vectors. 1: the result buffer itself. ``p``: one
    slot per rank's contribution (gathered, then combined in rank order)."""
    input_slot: int = 0
    result_slot: int = 0

    @property
    def nsteps(self) -> int:
        """Number of steps of the longest lane."""
        return max((len(lane) for lane in self.lanes), default=0)

    def sent_elements(self) -> int:
        """Return the elements this rank sends, over all lanes and steps."""
        return sum(t.send_count for lane in self.lanes for st in lane for t in st.transfers)

    def received_elements(self) -> int:
        """Return the elements this rank receives, over all lanes and steps."""
        return sum(t.recv_count for lane in self.lanes for st in lane for t in st.transfers)


def open_schedule(algorithm: str, rank: int, dims: tuple[int, ...], count: int) -> tuple[Torus, Schedule | None]:
    """Open a builder: the torus of ``dims``, and the empty schedule to return at once if it has one rank.

    Every builder of the registry starts with it::

        torus, alone = open_schedule(algorithm, rank, dims, count)
        if alone is not None:
            return alone
    """
    torus = Torus(dims)
    if torus.size == 1:
        return torus, Schedule(algorithm, rank, 1, count, torus.dims, (), (), {})
    return torus, None
