#!/usr/bin/env python3
r"""Sweep driver (NOT run under mpiexec): our algorithms and MPICH's, one result set.

MPICH reads ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM`` once, at ``MPI_Init``, so
each forced MPICH algorithm needs its own launch. This script runs

1. ``swing-mpi bench`` with our algorithms and ``native`` (MPICH's default
   selection), then
2. ``native`` alone once per ``--mpich-algorithms`` entry other than
   ``default``, with the variable set, its rows labelled ``mpich-<alg>``,

each as its own ``mpiexec`` (inside the emulated torus with ``--lab``: every
rank in its own network namespace, TCP over rate-limited links; needs root),
then merges the runs into ``results.csv``/``results.json`` (``vs_native`` of
every row against run 1's native median at the same size), prints and saves
the merged table (``table.txt``), draws ``goodput.png`` (model dashed when
known) and writes the exact commands to ``commands.txt``.

Example (the lab sweep the benchmark exists for)::

    python benchmarks/sweep.py --np 16 --dims 4x4 --sizes 1K:16M \\
        --mpich-algorithms default,ring,reduce_scatter_allgather,recursive_doubling \\
        --lab --link 40M --out benchmarks/results/lab4x4

Arguments after ``--`` go to every ``swing-mpi bench`` launch unchanged.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

try:
    import swing_mpi  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from swing_mpi.bench import (
    FIELDS,
    add_model_times,
    add_vs_native,
    format_table,
    parse_algorithms,
    plot_results,
    read_results,
    write_csv,
    write_json,
)
from swing_mpi.bench.results import start_text
from swing_mpi.cliargs import deprecated
from swing_mpi.lab import find_mpiexec, kill_group
from swing_mpi.topology import parse_dims
from swing_mpi.units import RATE_HELP, TIME_HELP, format_size, parse_rate, parse_sizes, parse_time, short_size

MPICH_VAR = "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"
MPICH_ALGORITHMS = ("recursive_doubling", "reduce_scatter_allgather", "ring", "recexch",
                    "k_reduce_scatter_allgather", "tree", "nb", "smp")


def _say(msg: str) -> None:
    print(f"sweep: {msg}", file=sys.stderr, flush=True)


def build_parser() -> argparse.ArgumentParser:
    doc = __doc__ or ""
    ap = argparse.ArgumentParser(prog="benchmarks/sweep.py", description=doc.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=doc[doc.index("MPICH reads"):])
    ap.add_argument("--np", "-n", type=int, default=None, help="ranks (default: the product of --dims, else 4)")
    ap.add_argument("--dims", default=None, help="torus dims, e.g. 4x4 (the lab's shape too; default: a ring of --np)")
    ap.add_argument("--sizes", default="1K:1M", help="bench --sizes (default 1K:1M)")
    ap.add_argument("--algorithms", default=None,
                    help="our algorithms for run 1 (bench --algorithms; default: every registered one); "
                    "native is always added")
    ap.add_argument("--mpich-algorithms", default="default",
                    help="comma list of MPICH algorithms for extra native runs (default: only 'default', "
                    f"i.e. run 1's native); known: default, {', '.join(MPICH_ALGORITHMS)}")
    ap.add_argument("--out", required=True, help="directory for the results")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--op", default="sum")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--max-time", type=float, default=None, help="bench --max-time (seconds per point)")
    ap.add_argument("--max-bytes", default=None, help="bench --max-bytes")
    place = ap.add_mutually_exclusive_group()
    place.add_argument("--inplace", action="store_true")
    place.add_argument("--both", action="store_true")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="MPIEXEC_TIMEOUT of each launch in seconds (default 1800)")
    ap.add_argument("--lab", action="store_true", help="run inside an emulated torus of --dims (needs root)")
    ap.add_argument("--link", default=None, metavar="RATE",
                    help=f"lab link rate per direction, {RATE_HELP} (default: the lab's, 40M)")
    deprecated(ap, "--rate-mbit", dest="link", new="--link", convert=lambda v: f"{v}M")
    ap.add_argument("--mtu", type=int, default=None, help="lab MTU (default: the lab's, 65000)")
    ap.add_argument("--burst-kib", type=int, default=None,
                    help="lab token-bucket burst per port, KiB (default: the lab's, 256)")
    ap.add_argument("--tcp-cc", default=None, metavar="NAME",
                    help="lab TCP congestion control in every namespace (default: the lab's, auto: cubic where the "
                    "kernel lets a namespace use it, else the host's default; host: the host's)")
    ap.add_argument("--queue-ms", type=int, default=None,
                    help="lab queue depth per port, ms at the rate (default: the lab's, 400)")
    ap.add_argument("--routers", action="store_true",
                    help="lab nodes with a router namespace apart from the rank's (swing-mpi lab --routers)")
    ap.add_argument("--lab-check", nargs="?", const="fail", choices=("fail", "warn"), default=None,
                    help="check the lab's routes and rates before the runs (lab-check.json); a failed check "
                    "stops the sweep, or with --lab-check=warn is only reported")
    ap.add_argument("--model-link", default=None, metavar="RATE",
                    help=f"model lines at this link rate, {RATE_HELP} (default with --lab: --link)")
    deprecated(ap, "--model-link-mbps", dest="model_link", new="--model-link", convert=lambda v: f"{v}M")
    ap.add_argument("--model-alpha", default=None, metavar="TIME",
                    help=f"model latency per step, {TIME_HELP} (default 0)")
    deprecated(ap, "--model-alpha-us", dest="model_alpha", new="--model-alpha", convert=lambda v: f"{v}us")
    ap.add_argument("--bw-unit", choices=("GB", "MB"), default=None, help="table unit (default MB with --lab, else GB)")
    ap.add_argument("--python", default=sys.executable, help="interpreter of the ranks (default: this one)")
    ap.add_argument("--dry-run", action="store_true", help="write commands.txt and print the commands, run nothing")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="after --: extra options for every bench launch")
    return ap


# -- commands ------------------------------------------------------------------------------

class Launch:
    """One mpiexec launch of the benchmark."""

    def __init__(self, name: str, bench_argv: list[str], env: dict[str, str], label: str) -> None:
        self.name = name
        self.bench_argv = bench_argv
        self.env = env
        self.label = label
        self.json = ""
        self.csv = ""
        self.log = ""


def plan_launches(args: argparse.Namespace, out: str) -> tuple[list[Launch], int, tuple[int, ...] | None]:
    """Return the launches of a sweep (pure: no MPI, no processes)."""
    dims = parse_dims(args.dims) if args.dims else None
    np_ = args.np if args.np else (math.prod(dims) if dims else 4)
    if dims is not None and math.prod(dims) != np_:
        raise ValueError(f"--dims {args.dims} holds {math.prod(dims)} ranks, --np is {np_}")
    parse_sizes(args.sizes)  # fail early
    ours = parse_algorithms(args.algorithms)
    if "native" not in ours:
        ours = ["native"] + ours
    mpich = [a.strip() for a in args.mpich_algorithms.split(",") if a.strip()]
    for a in mpich:
        if a != "default" and a not in MPICH_ALGORITHMS:
            raise ValueError(f"unknown MPICH algorithm {a!r}; known: default, {', '.join(MPICH_ALGORITHMS)}")
    extra = list(args.bench_args or [])
    if extra and extra[0] == "--":
        extra = extra[1:]
    common = ["--sizes", args.sizes, "--dtype", args.dtype, "--op", args.op]
    if args.dims:
        common += ["--dims", args.dims]
    for opt, val in (("--iters", args.iters), ("--warmup", args.warmup), ("--max-time", args.max_time),
                     ("--max-bytes", args.max_bytes)):
        if val is not None:
            common += [opt, str(val)]
    if args.both:
        common.append("--both")
    elif args.inplace:
        common.append("--inplace")
    common += ["--bw-unit", args.bw_unit or ("MB" if args.lab else "GB")]
    launches = [Launch("main", common + ["--algorithms", ",".join(ours)], {}, "native")]
    for a in mpich:
        if a == "default":
            continue
        launches.append(Launch(f"mpich-{a}", common + ["--algorithms", "native", "--label", f"mpich-{a}"],
                               {MPICH_VAR: a}, f"mpich-{a}"))
    for L in launches:
        L.json = os.path.join(out, f"run-{L.name}.json")
        L.csv = os.path.join(out, f"run-{L.name}.csv")
        L.log = os.path.join(out, f"run-{L.name}.txt")
        L.bench_argv = L.bench_argv + ["--json", L.json, "--csv", L.csv] + extra
    return launches, np_, dims


def bench_command(python: str, bench_argv: Sequence[str]) -> list[str]:
    """Return the rank program: ``python -m mpi4py -m swing_mpi bench ...`` (an exception aborts all ranks)."""
    return [python, "-m", "mpi4py", "-m", "swing_mpi", "bench", *bench_argv]


def shm_argv(mpiexec: str, np_: int, cmd: Sequence[str]) -> list[str]:
    return [mpiexec, "-n", str(np_), *cmd]


def shown_env(env: dict[str, str]) -> str:
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())


# -- running -----------------------------------------------------------------------------------

def _run_tee(argv: Sequence[str], env: dict[str, str], log_path: str, timeout: float) -> int:
    """Run ``argv`` in its own process group; stdout goes to our stdout and ``log_path``."""
    full_env = dict(os.environ)
    full_env.update(env)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(list(argv), env=full_env, stdout=subprocess.PIPE, text=True, bufsize=1,
                                start_new_session=True)
        deadline = time.monotonic() + timeout + 60
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(list(argv), timeout)
            return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            kill_group(proc)
            raise


def _seconds(t: float) -> str:
    return f"{t:.3f} s" if t >= 1 else f"{t * 1e3:.1f} ms"


def timing_line(env: dict[str, Any]) -> str:
    """Return a comment line saying how the bench timed each call (:func:`swing_mpi.bench.results.start_text`)."""
    return f"# each call timed: {start_text(env)}; max over ranks\n" if env.get("start") else ""


def summary(rows: Sequence[dict[str, object]]) -> str:
    """Return a short digest: speed-up over ``native`` per algorithm and size, and the headline at the largest size.

    Speed-up = native's median / the algorithm's median (out-of-place rows when there
    are any). ``mpich-*`` rows are MPICH's forced algorithms; ``best MPICH`` is the
    fastest of native and those at each size.
    """
    place = "out" if any(r["place"] == "out" for r in rows) else rows[0]["place"]
    med: dict[tuple[str, int], float] = {}
    names: list[str] = []
    for r in rows:
        if r["place"] != place or r.get("time_median_us") in (None, ""):
            continue
        name = str(r.get("label") or r["algorithm"])
        med[(name, int(str(r["size"])))] = float(str(r["time_median_us"])) * 1e-6
        if name not in names:
            names.append(name)
    sizes = sorted({size for _, size in med if ("native", size) in med})
    if not sizes:
        return "# summary: no native rows to compare with"
    mpich = [n for n in names if n.startswith("mpich-")]
    ours = [n for n in names if n != "native" and n not in mpich]
    width = max(len(n) for n in [*names, "best MPICH (forced)", "native median"]) + 1
    lines = [f"# speed-up over MPI_Allreduce (MPICH's default = native): native median / median ({place}-of-place)",
             f"{'algorithm':<{width}}" + "".join(f"{short_size(z):>9}" for z in sizes),
             f"{'native median':<{width}}" + "".join(f"{_seconds(med[('native', z)]):>9}" for z in sizes)]
    for n in ours + mpich:
        cells = [f"{med[('native', z)] / med[(n, z)]:.2f}x" if (n, z) in med else "-" for z in sizes]
        lines.append(f"{n:<{width}}" + "".join(f"{c:>9}" for c in cells))
    if mpich:
        cells = []
        for z in sizes:
            best = min((med[(n, z)], n) for n in ["native", *mpich] if (n, z) in med)
            cells.append(f"{best[1].removeprefix('mpich-')[:8]}")
        lines.append(f"{'best MPICH (forced)':<{width}}" + "".join(f"{c:>9}" for c in cells))
    top = sizes[-1]
    here = sorted((med[(n, top)], n) for n in names if (n, top) in med)
    native = med[("native", top)]
    lines.append(f"# at {format_size(top)}: " + ", ".join(
        f"{n} {_seconds(t)}" + ("" if n == "native" else f" ({native / t:.1f}x)") for t, n in here))
    return "\n".join(lines)


def merge(launches: Sequence[Launch]) -> tuple[dict[str, object], list[dict[str, object]]]:
    """Rows of all launches; ``vs_native`` against the first launch's native rows."""
    envs: dict[str, object] = {}
    rows: list[dict[str, object]] = []
    reference = None
    for L in launches:
        if not os.path.exists(L.json):
            _say(f"{L.name}: no {L.json}, left out")
            continue
        env, rs = read_results(L.json)
        envs[L.name] = env
        if reference is None:
            reference = [r for r in rs if r["algorithm"] == "native"]
        rows.extend(rs)
    add_vs_native(rows, reference)
    rows.sort(key=lambda r: (int(r["size"]), r["place"]))  # size-major, launch order within a size (stable)
    return envs, rows


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = args.out
    try:
        for flag, value, parse in (("--link", args.link, parse_rate), ("--model-link", args.model_link, parse_rate),
                                   ("--model-alpha", args.model_alpha, parse_time)):
            if value is not None:
                parse(value, flag)
        launches, np_, dims = plan_launches(args, out)
    except ValueError as e:
        print(f"sweep: {e}", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    mpiexec = find_mpiexec()
    sweep_cmd = shlex.join([sys.executable, *sys.argv]) if argv is None else shlex.join(["benchmarks/sweep.py", *argv])
    lines = [f"# sweep: {sweep_cmd}", f"# cwd: {os.getcwd()}"]
    if args.lab:
        from swing_mpi.lab.plan import (
            DEFAULT_BURST_KIB,
            DEFAULT_MTU,
            DEFAULT_QUEUE_MS,
            DEFAULT_RATE_MBIT,
            DEFAULT_TCP_CC,
            make_plan,
            usable_cpus,
        )
        from swing_mpi.lab.system import choose_tcp_cc

        rate = parse_rate(args.link, "--link") / 1e6 if args.link is not None else DEFAULT_RATE_MBIT
        mtu = args.mtu if args.mtu is not None else DEFAULT_MTU
        burst = args.burst_kib if args.burst_kib is not None else DEFAULT_BURST_KIB
        tcp_cc = args.tcp_cc if args.tcp_cc is not None else DEFAULT_TCP_CC
        queue = args.queue_ms if args.queue_ms is not None else DEFAULT_QUEUE_MS
        lab_dims = args.dims or str(np_)
        tcp = choose_tcp_cc(tcp_cc, strict=False)  # the lab checks it strictly before it builds
        try:  # the lab's settings, checked before anything is written or built
            plan = make_plan(lab_dims, rate_mbit=rate, mtu=mtu, burst_kib=burst, tcp_cc=tcp.setting,
                             routers=args.routers, queue_ms=queue)
        except ValueError as e:
            _say(f"sweep: lab: {e}")
            return 2
        note = plan.cpu_note(usable_cpus())
        if note:
            _say(f"sweep: lab: note: {note}")
            lines.append(f"# note: {note}")
        lines.append(f"# each launch ran inside one emulated {lab_dims} torus lab ({rate:g} Mbit/s per link "
                     f"direction, MTU {mtu}, burst {burst} KiB, TCP {tcp.note}"
                     f"{f', queues {queue} ms' if queue != DEFAULT_QUEUE_MS else ''}"
                     f"{', routers apart from hosts' if args.routers else ''}) built once for the sweep; "
                     "equivalent stand-alone commands:")
        for L in launches:
            envs = " ".join(f"-e {k}={shlex.quote(v)}" for k, v in L.env.items())
            lines.append(f"{shlex.quote(sys.executable)} -m swing_mpi lab --dims {lab_dims} --link {rate:g}M "
                         f"--mtu {mtu} --burst-kib {burst} --tcp-cc {tcp.setting}"
                         f"{' --routers' if args.routers else ''} "
                         f"{f'--queue-ms {queue} ' if queue != DEFAULT_QUEUE_MS else ''}"
                         f"--timeout {args.timeout:g} -n {np_} "
                         f"{envs + ' ' if envs else ''}-- "
                         + shlex.join(bench_command("python", L.bench_argv)))
    else:
        rate, mtu, burst, tcp_cc, lab_dims, queue = None, None, None, None, None, None
        lines.append("# shared memory, plain mpiexec:")
        for L in launches:
            env = {"MPIEXEC_TIMEOUT": str(int(args.timeout)), **L.env}
            argv_ = shm_argv(mpiexec, np_, bench_command(args.python, L.bench_argv))
            lines.append(f"{shown_env(env)} " + shlex.join(argv_))
    with open(os.path.join(out, "commands.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if args.dry_run:
        print("\n".join(lines))
        return 0

    t0 = time.perf_counter()
    codes: dict[str, int] = {}
    check_ok: bool | None = None
    tcp_name: str | None = None
    tcp_note: str | None = None
    if args.lab:
        from swing_mpi.lab import Lab, LabError

        unbuilt = os.path.join(out, "lab-unavailable.txt")
        if os.path.exists(unbuilt):
            os.unlink(unbuilt)
        built = False
        try:
            with Lab(lab_dims, rate_mbit=rate, mtu=mtu, burst_kib=burst, tcp_cc=tcp_cc, routers=args.routers,
                     queue_ms=queue, log=_say) as lab:
                built = True
                tcp_name, tcp_note = lab.tcp_cc, lab.tcp_choice.note
                if args.lab_check:
                    res = lab.check(print_table=False)
                    check_ok = res.ok
                    _say("\n" + res.table())
                    with open(os.path.join(out, "lab-check.json"), "w") as f:
                        json.dump(res.as_dict(), f, indent=1)
                    if not res.ok and args.lab_check == "fail":
                        _say("lab check FAILED")
                        return 1
                    if not res.ok:
                        _say("lab check FAILED: measuring anyway (--lab-check=warn); see lab-check.json")
                for L in launches:
                    argv_ = lab.mpiexec_argv(np_, bench_command(args.python, L.bench_argv), env=L.env,
                                             timeout=args.timeout)
                    _say(f"{L.name}: {shlex.join(bench_command('python', L.bench_argv))}"
                         + (f"  [{shown_env(L.env)}]" if L.env else ""))
                    codes[L.name] = _run_tee(argv_, {}, L.log, args.timeout)
                    _say(f"{L.name}: exit {codes[L.name]} after {time.perf_counter() - t0:.1f} s")
        except LabError as e:
            if built:
                _say(f"lab failed: {e}")
                return 1
            reason = " ".join(str(e).split())  # a host that cannot build the lab: one line, for scripts/demo.sh
            with open(unbuilt, "w") as f:
                f.write(reason + "\n")
            _say(f"no lab here: {reason}")
            return 2
    else:
        for L in launches:
            env = {"MPIEXEC_TIMEOUT": str(int(args.timeout)), **L.env}
            argv_ = shm_argv(mpiexec, np_, bench_command(args.python, L.bench_argv))
            _say(f"{L.name}: {shown_env(env)} {shlex.join(argv_)}")
            codes[L.name] = _run_tee(argv_, env, L.log, args.timeout)
            _say(f"{L.name}: exit {codes[L.name]} after {time.perf_counter() - t0:.1f} s")

    envs, rows = merge(launches)
    if not rows:
        _say("no results")
        return 1
    model_bps = (parse_rate(args.model_link, "--model-link") if args.model_link is not None
                 else (rate * 1e6 if args.lab else None))
    model = None
    if model_bps:
        model = {"link_bytes_per_s": model_bps / 8,
                 "alpha": parse_time(args.model_alpha, "--model-alpha") if args.model_alpha else 0.0,
                 "congestion": "routed"}
        add_model_times(rows, warn=_say, **model)
    sweep = {"command": sweep_cmd, "np": np_, "dims": args.dims, "lab": bool(args.lab), "lab_check_ok": check_ok,
             "rate_mbit": rate, "mtu": mtu, "burst_kib": burst, "tcp_cc": tcp_name, "tcp_cc_note": tcp_note,
             "routers": bool(args.lab and args.routers), "queue_ms": queue,
             "mpich_algorithms": args.mpich_algorithms, "model": model, "exit_codes": codes,
             "seconds": round(time.perf_counter() - t0, 1)}
    write_csv(rows, os.path.join(out, "results.csv"), FIELDS)
    write_json(os.path.join(out, "results.json"), {"sweep": sweep, "runs": envs}, rows)
    unit = args.bw_unit or ("MB" if args.lab else "GB")
    table = format_table(rows, unit)
    lab_line = (f"# lab {lab_dims} at {rate:g} Mbit/s per link direction, TCP congestion control {tcp_note}\n"
                if args.lab else "")
    first = next(iter(envs.values()), {})
    lab_line += timing_line(first)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(f"# {sweep_cmd}\n{lab_line}# vs_native: median / run 1's native median at the same size\n{table}\n")
    if len(launches) > 1:  # one launch has printed this table already
        print("\n# merged (vs_native against run 1's native)\n" + table)
    digest = summary(rows)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(f"# {sweep_cmd}\n{lab_line}{digest}\n")
    print("\n" + lab_line + digest, flush=True)
    where = f"lab {lab_dims} at {rate:g} Mbit/s, TCP {tcp_name}" if args.lab else "shared memory"
    title = (f"allreduce {args.dtype} {args.op}, p={np_}, dims {first.get('dims', args.dims)}, {where}"
             f" — {first.get('mpi_library', '')}")
    try:
        plot_results(rows, os.path.join(out, "goodput.png"), title=title)
    except ImportError as e:
        _say(f"no plot: {e}")
    wrong = sum(max(0, int(r.get("wrong") or 0)) for r in rows)
    _say(f"wrote {out}/results.csv, results.json, table.txt, summary.txt, goodput.png, commands.txt "
         f"({len(rows)} rows, #wrong {wrong}, {time.perf_counter() - t0:.1f} s)")
    bad = {k: v for k, v in codes.items() if v}
    if bad:
        _say(f"launches that failed: {bad}")
    return 1 if (bad or wrong) else 0


if __name__ == "__main__":
    sys.exit(main())
