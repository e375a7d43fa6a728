"""Is there a better odd-ring program than the circulant? An exhaustive search.

The programs in question: translation-invariant reduce-scatters on a ring of
``d`` in ``L = ⌈log2 d⌉`` steps, every node sending to the node ``s_t`` ahead
at step ``t`` (``s_t`` signed, ``|s_t| ≤ d/2``). The partial of the block ``j``
places ahead travels along the steps of a set ``T(j)``, smallest step first, so
the sets form a *family* closed under dropping their smallest step, with
``Σ_{t∈T(j)} s_t ≡ j (mod d)``: ``d`` sets, distinct residues. A node sends the
blocks whose set starts with ``t`` at step ``t``, over ``hops(s_t)`` links, so a
ring link carries ``Σ_{T ≠ ∅} hops(s_{min T})`` blocks in all (the *block-hops*;
a ring reduce-scatter's minimum is ``d − 1``, in ``d − 1`` steps).

The search tries every skip sequence (``s_0 = ±1``) and every closed family of
``d`` sets, and prints the fewest block-hops found next to the circulant's
(:func:`swing_mpi.schedule.rings.circulant_program`: skips ``1, 2, 4, …`` and
``d − 2^{L−1}``).

Usage: python benchmarks/results/model/odd_sides_search.py [d ...]   (default 3 5 7 9 11 13 15)
       python benchmarks/results/model/odd_sides_search.py --two-sided [d ...]   (default 7 … 19):
       programs with two peers per step, ``c ± s_t`` (:func:`best_two_sided`)
"""

from __future__ import annotations

import itertools
import sys


def closed_families(L: int) -> list[list[int]]:
    """Every family of subsets of ``range(L)`` (bitmasks) holding ``∅`` and closed under dropping the minimum."""

    def subtrees(s: int) -> list[list[int]]:
        low = (s & -s).bit_length() - 1 if s else L  # a child adds a step below the set's smallest
        out = [[s]]
        for t in range(low):
            grown = []
            below = subtrees(s | 1 << t)
            for base in out:
                grown.append(base)
                grown.extend(base + sub for sub in below)
            out = grown
        return out

    return subtrees(0)


def hops(s: int, d: int) -> int:
    """Links a message ``s`` places ahead crosses on a ring of ``d`` (the shorter way)."""
    s %= d
    return min(s, d - s)


def best_program(d: int) -> tuple[int, tuple[int, ...], list[int]]:
    """Return ``(block-hops, skips, family)`` of the cheapest program (ties: the first found)."""
    L = (d - 1).bit_length()
    families = [f for f in closed_families(L) if len(f) == d]
    first = [(s & -s).bit_length() - 1 for s in range(1 << L)]
    skip_range = [x for x in range(-(d // 2), d // 2 + 1) if x]
    best: tuple[int, tuple[int, ...], list[int]] | None = None
    for rest in itertools.product(skip_range, repeat=L - 1):
        for s0 in (1, -1):
            skips = (s0, *rest)
            residue = [sum(skips[t] for t in range(L) if s >> t & 1) % d for s in range(1 << L)]
            cost = [hops(skips[first[s]], d) if s else 0 for s in range(1 << L)]
            for fam in families:
                if len({residue[s] for s in fam}) != d:
                    continue
                c = sum(cost[s] for s in fam)
                if best is None or c < best[0]:
                    best = (c, skips, fam)
    assert best is not None
    return best


def circulant_hops(d: int) -> int:
    """Block-hops of the circulant program (every node sends each block once, at its set's first step)."""
    L = (d - 1).bit_length()
    r = d - (1 << (L - 1))
    skips = [1 << t for t in range(L - 1)] + [r]
    total = 0
    for j in range(1, d):  # block j places ahead: binary digits of j below r, else the last step first
        if j >= r:
            steps = [t for t in range(L - 1) if (j - r) >> t & 1] + [L - 1]
        else:
            steps = [t for t in range(L - 1) if j >> t & 1]
        total += hops(skips[min(steps)], d)
    return total


def best_two_sided(d: int) -> tuple[int, tuple[int, ...], list[int]]:
    """Return ``(block-hops per port, skips, family)`` of the cheapest two-sided program of ``d``.

    Two-sided: with ``h = (d−1)/2``, step ``t`` sends to ``c + s_t`` and ``c − s_t``
    (``1 ≤ s_t ≤ h``), the blocks ``1 … h`` places ahead forward and as many behind
    backward, each along a set of a family closed under dropping its smallest
    step whose skips add up to the offset exactly (no wrap-around), in
    ``⌈log2(h+1)⌉`` steps. A port carries a lane's and its mirror's moves:
    twice ``Σ s_{min T}``. The two-sided circulant
    (:func:`swing_mpi.schedule.rings.twosided_program`) is one of them.
    """
    h = (d - 1) // 2
    L = h.bit_length()
    families = [f for f in closed_families(L) if len(f) == h + 1]
    first = [(s & -s).bit_length() - 1 for s in range(1 << L)]
    best: tuple[int, tuple[int, ...], list[int]] | None = None
    for skips in itertools.product(range(1, h + 1), repeat=L):
        total = [sum(skips[t] for t in range(L) if s >> t & 1) for s in range(1 << L)]
        for fam in families:
            if sorted(total[s] for s in fam) != list(range(h + 1)):
                continue
            c = 2 * sum(skips[first[s]] for s in fam if s)
            if best is None or c < best[0]:
                best = (c, skips, fam)
    assert best is not None
    return best


def two_sided_circulant_hops(d: int) -> int:
    """Return the two-sided circulant's block-hops per port (a lane and its mirror).

    Twice the circulant's on a ring of ``(d+1)/2``: its skips are all shorter
    than half that ring, so its paths never wrap and count the same unwrapped.
    """
    return 2 * circulant_hops((d - 1) // 2 + 1)


def family_text(fam: list[int]) -> str:
    """Write a family of step sets (bit masks) as ``{0,1} {1} …``."""
    return " ".join("{" + ",".join(str(t) for t in range(8) if s >> t & 1) + "}" for s in sorted(fam))


def main() -> None:
    args = sys.argv[1:]
    two_sided = "--two-sided" in args
    sides = [int(a) for a in args if a != "--two-sided"] or ([7, 9, 11, 13, 15, 17, 19] if two_sided
                                                              else [3, 5, 7, 9, 11, 13, 15])
    for d in sides:
        if d < 3 or d % 2 == 0:
            raise SystemExit(f"{d}: expected an odd side of at least 3")
    if two_sided:
        print(f"{'d':>3} {'steps':>5} {'two-way':>7} {'circulant':>9} {'two-sided circ.':>15} {'best found':>10}"
              "  skips, family   (block-hops per port, a lane and its mirror)")
        for d in sides:
            c, skips, fam = best_two_sided(d)
            print(f"{d:>3} {((d - 1) // 2).bit_length():>5} {d - 1:>7} {circulant_hops(d):>9} "
                  f"{two_sided_circulant_hops(d):>15} {c:>10}  {skips}, {family_text(fam)}")
        return
    print(f"{'d':>3} {'steps':>5} {'ring minimum':>12} {'circulant':>9} {'best found':>10}  skips, family")
    for d in sides:
        c, skips, fam = best_program(d)
        print(f"{d:>3} {(d - 1).bit_length():>5} {d - 1:>12} {circulant_hops(d):>9} {c:>10}  {skips}, {family_text(fam)}")


if __name__ == "__main__":
    main()
