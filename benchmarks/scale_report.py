"""Tables and plots from benchmarks/scale.py's JSON lines (the numbers docs/scale.md quotes).

    python benchmarks/scale_report.py                       # report.md + goodput-*.png in benchmarks/results/scale

Per (network, shape, preset): each algorithm's goodput against size (plot),
the fastest algorithm per size, Swing's speedup (the faster of swing-bw and
swing-lat) over the fastest algorithm that is not Swing, where bucket passes
Swing, the simulated congestion factor Xi (peak / goodput at the largest size,
preset c, where the per-step costs are negligible) beside the paper's, this
library (preset engine, swing-bw) against what a C MPI runs (recdoub,
rabenseifner or ring with preset c-reduce), and simulation time and memory as
p grows.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "scale"
SWING = ("swing-bw", "swing-lat")
C_MPI = ("recdoub", "rabenseifner", "ring")
PAPER_XI = {2: (1.19, 1.5), 3: (1.03, 1.17), 4: (1.008, 1.07)}  # Swing, torus-optimized Rabenseifner (Table 2)


def color(alg: str) -> str:
    """One colour per algorithm in every plot (registry order, then the name)."""
    from swing_mpi.schedule import ALGORITHMS

    names = list(ALGORITHMS)
    i = names.index(alg) if alg in names else len(names) + sum(map(ord, alg)) % 10
    return f"C{i % 10}"


def size_text(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def time_text(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t >= 1e-3 else f"{t * 1e6:.3g} us"


def model_psi_xi(dims: str, algs: tuple[str, ...]) -> dict[str, float]:
    """Return the closed-form model's Psi x Xi (routed) per algorithm on a torus: T(large n) / T at peak."""
    import subprocess

    cache_file = OUT / "model_psi_xi.json"
    cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    if all(f"{dims} {a}" in cache for a in algs):
        return {a: cache[f"{dims} {a}"] for a in algs}
    cmd = [sys.executable, "-m", "swing_mpi", "model", "--dims", dims, "-a", ",".join(algs), "--alpha", "0",
           "--json"]
    try:
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    out = {}
    for line in text.splitlines():
        d = json.loads(line)
        if "Psi" in d and "Xi_routed" in d:
            out[d["algorithm"]] = d["Psi"] * d["Xi_routed"]
            cache[f"{dims} {d['algorithm']}"] = out[d["algorithm"]]
    cache_file.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    return out


def load(path: Path, rev: str | None) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            if "time_s" in r and (rev is None or r.get("netsim_rev") == rev):
                rows.append(r)
    return rows


def group(rows: list[dict]) -> dict[tuple[str, str, str], dict[str, dict[int, float]]]:
    """(network, dims, preset) -> algorithm -> bytes -> time (the last record of a point wins)."""
    g: dict[tuple[str, str, str], dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        g[(r["network"], r["dims"], r["preset"])][r["algorithm"]][int(r["bytes"])] = float(r["time_s"])
    return g


def plot(key: tuple[str, str, str], algs: dict[str, dict[int, float]], peak: float | None, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for alg, pts in sorted(algs.items()):
        xs = sorted(pts)
        style = "-" if alg.startswith("swing") else "--"
        ax.plot(xs, [x / pts[x] / 1e9 for x in xs], style, marker="o", ms=3, lw=2 if alg == "swing-bw" else 1.2,
                label=alg, color=color(alg))
    if peak:
        ax.axhline(peak / 1e9, color="grey", lw=0.8, ls=":", label="peak (D x link)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("vector size (bytes)")
    ax.set_ylabel("goodput (GB/s)")
    net, dims, preset = key
    ax.set_title(f"{net} {dims}, 400 Gb/s links, preset {preset}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_plot(g: dict, peak: dict, path: Path) -> None:
    """Goodput vs size on the 2D square tori (preset c), one panel each, and ours against a C MPI on 8x8."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = [k for k in (("torus", "8x8", "c"), ("torus", "16x16", "c"), ("torus", "64x64", "c")) if k in g]
    fig, axes = plt.subplots(1, len(shapes) + 1, figsize=(4.2 * (len(shapes) + 1), 3.8))
    for ax, key in zip(axes, shapes):
        for alg, pts in sorted(g[key].items()):
            xs = sorted(pts)
            ax.plot(xs, [x / pts[x] / 1e9 for x in xs], "-" if alg.startswith("swing") else "--", marker="o", ms=2.5,
                    lw=2 if alg == "swing-bw" else 1.1, label=alg, color=color(alg))
        pk = peak.get(key[:2])
        if pk:
            ax.axhline(pk / 1e9, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{key[1]} torus, 400 Gb/s (preset c)", fontsize=9)
        ax.set_xlabel("bytes")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("goodput (GB/s)")
    axes[0].legend(fontsize=6, ncol=2)
    ax = axes[-1]
    for dims in ("8x8", "16x16", "64x64"):
        eng = g.get(("torus", dims, "engine"), {}).get("swing-bw", {})
        c = g.get(("torus", dims, "c-reduce"), {})
        for label, ours in (("engine", eng), ("engine-cgamma", g.get(("torus", dims, "engine-cgamma"), {})
                                                                 .get("swing-bw", {}))):
            xs = [n for n in sorted(ours) if any(n in c.get(a, {}) for a in C_MPI)]
            if xs:
                ax.plot(xs, [min(c[a][n] for a in C_MPI if n in c.get(a, {})) / ours[n] for n in xs],
                        "-" if label == "engine" else "--", marker="o", ms=3, label=f"{dims} {label}")
    ax.axhline(1, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title("C MPI's best time / ours (swing-bw)", fontsize=9)
    ax.set_xlabel("bytes")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def win_row(key: tuple[str, str, str], algs: dict[str, dict[int, float]]) -> str | None:
    """Return one summary row: sizes run, where Swing is fastest, its best margins, where bucket passes it."""
    sizes = sorted(n for n in {n for pts in algs.values() for n in pts} if sum(n in pts for pts in algs.values()) > 1)
    wins, best_other, best_mpi, passes = [], (0.0, 0), (0.0, 0), None
    for n in sizes:
        here = {a: pts[n] for a, pts in algs.items() if n in pts}
        sw = [t for a, t in here.items() if a in SWING]
        other = [t for a, t in here.items() if not a.startswith("swing")]
        if not sw or not other:
            continue
        t = min(sw)
        if t <= min(here.values()):
            wins.append(n)
        best_other = max(best_other, (min(other) / t, n))
        mpi = [here[a] for a in C_MPI if a in here]
        if mpi:
            best_mpi = max(best_mpi, (min(mpi) / t, n))
        if passes is None and "bucket" in here and here["bucket"] < t:
            passes = n
    if not best_other[1]:
        return None
    run = ", ".join(size_text(n) for n in sizes)
    return (f"| {key[0]} {key[1]} | {run} | {', '.join(size_text(n) for n in wins) or 'none'} | "
            f"{best_other[0]:.2f}x at {size_text(best_other[1])} | "
            + (f"{best_mpi[0]:.2f}x at {size_text(best_mpi[1])}" if best_mpi[1] else "-") + " | "
            + (size_text(passes) if passes else ("not run" if not any("bucket" == a for a in algs) else "no size"))
            + " |")


def shape_tables(key: tuple[str, str, str], algs: dict[str, dict[int, float]]) -> list[str]:
    sizes = sorted({n for pts in algs.values() for n in pts})
    lines = [f"### {key[0]} {key[1]}, preset {key[2]}", "",
             "| size | fastest | its time | best Swing | best other | Swing speedup | over MPI's (recdoub, "
             "rabenseifner, "
             "ring) |", "|---|---|---|---|---|---|---|"]
    for n in sizes:
        here = {a: pts[n] for a, pts in algs.items() if n in pts}
        best = min(here, key=here.__getitem__)
        sw = {a: t for a, t in here.items() if a in SWING}
        other = {a: t for a, t in here.items() if not a.startswith("swing")}
        if not sw or not other:
            continue
        s, o = min(sw, key=sw.__getitem__), min(other, key=other.__getitem__)
        mpi = {a: t for a, t in here.items() if a in C_MPI}
        m = min(mpi, key=mpi.__getitem__) if mpi else None
        lines.append(f"| {size_text(n)} | {best} | {time_text(here[best])} | {s} {time_text(sw[s])} | "
                     f"{o} {time_text(other[o])} | {other[o] / sw[s]:.2f}x | "
                     + (f"{m} {mpi[m] / sw[s]:.2f}x |" if m else "- |"))
    b = algs.get("bucket", {})
    passes = [n for n in sizes if n in b and any(n in algs.get(a, {}) for a in SWING)
              and b[n] < min(algs[a][n] for a in SWING if n in algs.get(a, {}))]
    lines += ["", f"bucket faster than the best Swing at: {', '.join(size_text(n) for n in passes) or 'no size'}"
              + ("" if b else " (bucket not run on this shape)"), ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", default=str(OUT / "points.jsonl"))
    ap.add_argument("--rev", default=None, help="only points made by this simulator revision (netsim_rev)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--no-model", action="store_true", help="leave out the closed-form model's Psi x Xi")
    args = ap.parse_args(argv)
    rows = load(Path(args.points), args.rev)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    g = group(rows)
    peak = {(r["network"], r["dims"]): r.get("peak_bytes_per_s") for r in rows}
    md = ["# Simulated evaluation: tables (benchmarks/scale_report.py)", "",
          f"{len(rows)} points from {args.points}; simulator revisions: "
          f"{', '.join(sorted({str(r.get('netsim_rev')) for r in rows}))}", ""]
    # Xi
    md += ["## Time over the time at peak goodput, largest size (preset c): simulated (model's Psi x Xi)", "",
           "Peak: D x link rate. For the all-port algorithms Psi = 1, so this is the congestion factor Xi; "
           "one-port algorithms add Psi = 2D.", "",
           "| network | shape | size | swing-bw | rabenseifner | recdoub-mirrored | bucket "
           "| paper's Xi: Swing / Rabenseifner |", "|---|---|---|---|---|---|---|---|"]
    for (net, dims, preset), algs in sorted(g.items()):
        if preset != "c" or not peak.get((net, dims)):
            continue
        top = max((n for pts in algs.values() for n in pts), default=0)
        if top < 128 << 20:
            continue
        pk = float(peak[(net, dims)])  # type: ignore[arg-type]
        names = ("swing-bw", "rabenseifner", "recdoub-mirrored", "bucket")
        model = model_psi_xi(dims, names) if net == "torus" and not args.no_model else {}
        xs = {a: (f"{pk * algs[a][top] / top:.3f}" + (f" ({model[a]:.3f})" if a in model else ""))
              if top in algs.get(a, {}) else "-" for a in names}

        D = sum(1 for d in dims.split("x") if int(d) > 1)
        paper = PAPER_XI.get(D) if net == "torus" else None
        md.append(f"| {net} | {dims} | {size_text(top)} | {xs['swing-bw']} | {xs['rabenseifner']} | "
                  f"{xs['recdoub-mirrored']} | {xs['bucket']} | {f'{paper[0]} / {paper[1]}' if paper else '-'} |")
    md.append("")
    # engine vs C MPI
    md += ["## This library (swing-bw, engine) against a C MPI (best of recdoub/rabenseifner/ring, c-reduce)", "",
           "engine-cgamma: the engine's per-step cost with the C loop's reduction cost (the same numpy kernel).", "",
           "| network | shape | size | ours: engine | ours: engine-cgamma | C MPI's best: c-reduce | C / engine "
           "| C / engine-cgamma |", "|---|---|---|---|---|---|---|---|"]
    for (net, dims, preset), algs in sorted(g.items()):
        if preset != "engine" or (net, dims, "c-reduce") not in g:
            continue
        c = g[(net, dims, "c-reduce")]
        cg = g.get((net, dims, "engine-cgamma"), {}).get("swing-bw", {})
        for n in sorted(algs.get("swing-bw", {})):
            cs = {a: c[a][n] for a in C_MPI if n in c.get(a, {})}
            if not cs:
                continue
            a = min(cs, key=cs.__getitem__)
            ours = algs["swing-bw"][n]
            ours_cg = cg.get(n)
            md.append(f"| {net} | {dims} | {size_text(n)} | {time_text(ours)} | "
                      f"{time_text(ours_cg) if ours_cg else '-'} | {a} {time_text(cs[a])} | {cs[a] / ours:.2f} | "
                      f"{f'{cs[a] / ours_cg:.2f}' if ours_cg else '-'} |")
    md.append("")
    # scaling
    md += ["## Simulation cost as p grows (swing-bw, 1 MiB, preset c)", "",
           "From cost.jsonl (benchmarks/scale_cost.py: a fresh `swing-mpi simulate` process per point; CPU time "
           "and peak memory of it and its SimGrid child). Wall time on the loaded machine (load average in the "
           "file) is longer than the CPU time.", "",
           "| shape | p | messages | wall (s) | CPU (s) | SimGrid part of the wall (s) | peak memory (MiB) |",
           "|---|---|---|---|---|---|---|"]
    cost = Path(args.points).parent / "cost.jsonl"
    if cost.exists():
        last = {json.loads(x)["shape"]: json.loads(x) for x in cost.read_text().splitlines() if x.strip()}
        for c in sorted(last.values(), key=lambda c: c.get("result", {}).get("p", 0)):
            r = c.get("result", {})
            cpu = c.get("cpu_s")
            md.append(f"| {c['shape']} | {r.get('p', '-')} | {r.get('messages', '-')} | {c['wall_s']:.1f} | "
                      f"{f'{cpu:.1f}' if cpu is not None else '-'} | {r.get('sim_wall_s', '-')} | "
                      f"{c['max_rss_kib_so_far'] / 1024:.0f} |")
    md.append("")
    md += ["## Where Swing wins (preset c)", "",
           "| network, shape | sizes run | Swing fastest at | best margin over any other | over MPI's best "
           "(recdoub, rabenseifner, ring) | bucket first faster at |", "|---|---|---|---|---|---|"]
    for key, algs in sorted(g.items(), key=lambda kv: (kv[0][0], math.prod(map(int, kv[0][1].split("x"))))):
        if key[2] == "c":
            row = win_row(key, algs)
            if row:
                md.append(row)
    md.append("")
    md += ["## Per shape", ""]
    for key, algs in sorted(g.items()):
        md += shape_tables(key, algs)
        if not args.no_plots:
            name = f"goodput-{key[0]}-{key[1]}-{key[2]}.png"
            plot(key, algs, peak.get((key[0], key[1])), out / name)
            md += [f"![{key}]({name})", ""]
    if not args.no_plots:
        summary_plot(g, peak, out / "summary.png")
    (out / "report.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out / 'report.md'} ({len(rows)} points)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
