"""The simulated networks, described without SimGrid: hosts, hop counts, the links each message uses.

Networks:
    ``torus``: SimGrid's torus zone routes every message itself (minimal,
    dimension order, ties the ``+`` way). Our ranks are row-major (the last
    coordinate fastest) and the model routes *our* dimension 0 first; SimGrid
    routes its dimension 0 first, the fastest-varying coordinate of its host
    id. So SimGrid is given our sides in our order and rank ``r`` with
    coordinates ``(c0, c1, …)`` sits on host id ``c0 + d0·(c1 + d1·(…))``:
    SimGrid's dimension ``j`` is our dimension ``j`` and both route alike
    (checked by the tests against SimGrid's own routes, ties included). Here
    the links a message uses are only counted for the busiest-link report.

    ``hyperx``: every node is linked to every other node of its row and
    column (of every line along each dimension), one link per direction.
    SimGrid has no such zone: the platform is a full zone whose routes (only
    for the pairs that talk) are minimal and dimension-ordered, set here.

    ``fattree``: a non-blocking fat tree. Each node has one link up into the
    fabric and one down from it and the fabric itself never limits (full
    bisection and ideal routing), so the only shared resources are the
    nodes' own links, as in a crossbar; a route is those two links.
    SimGrid's fat-tree zone routes deterministically (so some permutations
    meet on an up-link even in a non-blocking tree), which a non-blocking
    tree with adaptive routing would not.

Link ids are ints: torus ``node·2D + port`` (port ``2j``: +1 along ``j``,
``2j+1``: −1), hyperx ``u·p + v``, fattree ``r`` (up) and ``p + r`` (down).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

__all__ = ["Network", "simgrid_host_id"]


@cache
def _route(delta: tuple[int, ...], tie_down: tuple[bool, ...], dims: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Links of SimGrid's torus route over ``delta``: ``(offsets from the source, ports)`` in order.

    Dimension order, the shorter way round; a tie (``delta = d/2``) goes ``+``
    except where ``tie_down`` says so (from coordinate ``d/2`` to ``0``).
    """
    offs: list[list[int]] = []
    ports: list[int] = []
    pos = [0] * len(dims)
    for j, (x, d) in enumerate(zip(delta, dims)):
        if x == 0:
            continue
        up = 2 * x < d or (2 * x == d and not tie_down[j])
        hops, step, port = (x, 1, 2 * j) if up else (d - x, -1, 2 * j + 1)
        for _ in range(hops):
            offs.append(list(pos))
            ports.append(port)
            pos[j] += step
    return np.array(offs, dtype=np.int64).reshape(len(offs), len(dims)), np.array(ports, dtype=np.int64)


def simgrid_host_id(rank: int, dims: tuple[int, ...]) -> int:
    """SimGrid torus host id of our ``rank`` (our dimension 0 is SimGrid's fastest-varying one)."""
    c = np.unravel_index(rank, dims)
    return int(np.ravel_multi_index(tuple(reversed(c)), tuple(reversed(dims))))


@dataclass(frozen=True)
class Network:
    """A network of ``prod(dims)`` nodes: ``kind`` is ``torus``, ``hyperx`` or ``fattree``."""

    kind: str
    dims: tuple[int, ...]

    @property
    def p(self) -> int:
        """Number of nodes."""
        return math.prod(self.dims)

    def hops(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Links on the route of each message (0 when ``src == dst``)."""
        if self.kind == "fattree":
            return np.where(src == dst, 0, 2)
        cs = np.array(np.unravel_index(src, self.dims))
        cd = np.array(np.unravel_index(dst, self.dims))
        if self.kind == "hyperx":
            return np.sum(cs != cd, axis=0)
        d = np.array(self.dims)[:, None]
        fwd = (cd - cs) % d
        return np.sum(np.minimum(fwd, d - fwd), axis=0)

    def links(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(message index, link id)`` of every link every message crosses, in route order per message."""
        n = len(src)
        idx = np.arange(n)
        if self.kind == "fattree":
            keep = src != dst
            m = idx[keep]
            return np.concatenate([m, m]), np.concatenate([src[keep], self.p + dst[keep]])
        cs = np.array(np.unravel_index(src, self.dims))  # [D, n]
        cd = np.array(np.unravel_index(dst, self.dims))
        if self.kind == "hyperx":
            pos = cs.copy()
            mi, li = [], []
            for j in range(len(self.dims)):
                move = pos[j] != cd[j]
                if not move.any():
                    continue
                u = np.ravel_multi_index(tuple(pos[:, move]), self.dims)
                pos[j, move] = cd[j, move]
                v = np.ravel_multi_index(tuple(pos[:, move]), self.dims)
                mi.append(idx[move])
                li.append(u * self.p + v)
            if not mi:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            return np.concatenate(mi), np.concatenate(li)
        # torus: one route per distinct (offset, tie directions), translated
        D = len(self.dims)
        d = np.array(self.dims)[:, None]
        delta = (cd - cs) % d
        tie_down = (2 * delta == d) & (2 * cs == d) & (cd == 0)  # SimGrid's one tie that goes −
        keys, inv = np.unique(np.concatenate([delta, tie_down]).T, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        mi, li = [], []
        for g, key in enumerate(keys):
            offs, ports = _route(tuple(int(v) for v in key[:D]), tuple(bool(v) for v in key[D:]), self.dims)
            if len(ports) == 0:
                continue
            m = idx[inv == g]
            pos = (cs[:, m].T[:, None, :] + offs[None, :, :]) % np.array(self.dims)  # [m, h, D]
            node = np.ravel_multi_index(tuple(pos.reshape(-1, D).T), self.dims)
            mi.append(np.repeat(m, len(ports)))
            li.append(node * 2 * D + np.tile(ports, len(m)))
        if not mi:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(mi), np.concatenate(li)

    def link_name(self, link: int) -> str:
        """Name a link in our coordinates, e.g. ``(0, 3)->(1, 3)``."""
        p = self.p
        if self.kind == "fattree":
            r = link % p
            c = tuple(int(v) for v in np.unravel_index(r, self.dims))
            return f"{c}->fabric" if link < p else f"fabric->{c}"
        if self.kind == "hyperx":
            u, v = divmod(link, p)
        else:
            D = len(self.dims)
            u, port = divmod(link, 2 * D)
            j, back = divmod(port, 2)
            cl = [int(x) for x in np.unravel_index(u, self.dims)]
            cl[j] = (cl[j] + (-1 if back else 1)) % self.dims[j]
            v = int(np.ravel_multi_index(tuple(cl), self.dims))
        cu = tuple(int(x) for x in np.unravel_index(u, self.dims))
        cv = tuple(int(x) for x in np.unravel_index(v, self.dims))
        return f"{cu}->{cv}"

    def busiest(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> dict[str, object]:
        """Return the link carrying most bytes among these messages: its name, bytes and messages."""
        mi, li = self.links(src, dst)
        if len(li) == 0:
            return {"link": None, "bytes": 0, "messages": 0}
        keys, inv = np.unique(li, return_inverse=True)
        load = np.bincount(inv, weights=nbytes[mi].astype(np.float64))
        cnt = np.bincount(inv)
        b = int(np.argmax(load))
        return {"link": self.link_name(int(keys[b])), "bytes": int(load[b]), "messages": int(cnt[b]),
                "most_messages": int(cnt.max())}
