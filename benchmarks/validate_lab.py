"""The simulator against the emulated torus lab's stored medians (not tuned to them).

    python benchmarks/validate_lab.py                       # table on stdout
    python benchmarks/validate_lab.py --out benchmarks/results/scale/validate-lab-cubic
    python benchmarks/validate_lab.py --alpha-lab ALPHA.json --out DIR

For every algorithm of ours measured in the lab at 1, 4 and 16 MiB on 4x4, 3x4
and 8x8 (by default benchmarks/results/scale/lab-cubic/*/results.csv and
lab-cubic-trivance/*/results.csv, medians in us; --lab-set reads others), simulate the same call with the lab's
parameters: the link rate the sweeps ran at (40 Mbit/s per link direction
by default; --link overrides it), the lab's latency (veth + TCP
between namespaces: a few tens of us, see --latency; at these sizes a step's
bytes take 10-3000 ms, so it does not matter), no router delay, and the
``engine`` preset (this library's measured costs). Prints shape,
algorithm, size, lab median, simulated, ratio, within 15 %?; then the 16-node
ring's Figure 1 ratio (Rabenseifner's recursive-doubling reduce-scatter over
single-port Swing) in the lab and simulated, within 10 %?

With ``--alpha-lab`` each shape's cost per step is the lab's own, measured at
2 KiB in that lab (the scripts and the file: ``git show 0ebc753:benchmarks/results/scale/lab-alpha/``),
instead of the engine's, measured on idle cores: the lab runs up to 64 ranks
on 2 cores, where a step costs what their sharing costs. The 2 KiB runs are
not among the validated points.

The lab reduced float64 sums, so an algorithm whose schedule depends on the op
being exact (``swing-lat``: its float form gathers every contribution and
combines them in rank order) is simulated from its float schedules, read rank
by rank (benchmarks/simrun.py: schedule_messages); the simulator itself builds
the exact form.
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simrun import preset_params, simulate_point  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
MIB = 1 << 20
SIZES = (1 * MIB, 4 * MIB, 16 * MIB)
LAB_SETS = {  # shape -> stored lab sweeps (earlier listed first wins a duplicate point): the lab as it ships
    "4x4": ("scale/lab-cubic/4x4", "scale/lab-cubic/4x4-large", "scale/lab-cubic-trivance/4x4"),
    "3x4": ("scale/lab-cubic/3x4", "scale/lab-cubic-trivance/3x4"),
    "8x8": ("scale/lab-cubic/8x8", "scale/lab-cubic/8x8-large", "scale/lab-cubic-trivance/8x8"),
    "16": ("scale/lab-cubic/16",),
}
RING = ("16", 4 * MIB)  # the 16-node ring: its one size, for the Figure 1 ratio
TOLERANCE = 0.15
RING_TOLERANCE = 0.10
LATENCY_S = 50e-6  # a link of the lab: veth and TCP between namespaces


def build_schedule(alg: str, dims: tuple[int, ...], rank: int, count: int, *, exact: bool) -> Any:
    from swing_mpi.schedule import build_schedule as build

    return build(alg, dims, rank, count, exact=exact)


def uses_exact(alg: str) -> bool:
    from swing_mpi.schedule import ALGORITHMS

    return ALGORITHMS[alg].uses_exact


def lab_params(link_bps: float | None = None, alpha: str = "engine", *, latency_s: float = LATENCY_S,
               hop_s: float = 0.0) -> dict[str, Any]:
    """Return the simulator's parameters (``SimParams`` fields) for the lab: a torus, float64, no router delay."""
    params = {"latency_s": latency_s, "hop_s": hop_s, "network": "torus", "itemsize": 8, **preset_params(alpha)}
    return params if link_bps is None else {**params, "link_bps": link_bps}


def simulate_lab_point(alg: str, dims: tuple[int, ...], nbytes: int, params: dict[str, Any],
                       timeout: float = 600.0) -> dict[str, Any]:
    """Simulate one lab point (:func:`simrun.simulate_point`) as the lab ran it.

    An algorithm whose schedule depends on the op's exactness is simulated from its float form: the lab's
    float64 sums ran that one.
    """
    return simulate_point(alg, dims, nbytes, params, timeout=timeout, exact=False if uses_exact(alg) else None)


def registered() -> list[str]:
    from swing_mpi.schedule import ALGORITHMS

    return [a for a, info in ALGORITHMS.items() if "allreduce" in info.collectives]


def sweep_rate_bps(folder: str) -> float:
    """Return the link rate (bits/s) one stored lab sweep ran at (its results.json); ValueError if not a lab's."""
    env = json.loads((RESULTS / folder / "results.json").read_text())["env"]["sweep"]
    if not env.get("lab"):
        raise ValueError(f"{folder} was not measured in a lab")
    return float(env["rate_mbit"]) * 1e6


def lab_medians(dirs: tuple[str, ...], sizes: tuple[int, ...]) -> dict[tuple[str, int], tuple[float, str, float]]:
    """Return (algorithm, bytes) -> (median seconds, source file, link rate in bits/s) from stored lab sweeps.

    Our algorithms only; the first folder that has a point wins; the rate is that folder's own.
    """
    ours = set(registered())
    out: dict[tuple[str, int], tuple[float, str, float]] = {}
    for d in dirs:
        path = RESULTS / d / "results.csv"
        rate = sweep_rate_bps(d)
        for row in csv.DictReader(path.open()):
            key = (row["label"], int(row["size"]))
            if row["label"] in ours and key[1] in sizes and key not in out and row["time_median_us"]:
                out[key] = (float(row["time_median_us"]) * 1e-6, str(path.relative_to(ROOT)), rate)
    return out


def by_shape(rows: list[dict[str, Any]]) -> str:
    """Return ``"4x4 33 of 33, 3x4 31 of 33, ..."``: each shape's points within the tolerance, in first-seen order."""
    counts: dict[str, list[int]] = {}
    for r in rows:
        if r["ratio"] is not None:
            c = counts.setdefault(r["shape"], [0, 0])
            c[0] += bool(r["within"])
            c[1] += 1
    return ", ".join(f"{shape} {inside} of {n}" for shape, (inside, n) in counts.items())


def main(argv: list[str] | None = None) -> int:
    from swing_mpi.netsim.params import CPU_MODELS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--link", type=float, default=None,
                    help="bits/s per link direction (default: the rate each point's lab sweep ran at)")
    ap.add_argument("--latency", type=float, default=LATENCY_S, help=f"seconds per link (default {LATENCY_S:g})")
    ap.add_argument("--hop", type=float, default=0.0, help="seconds per router hop (default 0)")
    ap.add_argument("--alpha", default="engine", help="c, engine or seconds per step (default engine)")
    ap.add_argument("--cpu", choices=CPU_MODELS, default=None,
                    help="the simulator's CPU model instead of the preset's (engine: rank)")
    ap.add_argument("--alpha-lab", metavar="FILE", default=None,
                    help="per shape, the lab's own cost per step measured at 2 KiB (alpha.json of "
                         "scale/lab-alpha/fit.py at commit 0ebc753): its alpha and CPU model replace --alpha's")
    ap.add_argument("--shapes", default="4x4,3x4,8x8,16", help="shapes (16: the ring's Figure 1 ratio)")
    ap.add_argument("--sizes", default=None, help="only these sizes, e.g. 1M (default 1M,4M,16M)")
    ap.add_argument("--lab-set", action="append", default=[], metavar="SHAPE=DIR[,DIR]",
                    help="stored lab sweeps to read for SHAPE instead of the default ones, folders under "
                         "benchmarks/results (repeatable)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", default=None, help="folder for table.txt, results.csv/json, command.txt")
    args = ap.parse_args(argv)
    params = lab_params(alpha=args.alpha, latency_s=args.latency, hop_s=args.hop)
    if args.cpu:
        params["cpu"] = args.cpu
    shapes = args.shapes.split(",")
    lab_sets = dict(LAB_SETS)
    for spec in args.lab_set:
        shape, _, dirs = spec.partition("=")
        lab_sets[shape] = tuple(dirs.split(","))
    from swing_mpi.units import parse_sizes  # the project's binary units

    sizes = tuple(parse_sizes(args.sizes)) if args.sizes else SIZES
    per_shape = json.loads(Path(args.alpha_lab).read_text()) if args.alpha_lab else {}

    labs = {shape: lab_medians(lab_sets[shape], (RING[1],) if shape == RING[0] else sizes)
            for shape in shapes if shape in lab_sets}
    link = {shape: sorted({args.link or rate for _, _, rate in lab.values()}) for shape, lab in labs.items()}

    def params_of(shape: str, rate: float) -> dict:
        got = per_shape.get(shape)
        base = {**params, "link_bps": args.link or rate}
        return {**base, "alpha_s": got["alpha_s"], "cpu": got["cpu"]} if got else base

    rows: list[dict] = []
    lines = [f"# {' '.join(shlex.quote(a) for a in [sys.executable, *sys.argv])}",
             f"# params: {json.dumps(params)} (alpha preset {args.alpha})",
             "# link rate: " + ", ".join(f"{shape} {' and '.join(f'{r / 1e6:g}' for r in rs)} Mbit/s"
                                         for shape, rs in link.items())
             + ("" if args.link else " (each point at its lab sweep's own)"),
             *(f"# {shape}: alpha {v['alpha_s'] * 1e3:.3f} ms per step, cpu={v['cpu']} (the lab's, {args.alpha_lab})"
               for shape, v in per_shape.items()),
             f"{'shape':>6} {'algorithm':<17} {'size':>7} {'lab (s)':>9} {'sim (s)':>9} {'sim/lab':>8}  within 15% "
             f"steps (lab-sim)/step (ms)"]
    print("\n".join(lines), flush=True)

    def point(shape: str, alg: str, nbytes: int, lab: float, src: str, rate: float) -> dict:
        dims = tuple(int(x) for x in shape.split("x"))
        float_form = uses_exact(alg)
        r = simulate_lab_point(alg, dims, nbytes, params_of(shape, rate), timeout=args.timeout)
        sim = r.get("time_s")
        ratio = sim / lab if sim else None
        ok = ratio is not None and abs(ratio - 1) <= TOLERANCE
        steps = build_schedule(alg, dims, 0, nbytes // 8, exact=False).nsteps
        excess = (lab - sim) / steps if sim else None
        row = {"shape": shape, "algorithm": alg, "bytes": nbytes, "link_bps": args.link or rate, "lab_s": lab,
               "sim_s": sim, "ratio": ratio,
               "within": ok, "float_schedule": float_form, "steps": steps, "lab_minus_sim_per_step_s": excess,
               "lab_source": src, "error": r.get("error"), "wall_s": r.get("wall_s")}
        text = (f"{shape:>6} {alg:<17} {nbytes // MIB:>4}MiB {lab:9.3f} "
                + (f"{sim:9.3f} {ratio:8.3f}  {'yes' if ok else 'NO ':<10} {steps:5d} {excess * 1e3:10.2f}"
                   if sim else f"{'-':>9} {'-':>8}  {r['error']}"))
        lines.append(text)
        print(text, flush=True)
        rows.append(row)
        return row

    missing = []
    for shape in shapes:
        if shape not in lab_sets or shape == RING[0]:  # the ring: its one size, below
            continue
        lab = labs[shape]
        for alg in registered():
            for n in sizes:
                if (alg, n) in lab:
                    point(shape, alg, n, *lab[(alg, n)])
                else:
                    missing.append(f"{shape} {alg} {n // MIB} MiB")
    ring_text = ""
    if RING[0] in shapes:
        lab = labs[RING[0]]
        got = {alg: point(RING[0], alg, RING[1], *lab[(alg, RING[1])]) for alg in registered() if (alg, RING[1]) in lab}
        rd, sw = got.get("rabenseifner"), got.get("swing-bw-1port")
        if rd and sw and rd["sim_s"] and sw["sim_s"] and rd["link_bps"] == sw["link_bps"]:
            lab_ratio, sim_ratio = rd["lab_s"] / sw["lab_s"], rd["sim_s"] / sw["sim_s"]
            ok = abs(sim_ratio / lab_ratio - 1) <= RING_TOLERANCE
            ring_text = (f"16-node ring, 4 MiB, rabenseifner / swing-bw-1port: lab {lab_ratio:.3f}, simulated "
                         f"{sim_ratio:.3f}, sim/lab {sim_ratio / lab_ratio:.3f}: "
                         f"{'within' if ok else 'NOT within'} 10 %")
    done = [r for r in rows if r["ratio"] is not None]
    inside = sum(r["within"] for r in done)
    summary = [f"# {inside} of {len(done)} points within 15 %" + (f"; {len(rows) - len(done)} failed" if
                                                                     len(done) < len(rows) else "")]
    if len({r["shape"] for r in done}) > 1:
        summary.append(f"# by shape: {by_shape(done)}")
    if ring_text:
        summary.append(f"# {ring_text}")
    if missing:
        summary.append("# not measured in the lab (no stored median): " + ", ".join(missing))
    lines += summary
    print("\n".join(summary))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "table.txt").write_text("\n".join(lines) + "\n")
        (out / "command.txt").write_text(" ".join(shlex.quote(a) for a in ["python", *sys.argv]) + "\n")
        (out / "results.json").write_text(json.dumps({"params": params, "link_bps": link, "alpha_preset": args.alpha,
                                                      "alpha_lab": per_shape, "rows": rows,
                                                      "missing": missing, "ring": ring_text}, indent=1) + "\n")
        with (out / "results.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["shape"])
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
