"""``swing-mpi`` (also ``python -m swing_mpi``): schedule, model, bench, lab, calibrate, choose.

Each subcommand lives in its own module exposing ``add_arguments(parser)``
and ``run(args) -> int``; they are imported only when used, so
``swing-mpi schedule`` and ``swing-mpi model`` never import MPI.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser"]

SUBCOMMANDS = {
    "schedule": ("swing_mpi.cli", "print a rank's schedule (peers, ports, blocks) as a table or JSON"),
    "model": ("swing_mpi.model.cli", "cost model and congestion: steps, Λ, Ψ, Ξ, goodput, crossovers"),
    "bench": ("swing_mpi.bench", "benchmark our collectives against the MPI library's own (run under mpiexec)"),
    "lab": ("swing_mpi.lab.cli", "build an emulated torus of rate-limited links and run MPI across it (root)"),
    "calibrate": ("swing_mpi.calibrate", "measure every candidate here and write the tuning file `auto` reads "
                  "(mpiexec)"),
    "choose": ("swing_mpi.choose_cli", "what `auto` runs for a call, and every candidate's measured or modelled time"),
}


# -- schedule ----------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .schedule import ALGORITHMS

    parser.add_argument("--dims", default=None, help="torus dims, e.g. 4x4 (default: a ring of --size)")
    parser.add_argument("--size", "-p", type=int, default=None, help="number of ranks (with no --dims)")
    parser.add_argument("--rank", "-r", type=int, default=0)
    parser.add_argument("--algorithm", "-a", default="swing-bw", choices=sorted(ALGORITHMS))
    parser.add_argument("--count", "-c", type=int, default=None,
                        help="vector elements (default: 2D·p, one element per block)")
    parser.add_argument("--inexact", action="store_true",
                        help="schedule for floating-point SUM (swing-lat's contributions form)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _block_ids(ranges, blocks) -> list[int]:
    """Return the indices of the blocks (``(start, stop)`` list) that ``ranges`` cover."""
    return [i for i, (a, b) in enumerate(blocks) if b > a and any(x < b and a < y for x, y in ranges)]


def _fmt_blocks(ids: list[int]) -> str:
    return "{" + ",".join(map(str, ids)) + "}" if ids else "-"


def run(args: argparse.Namespace) -> int:
    from .schedule import build_schedule
    from .topology import Torus

    if args.dims is None and args.size is None:
        print("swing-mpi schedule: give --dims (e.g. 4x4) or --size", file=sys.stderr)
        return 2
    try:
        torus = Torus.from_spec(args.dims, args.size) if args.dims else Torus((args.size,))
        if not 0 <= args.rank < torus.size:
            raise ValueError(f"--rank {args.rank} is outside 0..{torus.size - 1}")
        count = args.count if args.count is not None else 2 * torus.ndims * torus.size
        s = build_schedule(args.algorithm, torus.dims, args.rank, count, exact=not args.inexact)
    except ValueError as e:
        print(f"swing-mpi schedule: {e}", file=sys.stderr)
        return 2
    from .blocks import split, split_range

    rows = []
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
            "algorithm": s.algorithm, "dims": list(s.dims), "rank": s.rank, "coords": list(torus.coords(s.rank)),
            "size": s.size, "count": s.count, "steps": s.nsteps, "lanes": list(s.lane_names),
            "slots": s.slots, "meta": {k: str(v) for k, v in s.meta.items()}, "transfers": rows,
        }, indent=1))
        return 0
    print(f"# {s.algorithm} on {torus} torus, rank {s.rank} {torus.coords(s.rank)}, count {s.count}, "
          f"{s.nsteps} steps, {len(s.lanes)} lanes; sent {s.sent_elements()} elements")
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


# -- main -----------------------------------------------------------------------------

def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Build the parser; only the subcommand named in ``argv`` (all without one) is imported."""
    parser = argparse.ArgumentParser(prog="swing-mpi", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = None
    if argv:
        wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (modname, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        if wanted in (None, name):
            try:
                mod = importlib.import_module(modname)
            except ImportError as e:  # an optional part missing should not break the others
                p.set_defaults(_broken=f"{name}: {e}")
                continue
            mod.add_arguments(p)
            p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``swing-mpi``; return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if getattr(args, "_broken", None):
        print(f"swing-mpi {args._broken}", file=sys.stderr)
        return 2
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except BrokenPipeError:  # e.g. `swing-mpi schedule … | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
