"""``swing-mpi lab`` / ``python -m swing_mpi.lab``: build a torus lab, check it, run MPI in it.

Examples::

    swing-mpi lab --dims 4x4 --check                      # build, verify, tear down
    swing-mpi lab --dims 4x4 -- python -m swing_mpi.bench ...   # one rank per node
    swing-mpi lab --dims 2x2 --ranks-per-node 4 -- ...    # 16 ranks, 4 per node on shared memory
    swing-mpi lab --dims 4x4 --plan                       # print the commands, build nothing
    swing-mpi lab --cleanup                               # delete namespaces left behind

The lead wires :func:`add_arguments` and :func:`run` into the main CLI.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from ..cliargs import Parser, deprecated
from ..topology import Torus
from ..units import RATE_HELP, format_dims, parse_rate
from .lab import Lab, check_ranks_per_node, hosts_argument, launch_argv, parse_placement
from .plan import (
    DEFAULT_BURST_KIB,
    DEFAULT_MTU,
    DEFAULT_PREFIX,
    DEFAULT_QUEUE_MS,
    DEFAULT_RATE_MBIT,
    DEFAULT_TCP_CC,
    HOST_TCP_CC,
    PREFERRED_TCP_CC,
    make_plan,
    usable_cpus,
)
from .system import LabError, LabUnavailableError, choose_tcp_cc, cleanup_stale, find_mpiexec, lab_available

__all__ = ["add_arguments", "run", "main", "build_parser"]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the lab's options (and the trailing ``-- command``) to ``parser``."""
    parser.add_argument("--dims", default="4x4", help="torus sides, e.g. 4x4, 2x2x2, 16 (default 4x4)")
    parser.add_argument(
        "--link", default=f"{DEFAULT_RATE_MBIT:g}M", metavar="RATE",
        help=f"rate of every link direction, {RATE_HELP} (default {DEFAULT_RATE_MBIT:g}M)",
    )
    deprecated(parser, "--rate-mbit", dest="link", new="--link", convert=lambda v: f"{v}M")
    parser.add_argument("--mtu", type=int, default=DEFAULT_MTU,
                        help=f"MTU of every link in bytes (default {DEFAULT_MTU})")
    parser.add_argument(
        "--burst-kib", type=int, default=DEFAULT_BURST_KIB, metavar="KIB",
        help=f"token-bucket burst of every port in KiB: what an idle port may send at once beyond the rate "
             f"(default {DEFAULT_BURST_KIB}; at least the MTU)",
    )
    parser.add_argument(
        "--tcp-cc", default=DEFAULT_TCP_CC, metavar="NAME",
        help=f"TCP congestion control in every namespace (default {DEFAULT_TCP_CC}: {PREFERRED_TCP_CC} where the "
             f"kernel lets a namespace use it, else the host's default; {HOST_TCP_CC!r}: the host's default, which "
             f"may pace flows below the links' rate, as bbr does; another name is forced, and refused before "
             f"anything is built where the kernel would refuse it)",
    )
    parser.add_argument(
        "--queue-ms", type=int, default=DEFAULT_QUEUE_MS, metavar="MS",
        help=f"depth of every port's queue in milliseconds: the time its bytes take at the rate (default "
             f"{DEFAULT_QUEUE_MS})",
    )
    parser.add_argument(
        "--routers", action="store_true",
        help="give every node a router namespace apart from its rank's, so a port treats the node's own traffic "
             "like what it forwards (docs/lab.md)",
    )
    parser.add_argument(
        "--check", action="store_true",
        help="verify routes and link rates before running (alone: build, check, tear down)",
    )
    parser.add_argument("--check-seconds", type=float, default=1.5,
                        help="length of each rate test in seconds (default 1.5)")
    parser.add_argument("--check-json", metavar="FILE", help="also write the check result as JSON to FILE")
    parser.add_argument(
        "--timeout", type=float, default=600, help="MPIEXEC_TIMEOUT for the command, seconds (default 600)"
    )
    parser.add_argument(
        "--env", "-e", action="append", default=[], metavar="NAME=VALUE",
        help="environment variable for every rank (repeatable), e.g. MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring",
    )
    parser.add_argument("--ranks", "-n", "--nprocs", dest="nprocs", type=int, default=None,
                        help="number of ranks (default: the torus size times --ranks-per-node)")
    parser.add_argument(
        "--ranks-per-node", type=int, default=1, metavar="K",
        help="ranks in every node (default 1): ranks r*K..r*K+K-1 share node r and talk through shared memory, "
             "nodes over the links (MPICH's mpiexec only); each rank also finds its index in the node in "
             "$SWING_LAB_LOCAL and its place on the flat torus DIMSxK in $SWING_LAB_SLOT")
    parser.add_argument(
        "--placement", default=None, metavar="ordered|shuffled[:SEED]|LIST",
        help="which node each rank runs in: ordered (rank r in node r, default), shuffled (a random permutation, "
             "seed 1 unless given) or a comma list of nodes by rank (with --ranks-per-node K: by block of K "
             "ranks); every rank finds its node in $SWING_LAB_NODE (swing-mpi bench --node-env SWING_LAB_NODE)")
    parser.add_argument(
        "--plan", action="store_true", help="print the setup and teardown commands and exit (needs no root)"
    )
    parser.add_argument("--cleanup", action="store_true", help="delete namespaces left behind by dead labs and exit")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help=argparse.SUPPRESS)
    parser.add_argument(
        "command", nargs=argparse.REMAINDER,
        help="after --: the program to run under mpiexec, rank r inside node r (r // K with --ranks-per-node K; "
        "a leading 'python' means this interpreter)",
    )


def build_parser(prog: str = "python -m swing_mpi.lab") -> argparse.ArgumentParser:
    """Return a stand-alone parser with :func:`add_arguments`."""
    p = Parser(
        prog=prog,
        description="Emulated torus lab: one network namespace per node, rate-limited veth links, "
        "minimal dimension-order routes; runs an MPI program with every rank in its node.",
    )
    add_arguments(p)
    return p


def _parse_env(items: Sequence[str]) -> dict:
    env = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--env expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        env[k] = v
    return env


def run(args: argparse.Namespace) -> int:
    """Carry out a parsed ``lab`` command line; returns the exit status."""
    command: list[str] = list(args.command or [])
    if command and command[0] == "--":
        command = command[1:]
    try:
        torus = Torus.from_spec(args.dims)
        rate_mbit = parse_rate(args.link, "--link") / 1e6
        tcp = choose_tcp_cc(args.tcp_cc, strict=False)  # strictly again before a build
        plan = make_plan(torus, prefix=args.prefix, rate_mbit=rate_mbit, mtu=args.mtu, burst_kib=args.burst_kib,
                         tcp_cc=tcp.setting, routers=args.routers, queue_ms=args.queue_ms)
        placement = parse_placement(getattr(args, "placement", None), torus.size)
        per_node = check_ranks_per_node(getattr(args, "ranks_per_node", 1))
    except ValueError as e:
        _say(f"lab: {e}")
        return 2
    note = plan.cpu_note(usable_cpus())
    if args.plan:
        try:
            print(f"# {plan.describe()}")
            print(f"# TCP congestion control {tcp.note}")
            if note:
                print(f"# note: {note}")
            if per_node > 1:
                print(f"# {torus.size * per_node} ranks, {per_node} per node: mpiexec -launcher fork -hosts "
                      f"{hosts_argument(plan, per_node, placement)} ...")
            print("# setup")
            for c in plan.setup_commands():
                print(c.shell())
            print("# teardown")
            for c in plan.teardown_commands():
                print(c.shell())
        except BrokenPipeError:
            pass
        return 0
    if args.cleanup:
        ok, why = lab_available(HOST_TCP_CC)  # deleting needs no congestion control
        if not ok:
            _say(f"lab: {why}")
            return 2
        gone = cleanup_stale(args.prefix, log=_say)
        _say(f"lab: deleted {len(gone)} stale namespaces")
        return 0
    if not command and not args.check:
        _say("lab: nothing to do: give --check and/or a command after --, or --plan / --cleanup")
        return 2
    env = _parse_env(args.env)
    if command and per_node > 1:
        try:
            mpiexec = find_mpiexec()
            launch_argv(plan, command, wrapper="lab-exec.sh", mpiexec=mpiexec, nprocs=args.nprocs,
                        ranks_per_node=per_node)  # refuses a launcher that cannot, before anything is built
        except (ValueError, LabError) as e:
            _say(f"lab: {e}")
            return 2
    if note:
        _say(f"lab: note: {note}")
    try:
        with Lab(torus, rate_mbit=rate_mbit, mtu=args.mtu, prefix=args.prefix, log=_say,
                 placement=placement, burst_kib=args.burst_kib, tcp_cc=args.tcp_cc, routers=args.routers,
                 queue_ms=args.queue_ms, ranks_per_node=per_node) as lab:
            if placement is not None:
                _say(f"lab: placement, node of each {'rank' if per_node == 1 else f'block of {per_node} ranks'}: "
                     f"{','.join(map(str, placement))}")
            rc = 0
            if args.check:
                _say("lab: checking routes and link rates")
                res = lab.check(seconds=args.check_seconds, print_table=False)
                _say(res.table())
                if args.check_json:
                    with open(args.check_json, "w") as f:
                        json.dump({"dims": format_dims(torus.dims), "rate_mbit": rate_mbit, "mtu": args.mtu,
                                   "burst_kib": args.burst_kib, "tcp_cc": lab.tcp_cc,
                                   "tcp_cc_note": lab.tcp_choice.note,
                                   "routers": args.routers, "queue_ms": args.queue_ms, "ranks_per_node": per_node,
                                   "build_seconds": lab.build_seconds, **res.as_dict()}, f, indent=2)
                if not res.ok:
                    _say("lab: check FAILED")
                    return 1
            if command:
                t0 = time.perf_counter()
                proc = lab.run_mpi(command, nprocs=args.nprocs, env=env, timeout=args.timeout)
                rc = proc.returncode
                _say(f"lab: command exited {rc} after {time.perf_counter() - t0:.2f} s")
            return rc
    except LabUnavailableError as e:
        _say(f"lab: {e}")
        return 2
    except LabError as e:
        _say(f"lab: {e}")
        return 1
    except KeyboardInterrupt:
        _say("lab: interrupted (lab torn down)")
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m swing_mpi.lab``."""
    args = build_parser().parse_args(argv)
    return run(args)
