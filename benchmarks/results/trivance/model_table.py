"""Trivance beside Swing in the cost model: the tables of benchmarks/results/trivance/README.md.

Run from the repository root:
``python benchmarks/results/trivance/model_table.py > benchmarks/results/trivance/model.md``.
Everything comes from ``swing_mpi.model.analyze`` on the generated schedules (routed congestion).
"""

from __future__ import annotations

import sys
import time

from swing_mpi.model import analyze

SHAPES = ["64x64", "16x16x16", "8x8x8x8", "64x16", "128x8", "256x4", "9x9", "27x27", "81x81", "3x3x3x3x3x3x3", "27"]
ALGS = ["swing-bw", "trivance-bw", "swing-lat", "trivance-lat", "bucket"]
SLOW_BUCKET = ("81x81", "3x3x3x3x3x3x3")
"""Shapes left without ``bucket`` (minutes each, and not what this table compares)."""
SIZES = [("32 B", 32), ("1 KiB", 1 << 10), ("32 KiB", 32 << 10), ("1 MiB", 1 << 20), ("8 MiB", 8 << 20),
         ("32 MiB", 32 << 20), ("128 MiB", 128 << 20)]
LAB_SHAPES = ["3x3", "4x4", "8x8", "9x9"]
LAB_SIZES = [("4 KiB", 4 << 10), ("16 KiB", 16 << 10),
             ("64 KiB", 64 << 10), ("256 KiB", 256 << 10), ("1 MiB", 1 << 20), ("4 MiB", 4 << 20),
             ("16 MiB", 16 << 20)]


def best(results, names, nbytes, **kw):
    """Return (time, name) of the fastest of ``names`` at ``nbytes``."""
    return min((results[a].time(nbytes, **kw), a) for a in names)


def factors_table() -> None:
    print("## Λ, Ψ, Ξ per shape (routed congestion)\n")
    print("| dims | p | algorithm | steps | Λ | Ψ | Ξ distance | Ξ routed | ceiling (routed) | cover |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for dims in SHAPES:
        for a in ALGS:
            if a == "bucket" and dims in SLOW_BUCKET:
                continue
            t0 = time.time()
            r = analyze(a, dims)
            print(f"| {dims} | {r.p} | {a} | {r.K} | {r.Lambda:.3f} | {r.Psi:.3f} | {r.Xi_distance:.3f} | "
                  f"{r.Xi_routed:.3f} | {100 * r.ceiling('routed'):.1f}% | {r.symmetry} |", flush=True)
            print(f"  {dims} {a}: {time.time() - t0:.1f} s", file=sys.stderr)


def ratio_table(link_gbps: float = 400.0, alpha_us: float = 1.5) -> None:
    kw = dict(alpha=alpha_us * 1e-6, link_bytes_per_s=link_gbps * 1e9 / 8)
    print(f"\n## Trivance against Swing, model time ({link_gbps:g} Gb/s, α = {alpha_us:g} µs)\n")
    print("Each cell: 1 − T(faster Trivance form) / T(faster Swing form), positive where Trivance wins; "
          "the winning Trivance form in brackets (B bandwidth, L latency).\n")
    print("| dims | " + " | ".join(s for s, _ in SIZES) + " |")
    print("|---|" + "---|" * len(SIZES))
    for dims in SHAPES:
        res = {a: analyze(a, dims) for a in ALGS if a != "bucket"}
        cells = []
        for _, n in SIZES:
            tt, ta = best(res, ["trivance-bw", "trivance-lat"], n, **kw)
            ts, _ = best(res, ["swing-bw", "swing-lat"], n, **kw)
            cells.append(f"{100 * (1 - tt / ts):+.1f}% ({'B' if ta.endswith('bw') else 'L'})")
        print(f"| {dims} | " + " | ".join(cells) + " |", flush=True)


def lab_table(alpha_ms: float) -> None:
    kw = dict(alpha=alpha_ms * 1e-3, link_bytes_per_s=40e6 / 8)
    print(f"\n## The lab's shapes at 40 Mbit/s, α = {alpha_ms:g} ms: predicted margin of Trivance over Swing\n")
    print("Each cell: model seconds of the faster Trivance form / the faster Swing form / bucket (B bandwidth, "
          "L latency form), then 1 − T(Trivance)/T(Swing), positive where Trivance wins.\n")
    print("| dims | " + " | ".join(s for s, _ in LAB_SIZES) + " |")
    print("|---|" + "---|" * len(LAB_SIZES))
    for dims in LAB_SHAPES:
        res = {a: analyze(a, dims) for a in ALGS}
        cells = []
        for _, n in LAB_SIZES:
            tt, ta = best(res, ["trivance-bw", "trivance-lat"], n, **kw)
            ts, sa = best(res, ["swing-bw", "swing-lat"], n, **kw)
            b = res["bucket"].time(n, **kw)
            tf, sf = ("B" if a.endswith("bw") else "L" for a in (ta, sa))
            cells.append(f"{tt:.4f} {tf} / {ts:.4f} {sf} / {b:.4f}: {100 * (1 - tt / ts):+.1f}%")
        print(f"| {dims} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    factors_table()
    ratio_table()
    ratio_table(alpha_us=1.5, link_gbps=100)
    lab_table(0.0)
    lab_table(1.0)
