"""``swing-mpi schedule``: print one rank's schedule (peers, ports, blocks) as a table or JSON.

Reads only the schedule generators (no MPI): what a rank sends and receives at
every step of every lane, the port it leaves by, and which blocks of the lane's
part the ranges cover.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ..blocks import split, split_range
from ..cliargs import deprecated
from ..topology import Torus
from ..units import format_dims, plural
from . import ALGORITHMS, build_schedule
from .base import Range

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``schedule`` options to ``parser``."""
    parser.add_argument("--dims", default=None, help="torus dims, e.g. 4x4 (default: a ring of --ranks)")
    parser.add_argument("--ranks", "-p", type=int, default=None, metavar="P",
                        help="number of ranks: a ring of P (with no --dims), or a check of --dims")
    deprecated(parser, "--size", dest="ranks", new="--ranks", convert=int, example=lambda v: f"--ranks {v} (or -p {v})")
    parser.add_argument("--rank", "-r", type=int, default=0, help="the rank whose schedule to print (default 0)")
    parser.add_argument("--algorithms", "--algorithm", "-a", dest="algorithm", default="swing-bw",
                        choices=sorted(ALGORITHMS), metavar="NAME",
                        help="the algorithm (one; default swing-bw): " + ", ".join(sorted(ALGORITHMS)))
    parser.add_argument("--count", "-c", type=int, default=None,
                        help="vector elements (default: 2D*p, one element per block)")
    parser.add_argument("--inexact", action="store_true",
                        help="schedule for floating-point SUM (swing-lat's contributions form)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _block_ids(ranges: Sequence[Range], blocks: Sequence[Range]) -> list[int]:
    """Return the indices of the blocks (``(start, stop)`` list) that ``ranges`` cover."""
    return [i for i, (a, b) in enumerate(blocks) if b > a and any(x < b and a < y for x, y in ranges)]


def _jsonable(value: Any) -> Any:
    """Return a schedule's meta value as JSON: tuples and lists as lists, numbers and strings as they are, else text."""
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _fmt_blocks(ids: list[int]) -> str:
    return "{" + ",".join(map(str, ids)) + "}" if ids else "-"


def run(args: argparse.Namespace) -> int:
    """Print the schedule ``args`` name; return the exit status (2 for bad input)."""
    if args.dims is None and args.ranks is None:
        print("swing-mpi schedule: give --dims (e.g. 4x4) or --ranks (-p)", file=sys.stderr)
        return 2
    try:
        torus = Torus.from_spec(args.dims, args.ranks) if args.dims else Torus((args.ranks,))
        if not 0 <= args.rank < torus.size:
            raise ValueError(f"--rank {args.rank} is outside 0..{torus.size - 1}")
        count = args.count if args.count is not None else 2 * torus.ndims * torus.size
        s = build_schedule(args.algorithm, torus.dims, args.rank, count, exact=not args.inexact)
    except ValueError as e:
        print(f"swing-mpi schedule: {e}", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    parts = split(s.count, len(s.lanes)) if s.lanes else []
    for li, lane in enumerate(s.lanes):
        # block b of a lane's part is owned by rank b (contribution slots for the gather form)
        blocks = (split_range(parts[li], s.size) if s.slots == 1
                  else [(r * s.count, (r + 1) * s.count) for r in range(s.slots)])
        for si, st in enumerate(lane):
            for t in st.transfers:
                rows.append({
                    "send_blocks": _block_ids(t.send, blocks), "recv_blocks": _block_ids(t.recv, blocks),
                    "step": si, "lane": s.lane_names[li] if s.lane_names else str(li), "phase": st.phase,
                    "peer": t.peer, "peer_coords": list(torus.coords(t.peer)) if t.peer < torus.size else None,
                    "port": t.port, "send": [list(r) for r in t.send], "recv": [list(r) for r in t.recv],
                    "action": t.action, "send_count": t.send_count, "recv_count": t.recv_count,
                })
            if st.combine:
                rows.append({"send_blocks": [], "recv_blocks": [],
                             "step": si, "lane": s.lane_names[li], "phase": st.phase, "peer": None,
                             "port": None, "send": [], "recv": [], "action": "combine slots in rank order",
                             "send_count": 0, "recv_count": 0, "peer_coords": None})
    if args.json:
        print(json.dumps({
            "algorithm": s.algorithm, "summary": ALGORITHMS[s.algorithm].summary,
            "dims": format_dims(s.dims), "rank": s.rank, "coords": list(torus.coords(s.rank)),
            "p": s.size, "size": s.size, "count": s.count, "steps": s.nsteps, "lanes": list(s.lane_names),
            "slots": s.slots, "meta": {k: _jsonable(v) for k, v in s.meta.items()}, "transfers": rows,
        }, indent=1))
        return 0
    print(f"# {s.algorithm} on {torus} torus, rank {s.rank} {torus.coords(s.rank)}, count {s.count}, "
          f"{plural(s.nsteps, 'step')}, {plural(len(s.lanes), 'lane')}; sent {s.sent_elements()} elements")
    print(f"# {ALGORITHMS[s.algorithm].summary}")
    for k, v in s.meta.items():
        print(f"# {k}: {v}")
    if s.slots > 1:
        print(f"# work buffer holds {s.slots} slots of {s.count} (one per rank's contribution)")
    what = "contribution slots" if s.slots > 1 else "blocks (block b ends at rank b)"
    header = (f"{'step':>4}  {'lane':<11} {'phase':<15} {'peer':>4} {'coords':<10} {'port':<5} "
              f"{'action':<7} {what}: sent / received")
    print(header)
    print("-" * len(header))
    port_name = lambda q: "-" if q is None else f"{'+' if q % 2 == 0 else '-'}d{q // 2}"  # noqa: E731
    for r in sorted(rows, key=lambda r: (r["step"], r["lane"])):
        coords = "-" if r["peer_coords"] is None else "(" + ",".join(map(str, r["peer_coords"])) + ")"
        print(f"{r['step']:>4}  {r['lane']:<11} {r['phase']:<15} {str(r['peer']) if r['peer'] is not None else '-':>4} "
              f"{coords:<10} {port_name(r['port']):<5} {r['action']:<7} "
              f"{_fmt_blocks(r['send_blocks'])} / {_fmt_blocks(r['recv_blocks'])}")
    return 0
