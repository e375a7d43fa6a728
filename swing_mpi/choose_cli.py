"""``swing-mpi choose``: what ``auto`` runs for a call, and every candidate's time with where it came from.

No MPI: the tuning is read as rank 0 would read it (``--tuning FILE``, else
``$SWING_MPI_TUNING``, the config file or the built-in defaults), and the op
facts (exact, commutative, bit-identical in ``MPI_Allreduce``) are derived
from ``--dtype`` and ``--op`` the way the API derives them from MPI's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace

from .choose import COLLECTIVES, Decision, explain, node_form, node_lanes
from .cliargs import add_collective
from .config import rc
from .model.features import NETWORKS
from .tuning import Tuning, load_tuning, network_for
from .units import SIZE_HELP, format_dims, format_size, parse_size

__all__ = ["add_arguments", "run", "op_facts", "DTYPES", "OPS"]

DTYPES = {"float64": 8, "float32": 4, "int64": 8, "int32": 4, "uint8": 1, "complex128": 16}
OPS = ("sum", "prod", "max", "min", "band", "bor", "bxor")
LARGE = 1024
"""From this many ranks a torus's first pricing may take long enough to say so on stderr."""


def op_facts(dtype: str, op: str) -> tuple[bool, bool]:
    """Return ``(exact, native_ok)`` for a predefined op on a dtype (as :mod:`swing_mpi.opfacts` decides)."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; known: {', '.join(OPS)}")
    integer = dtype.startswith(("int", "uint"))
    if op in ("band", "bor", "bxor"):
        if not integer:
            raise ValueError(f"{op} needs an integer dtype, not {dtype}")
        return True, True
    exact = integer
    return exact, exact or op in ("sum", "prod")


def _time_unit(seconds: list[float]) -> tuple[str, float]:
    """Return the one unit of a table of times, ``(name, seconds per unit)``: the fastest time's."""
    low = min(seconds, default=0.0)
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if low >= scale:
            return unit, scale
    return "us", 1e-6


def _digits(value: float) -> int:
    """Return the decimals that show ``value`` to about four figures (none from 1000 on)."""
    return 0 if value >= 1000 else 1 if value >= 100 else 2 if value >= 10 else 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``swing-mpi choose``."""
    parser.add_argument("--dims", required=True, help="torus dims, e.g. 3x4 (a ring: 12)")
    parser.add_argument("--size", "-s", required=True, help=f"vector size in {SIZE_HELP}, e.g. 4M, 64K, 8")
    parser.add_argument("--dtype", "-d", default="float64", choices=list(DTYPES),
                        help="element type of the vector (default float64)")
    parser.add_argument("--op", "-o", default="sum", choices=list(OPS),
                        help="predefined reduction op (default sum; an all-gather reduces nothing)")
    parser.add_argument("--noncommutative", action="store_true", help="a user-defined non-commutative op")
    add_collective(parser, choices=tuple(COLLECTIVES),
                   help="the collective called: allreduce (default), reduce_scatter or allgather")
    parser.add_argument("--tuning", "-t", default=None,
                        help="tuning file (default: $SWING_MPI_TUNING, ~/.config/swing_mpi/tuning.json, built-in)")
    parser.add_argument("--ranks-per-node", type=int, default=1, metavar="K",
                        help="K ranks on every node: --dims is then the torus of nodes, and auto first picks the "
                             "form (node phases or the torus of ranks DIMSxK) for an allreduce (default 1)")
    parser.add_argument("--network", choices=list(NETWORKS), default=None,
                        help="price the model on this network kind (as $SWING_MPI_NETWORK does)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    """Print the pick and every candidate's estimate."""
    from .topology import parse_dims

    try:
        dims = tuple(parse_dims(args.dims))
        nbytes = parse_size(args.size)
        if nbytes % DTYPES[args.dtype]:
            raise ValueError(f"--size {args.size} is not a whole number of {args.dtype} elements "
                             f"({DTYPES[args.dtype]} bytes each)")
        exact, native_ok = op_facts(args.dtype, args.op)
        noncommutative = args.noncommutative and args.collective != "allgather"  # an all-gather reduces nothing
        if noncommutative:
            exact, native_ok = False, False
        if args.collective != "allreduce":  # each rank gets its own block: as the API decides
            native_ok = True
        if args.collective == "allgather":  # nothing is reduced: the op does not matter
            exact = True
        tuning: Tuning = load_tuning(args.tuning)
        if args.network:
            tuning = replace(tuning, network=args.network)
        k = args.ranks_per_node
        if k < 1:
            raise ValueError(f"--ranks-per-node must be at least 1, got {k}")
        form: Decision | None = None
        if k > 1:  # dims of nodes: the form first (allreduce), then the pick on the form's dims
            size = DTYPES[args.dtype]
            lanes = node_lanes(nbytes, nbytes // size, k, rc.node_chunk)
            if args.collective == "allreduce":
                form = node_form(dims, k, nbytes, size, lanes, exact=exact, commutative=not noncommutative,
                                 native_ok=native_ok, tuning=tuning)
            if form is not None and form.algorithm == "flat":
                dims = (*dims, k)
            else:  # the node phases: each lane among the nodes on its chunk (a block of the nodes' j-th ranks)
                nbytes = -(-nbytes // lanes) if args.collective == "allreduce" else nbytes // k
        p = math.prod(dims)
        if p >= LARGE and network_for(tuning, dims) == "torus":
            print(f"swing-mpi choose: pricing every candidate on {'x'.join(map(str, dims))} routes the schedules "
                  f"of many of its {p} ranks (up to a minute; kept in the model's disk cache for later runs)",
                  file=sys.stderr, flush=True)
        d = explain(p, dims, nbytes, exact=exact, commutative=not noncommutative, native_ok=native_ok,
                    tuning=tuning, collective=args.collective)
    except ValueError as err:
        print(f"swing-mpi choose: {err}", file=sys.stderr)
        return 2
    shape = "x".join(map(str, dims))
    nodes = None if k == 1 else {
        "ranks_per_node": k, "form": "nodes" if form is None else form.algorithm,
        "form_decided_by": "the collective (only the node phases)" if form is None else form.why,
        "form_tried_first": [] if form is None else list(form.tried),
        "forms": [] if form is None else [{"form": e.algorithm, "seconds": e.seconds, "source": e.source,
                                           "detail": e.detail} for e in form.estimates]}
    if args.json:
        print(json.dumps({
            **({"nodes": nodes} if nodes else {}),
            "pick": d.algorithm, "decided_by": d.why, "collective": args.collective, "dims": format_dims(dims), "p": p,
            "nbytes": nbytes, "dtype": args.dtype, "op": "noncommutative" if noncommutative else args.op,
            "exact": exact, "native_ok": native_ok, "network": network_for(tuning, dims), "tuning": tuning.source,
            "tried_first": list(d.tried),
            "candidates": [{"algorithm": e.algorithm, "seconds": e.seconds, "source": e.source, "detail": e.detail,
                            **({"lower_bound_seconds": e.bound} if e.bound is not None else {})}
                           for e in d.estimates],
        }, indent=1))
        return 0
    op = "non-commutative op" if noncommutative else f"{args.dtype} {args.op.upper()}"
    if nodes is not None:
        where = (f"over all ranks on {shape}" if nodes["form"] == "flat" else
                 f"among the nodes on {shape}, {format_size(nbytes)} a lane")
        print(f"# {k} ranks a node: auto runs the {nodes['form']} form ({where}; decided by "
              f"{nodes['form_decided_by']})")
        if form is not None and form.tried:
            print(f"first calls try the forms: {', '.join(form.tried)}, then keep the fastest")
        for e in form.estimates if form is not None else ():
            t = "-" if e.seconds is None else f"{e.seconds * 1e6:.1f} us"
            print(f"  form {e.algorithm:<6}{' *' if e.algorithm == nodes['form'] else '  '}{t:>12}  {e.source:<8}  "
                  f"{e.detail}")
    print(f"# {args.collective} of {format_size(nbytes)} {op} on {shape} (p={p}); "
          f"{'exact' if exact else 'inexact'} op; network {network_for(tuning, dims)}; tuning: {tuning.source}")
    print(f"auto runs: {d.algorithm}  (decided by {d.why})")
    if d.tried:
        print(f"first calls try: {', '.join(d.tried)}, then keep the fastest on this launch "
              f"(blocking calls; SWING_MPI_TRIAL=off: {d.algorithm} from the start)")
    w = max([len(e.algorithm) for e in d.estimates] + [9])
    unit, scale = _time_unit([t for e in d.estimates for t in (e.seconds, e.bound) if t is not None])
    print(f"{'candidate':<{w}}  {'time (' + unit + ')':>12}  source    where the number comes from")
    for e in sorted(d.estimates, key=lambda e: (e.seconds is None, e.bound is None, e.seconds or e.bound or 0.0)):
        if e.seconds is not None:
            t = f"{e.seconds / scale:.{_digits(e.seconds / scale)}f}"
        else:
            t = "-" if e.bound is None else f">= {e.bound / scale:.{_digits(e.bound / scale)}f}"
        mark = " *" if e.algorithm == d.algorithm else "  "
        print(f"{e.algorithm:<{w}}{mark}{t:>12}  {e.source:<8}  {e.detail}")
    return 0
