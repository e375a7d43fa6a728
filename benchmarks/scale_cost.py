"""The simulator's own cost as p grows: wall time and peak memory of one point (a benchmark, not a test).

    nice python benchmarks/scale_cost.py                     # 8x8 .. 128x128, swing-bw, 1 MiB, preset c

Each point is a fresh ``swing-mpi simulate ... --json`` process; its CPU time
(with its children: the SimGrid process) and peak resident memory (the largest
of them) come from ``getrusage(RUSAGE_CHILDREN)``: the CPU time is what the
point costs on an idle machine, whatever else runs. Results are appended to benchmarks/results/scale/cost.jsonl with
the machine's load average before and after (other processes on the cores
stretch the wall time, not the memory).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "scale" / "cost.jsonl"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="8x8,16x16,32x32,64x64,128x128")
    ap.add_argument("--algorithm", default="swing-bw")
    ap.add_argument("--size", default="1M")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    from swing_mpi.netsim.sgload import simgrid_available

    simgrid = simgrid_available()[1]
    for shape in args.shapes.split(","):
        cmd = [sys.executable, "-m", "swing_mpi", "simulate", "--dims", shape, "--sizes", args.size,
               "--algorithms", args.algorithm, "--alpha", "c", "--json"]
        import resource

        load0 = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        wall = time.perf_counter() - t0
        # communicate() reaped the child; its rusage (with its waited-for children) is in RUSAGE_CHILDREN
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        maxrss = after.ru_maxrss
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        rec: dict = {"shape": shape, "algorithm": args.algorithm, "size": args.size, "returncode": proc.returncode,
                     "wall_s": wall, "cpu_s": cpu, "max_rss_kib_so_far": maxrss, "loadavg_before": load0,
                     "loadavg_after": os.getloadavg(), "command": " ".join(cmd[1:]), "simgrid": simgrid,
                     "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        if lines:
            rec["result"] = lines[0]
        else:
            rec["stderr"] = err[-2000:]
        with open(args.out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"{shape}: rc {proc.returncode}, {wall:.1f} s wall, {cpu:.1f} s CPU, "
              f"max rss so far {maxrss / 1024:.0f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
