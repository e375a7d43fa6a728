"""The paper's evaluation on the simulator: a resumable runner (JSON lines; points already done are skipped).

    nice python benchmarks/scale.py                          # every stage, in priority order
    nice python benchmarks/scale.py --stages A,B --list      # what would run, with each point's message count
    python benchmarks/scale.py --algorithms swing-bw,bucket --shapes 8x8 --sizes 32,1M --presets c

Networks at 400 Gb/s, 100 ns per link, 300 ns per router hop (the paper's), both
software-cost presets (benchmarks/simrun.py: preset_params): ``c`` (1.5 us per
step, no reduction cost: the paper's network-only setting), ``c-reduce`` (the
same plus numpy's add per byte, the reduction a C MPI pays) and ``engine``
(this library's measured costs, swing-mpi probe, a rank's lanes in series).
``--algorithms all`` (the default) is every algorithm registered when the
runner starts, so algorithms merged later come in on the next run.

The grid is ordered in stages so that what matters most finishes first on a
small machine (see STAGES); a point whose run would move more than
``--max-messages`` messages (p times a rank's sends: ring and Hamiltonian
rings take 2(p-1) steps, bucket 2 sum(d-1)) is skipped and listed with that
count in ``skipped.txt``. Each point runs in its own process (one SimGrid
engine per process), which also gives its wall time and peak memory.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from math import prod
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simrun import messages, netsim_revision, parse_dims, preset_params, simulate_point  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "scale"
KIB, MIB = 1 << 10, 1 << 20
SIZES_FULL = (32, 128, 512, 2 * KIB, 8 * KIB, 32 * KIB, 128 * KIB, 512 * KIB, 2 * MIB, 8 * MIB, 32 * MIB,
              128 * MIB, 512 * MIB)
SIZES_MID = (32, 512, 8 * KIB, 128 * KIB, 2 * MIB, 32 * MIB, 128 * MIB, 512 * MIB)
SIZES_FEW = (32, 32 * KIB, 2 * MIB, 128 * MIB, 512 * MIB)
SIZES_TWO = (32 * KIB, 32 * MIB)
ALL = None
PAPER_ALGS = ("swing-bw", "swing-lat", "recdoub", "rabenseifner", "recdoub-mirrored", "swing-bw-1port")
OURS = ("swing-bw", "swing-lat")
C_MPI = ("recdoub", "rabenseifner", "ring")

# (stage, network, shapes, sizes, presets, algorithms): the order points run in. Algorithms: ALL, a tuple of
# names, or ("-name", ...) for all but those. The engine preset runs our Swing (what this library would run),
# c-reduce what a C MPI_Allreduce runs (recdoub, rabenseifner, ring). Ordered for a loaded 2-core machine:
# small shapes in full first, then one or two sizes of the large ones.
NO_HAM = ("-hamiltonian",)
BIG = (32, 2 * MIB, 512 * MIB)
LARGEST = (512 * MIB,)
STAGES: list[tuple[str, str, tuple[str, ...], tuple[int, ...], tuple[str, ...], tuple[str, ...] | None]] = [
    ("S", "torus", ("8x8", "16x16", "32x32", "64x64"), (MIB,), ("c",), ("swing-bw",)),
    ("A", "torus", ("8x8",), SIZES_FULL, ("c",), ALL),
    ("A2", "torus", ("8x8",), SIZES_MID, ("engine",), OURS),
    ("A3", "torus", ("8x8",), SIZES_MID, ("c-reduce",), C_MPI),
    ("A4", "torus", ("8x8",), SIZES_MID, ("engine-cgamma",), ("swing-bw",)),
    ("B", "torus", ("16x16",), SIZES_FEW, ("c",), NO_HAM),
    ("D", "torus", ("16x16",), SIZES_FEW, ("engine",), OURS),
    ("D3", "torus", ("16x16",), SIZES_FEW, ("engine-cgamma",), ("swing-bw",)),
    ("E", "torus", ("64x64",), BIG, ("c",), ("swing-bw", "swing-lat", "recdoub", "rabenseifner")),
    ("X", "torus", ("8x8x8", "4x4x4x4"), (32, 512 * MIB), ("c",),
     ("swing-bw", "swing-lat", "recdoub", "rabenseifner", "bucket")),
    ("F", "hyperx", ("32x32",), (32, 512 * MIB), ("c",), ("swing-bw", "recdoub", "rabenseifner", "recdoub-mirrored")),
    ("D2", "torus", ("16x16",), SIZES_FEW, ("c-reduce",), C_MPI),
    ("G3", "torus", ("64x64",), (512 * MIB,), ("engine", "engine-cgamma"), ("swing-bw",)),
    ("G4", "torus", ("64x64",), (512 * MIB,), ("c-reduce",), ("rabenseifner",)),
    ("C", "torus", ("64x16", "128x8", "256x4"), LARGEST, ("c",), ("swing-bw", "rabenseifner", "recdoub-mirrored")),
    ("E2", "torus", ("16x16x16", "8x8x8x8"), LARGEST, ("c",), ("swing-bw", "rabenseifner")),
    ("E3", "torus", ("64x64",), BIG, ("c",), ("recdoub-mirrored", "swing-bw-1port")),
    ("G", "torus", ("64x64",), (32, 2 * MIB), ("engine",), ("swing-bw",)),
    ("G2", "torus", ("64x64",), (32, 2 * MIB), ("c-reduce",), ("recdoub", "rabenseifner")),
    ("X2", "torus", ("8x8x8", "4x4x4x4"), BIG, ("c",), (*PAPER_ALGS, "bucket")),
    ("B2", "torus", ("32x32",), SIZES_FEW, ("c",), NO_HAM),
    ("F2", "hyperx", ("32x32",), SIZES_FEW, ("c",), ALL),
    ("E4", "torus", ("16x16x16", "8x8x8x8"), SIZES_FEW, ("c",), (*PAPER_ALGS, "bucket")),
    ("H", "torus", ("128x128",), SIZES_TWO, ("c",), PAPER_ALGS),
    # with scaled message sizes on large tori (2026-12-06) the rest of the paper's sizes became affordable
    ("E5", "torus", ("64x64",), SIZES_FEW, ("c",), PAPER_ALGS),
    ("H2", "torus", ("128x128",), (32, 2 * MIB, 128 * MIB), ("c",), PAPER_ALGS),
    # bucket moves 2.2 million messages a point on 16x16x16 (run with --max-messages 2300000), 4.1 million on 64x64
    ("E6", "torus", ("64x64", "16x16x16"), SIZES_FEW, ("c",), ("bucket",)),
]


def registered() -> list[str]:
    from swing_mpi.schedule import ALGORITHMS

    return [a for a, info in ALGORITHMS.items() if "allreduce" in info.collectives]


def parse_size(text: str) -> int:
    from swing_mpi.units import parse_size as ps  # the project's binary units

    return int(ps(text))


def write_skipped(path: Path, skipped: dict[tuple, int], attempted: set[tuple], limit: int) -> None:
    """Add this run's skipped (network, shape, algorithm) to ``path``, keeping earlier runs' entries.

    An entry this run attempted is dropped (it ran, with a larger --max-messages); a run of some
    stages must not erase what other stages skipped.
    """
    entries: dict[tuple, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line and not line.startswith("#"):
                what, _, count = line.partition(": ")
                entries[tuple(what.split())] = int(count.split()[0])
    entries = {k: m for k, m in entries.items() if k not in attempted} | skipped
    with path.open("w") as f:
        f.write(f"# points not run: more messages per simulation than their run's --max-messages "
                f"(2000000 unless given; the last run's {limit})\n")
        for (network, shape, alg), m in sorted(entries.items()):
            f.write(f"{network} {shape} {alg}: {m} messages\n")


def key_of(rec: dict) -> tuple:
    return (rec["network"], rec["dims"], rec["algorithm"], int(rec["bytes"]), rec["preset"], float(rec["link_bps"]),
            float(rec["latency_s"]), float(rec["hop_s"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default=",".join(s[0] for s in STAGES), help="stages to run, in order")
    ap.add_argument("--algorithms", default="all", help="comma list or all (every registered algorithm)")
    ap.add_argument("--shapes", default=None, help="override the stages' shapes (e.g. 8x8,4x4x4)")
    ap.add_argument("--network", default=None, help="override the stages' network (torus, hyperx, fattree)")
    ap.add_argument("--sizes", default=None, help="override the stages' sizes (e.g. 32,1K,1M)")
    ap.add_argument("--presets", default=None, help="override the stages' alpha presets (c, engine)")
    ap.add_argument("--link", type=float, default=400e9, help="bits/s per link direction (default 400e9)")
    ap.add_argument("--latency", type=float, default=100e-9, help="seconds per link (default 100e-9)")
    ap.add_argument("--hop", type=float, default=300e-9, help="seconds per router hop (default 300e-9)")
    ap.add_argument("--itemsize", type=int, default=4, help="bytes per element (default 4: float32)")
    ap.add_argument("--max-messages", type=int, default=2_000_000, help="skip points moving more messages")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per point")
    ap.add_argument("--out", default=str(OUT / "points.jsonl"), help="JSON lines file (appended)")
    ap.add_argument("--list", action="store_true", help="print the points and their message counts only")
    args = ap.parse_args(argv)

    algs_all = registered() if args.algorithms == "all" else args.algorithms.split(",")
    out = Path(args.out)
    done: set[tuple] = set()
    if out.exists():
        for line in out.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                if "time_s" in rec:
                    done.add(key_of(rec))
    wanted = set(args.stages.split(","))
    points = []
    for stage, network, shapes, sizes, presets, algs in STAGES:
        if stage not in wanted:
            continue
        shapes = tuple(args.shapes.split(",")) if args.shapes else shapes
        sizes = tuple(parse_size(s) for s in args.sizes.split(",")) if args.sizes else sizes
        presets = tuple(args.presets.split(",")) if args.presets else presets
        network = args.network or network
        for shape in shapes:
            for preset in presets:
                for alg in algs_all:
                    if algs is not None and (f"-{alg}" in algs if algs[0].startswith("-") else alg not in algs):
                        continue
                    for n in sizes:
                        points.append((stage, network, shape, alg, n, preset))
    seen: set[tuple] = set()
    skipped: dict[tuple, int] = {}
    msg_cache: dict[tuple, int] = {}
    todo = []
    for pt in points:
        stage, network, shape, alg, n, preset = pt
        dims = parse_dims(shape)
        mk = (alg, dims)
        if mk not in msg_cache:
            try:
                msg_cache[mk] = messages(alg, dims)
            except Exception as e:  # an algorithm that does not run on this shape
                print(f"# {alg} on {shape}: {e}", file=sys.stderr)
                msg_cache[mk] = -1
        m = msg_cache[mk]
        costs = preset_params(preset)
        key = (network, "x".join(map(str, dims)), alg, n, preset, args.link, args.latency, args.hop)
        if key in seen or m < 0:
            continue
        seen.add(key)
        if m > args.max_messages:
            skipped[(network, shape, alg)] = m
            continue
        if key not in done:
            todo.append((pt, dims, m, costs, key))
    if args.list:
        for pt, _, m, *_ in todo:
            print(*pt, m)
        print(f"# {len(todo)} points to run, {len(done)} done, {len(skipped)} (network, shape, algorithm) skipped")
        return 0
    if skipped:
        write_skipped(out.parent / "skipped.txt", skipped, {(pt[1], pt[2], pt[3]) for pt, *_ in todo},
                      args.max_messages)
    out.parent.mkdir(parents=True, exist_ok=True)
    (out.parent / "command.txt").open("a").write(
        f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        + " ".join(shlex.quote(a) for a in ["python", *sys.argv]) + "\n")
    t_start = time.time()
    rev = netsim_revision()
    from swing_mpi.netsim.sgload import simgrid_available

    simgrid = simgrid_available()[1]
    for i, (pt, dims, m, costs, key) in enumerate(todo):
        stage, network, shape, alg, n, preset = pt
        params = {"link_bps": args.link, "latency_s": args.latency, "hop_s": args.hop, "network": network,
                  "itemsize": args.itemsize, **costs}
        r = simulate_point(alg, dims, n, params, timeout=args.timeout)
        rec = {"stage": stage, "preset": preset, "messages_estimate": m, "netsim_rev": rev, "simgrid": simgrid,
               **params, **r,
               "network": network, "dims": key[1], "p": prod(dims), "algorithm": alg, "bytes": n,
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        with out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        el = time.time() - t_start
        status = f"{r['time_s'] * 1e6:.2f} us" if "time_s" in r else r.get("error")
        print(f"[{i + 1}/{len(todo)} {el:.0f}s] {stage} {network} {shape} {alg} {n} {preset}: {status} "
              f"(wall {r.get('wall_s', 0):.1f}s)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
