"""swing-mpi (also python -m swing_mpi): schedule, model, bench, lab, calibrate, choose, simulate, probe.

Each subcommand lives in its own module exposing ``add_arguments(parser)``
and ``run(args) -> int``; they are imported only when used, so
``swing-mpi schedule`` and ``swing-mpi model`` never import MPI.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .cliargs import Parser

__all__ = ["main", "build_parser"]

SUBCOMMANDS = {
    "schedule": ("swing_mpi.schedule.cli", "print a rank's schedule (peers, ports, blocks) as a table or JSON"),
    "model": ("swing_mpi.model.cli", "cost model and congestion: steps, Λ, Ψ, Ξ, goodput, crossovers"),
    "bench": ("swing_mpi.bench", "benchmark our collectives against the MPI library's own (run under mpiexec)"),
    "lab": ("swing_mpi.lab.cli", "build an emulated torus of rate-limited links and run MPI across it (root)"),
    "calibrate": ("swing_mpi.calibrate", "measure every candidate here and write the tuning file that auto reads "
                  "(mpiexec)"),
    "choose": ("swing_mpi.choose_cli", "what auto runs for a call, and every candidate's measured or modelled time"),
    "simulate": ("swing_mpi.netsim.cli", "simulate our schedules on a torus, HyperX or fat tree (SimGrid): time, "
                 "goodput, per-step loads"),
    "probe": ("swing_mpi.probe", "measure this library's per-step and per-byte costs for the simulator (mpiexec -n 2)"),
}


# -- main -----------------------------------------------------------------------------

DESCRIPTION = ("swing-mpi (also python -m swing_mpi): Swing allreduce on torus networks. Sizes are bytes (K/M/G "
               "binary: 1K = 1024 B), link rates bits per second (400G, 40M: decimal), times take a unit "
               "(1.5us); docs/cli.md lists every option.")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Build the parser; only the subcommand named in ``argv`` (all without one) is imported."""
    from . import __version__

    parser = Parser(prog="swing-mpi", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"swing-mpi {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = None
    if argv:
        wanted = next((a for a in argv if not a.startswith("-")), None)
    for name, (modname, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(_parser=p)
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
    args, extra = parser.parse_known_args(argv)
    if extra:  # told by the subcommand's parser, with its usage (not the top level's)
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
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
