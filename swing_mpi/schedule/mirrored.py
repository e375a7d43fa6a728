"""Mirrored recursive doubling: the bandwidth-optimal XOR schedule on all 2D ports.

Algorithm:
    The baseline the paper builds to separate "uses all ports" from "short
    peers": Rabenseifner's XOR reduce-scatter + all-gather, run as ``2D``
    concurrent lanes exactly like ``swing-bw`` runs Swing. The vector is cut
    into ``2D`` parts (``split(count, 2D)``, ``D`` = dimensions of side > 1);
    lane ``P`` reduces part ``P`` with the block sets of
    :func:`blockset.rs_ag_lane`.

    - Plain lane ``k`` starts in dimension ``k`` and cycles through the
      dimensions (:func:`swing.lane_plan`); at its ``t``-th step in dimension
      ``k`` it pairs ``c_k`` with ``c_k XOR 2^t``, i.e. it moves ``+2^t`` if
      bit ``t`` of ``c_k`` is 0 and ``−2^t`` if it is 1.
    - Mirrored lane ``k`` follows the same dimension plan with the sign of
      the offset flipped (Swing's rule for mirroring; the authors' libswing
      ``get_peer_recdoub`` does the same): ``c_k → c_k − ((c_k XOR 2^t) − c_k)``,
      the same distance ``2^t`` in the *opposite* direction. This is an
      involution at every step (:func:`rabenseifner.xor_peer`) but not a
      hypercube: the groups that have met are shifted intervals, not aligned
      sub-cubes, and the Listing-1 block sets with "latest step wins" still
      send every non-owned block exactly once (the byte minimum; tested).
      (Mirroring by coordinate negation, ``−((−c) XOR 2^t)``, would give the
      same peer as the plain lane for every ``c`` whose bits below ``t`` are
      not all zero: no extra ports.)

    Choice documented: on a square power-of-two torus the ``D`` plain lanes are
    in ``D`` distinct dimensions at every step and each mirrored lane goes the
    opposite way of its plain twin, so the ``2D`` lanes leave by ``2D``
    distinct ports at every step. At the last step in a dimension (``2^t =
    d/2``) both directions reach the same rank over equally short routes;
    each lane is recorded on the port of its own direction (so plain and
    mirrored twins stay on opposite ports). Where every side is 2 a mirrored
    lane would repeat its plain twin (one neighbour per dimension): the ``D``
    plain lanes run alone (:func:`~.base.lane_signs`). On rectangular tori short dimensions run out of steps first
    and lanes then share dimensions (the paper's Eq. 3), as in ``swing-bw``.

Restrictions:
    Commutative ops (tree operand order, not rank order; the API sends non-commutative
    ops to ``recdoub``). Results are bit-identical on all ranks (each block
    is reduced by its owner and then copied).

Non-powers of two and odd p:
    MPICH's fold on the rank count, per lane on its part (as in
    :mod:`rabenseifner`): even ranks ``r < 2·rem`` hand their part to
    ``r + 1`` first and get the result back last; the ``p' = 2^⌊log2 p⌋``
    survivors run on a 1-D ring of virtual ids with 2 lanes (plain and
    mirrored XOR), ports being the first hop of a minimal route on the real
    torus.

Cost (n bytes, L = log2 p', D active dims):
    2·L·α + 2·n·(p'−1)/p'·β/(2D)·Ξ + n·(p'−1)/p'·γ
    (+ 2α + 2·n·β + n·γ when p is not a power of two: D = 1 then, and both
    lanes' fold messages share the link to r ± 1)
    with Ξ as for torus-optimized Rabenseifner (distances stay 2^⌊s/D⌋).
"""

from __future__ import annotations

from .base import Schedule
from .rabenseifner import build_xor_bw

__all__ = ["build_recdoub_mirrored"]


def build_recdoub_mirrored(rank: int, dims: tuple[int, ...], count: int, *,
                           algorithm: str = "recdoub-mirrored") -> Schedule:
    """XOR reduce-scatter + all-gather on ``2D`` lanes (plain and mirrored)."""
    return build_xor_bw(rank, dims, count, mirrored=True, algorithm=algorithm)
