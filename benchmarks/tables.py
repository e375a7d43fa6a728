#!/usr/bin/env python3
"""The tables and point files of benchmarks/results that no other tool writes: one subcommand each.

    python benchmarks/tables.py auto FILE.json ...             # auto / the fastest candidate (swing-mpi bench --json)
    python benchmarks/tables.py auto --fastest FILE.json       # SIZE ALGORITHM of the fastest non-auto row per size
    python benchmarks/tables.py halves DIR                     # time / MPICH's time per collective and algorithm
    python benchmarks/tables.py odd-sides [--two-sided] [D ...]  # the odd-ring program search
    python benchmarks/tables.py steps ALGORITHM DIMS           # simulated time per step beside the model's (SimGrid)
    python benchmarks/tables.py sizes [--below]                # scaled against exact sizes (SimGrid, JSON lines)
    python benchmarks/tables.py trivance-model                 # Trivance beside Swing in the cost model (markdown)
    python benchmarks/tables.py trivance-sim SHAPE ...         # Trivance beside Swing in the simulator (markdown)

Which folder's files each writes, and the exact command, is in that folder's README.md.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swing_mpi.model import analyze

RESULTS = Path(__file__).resolve().parent / "results"

# ---------------------------------------------------------------------------------------------------------------
# auto: auto against the fastest candidate, from `swing-mpi bench --json` files (benchmarks/results/auto)


def auto_fastest(rows: Sequence[dict[str, Any]]) -> list[tuple[int, str]]:
    """``(size, algorithm)`` of the fastest non-``auto`` row per size (medians)."""
    out = []
    for size in sorted({r["size"] for r in rows}):
        here = [r for r in rows if r["size"] == size and r["algorithm"] != "auto"]
        out.append((size, min(here, key=lambda r: r["time_median_us"])["algorithm"]))
    return out


def _compare(here: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """Return (auto row, fastest other row, the same algorithm's row or None) of one launch's rows at one size."""
    auto = next(r for r in here if r["algorithm"] == "auto")
    others = [r for r in here if r["algorithm"] != "auto"]
    best = min(others, key=lambda r: r["time_median_us"])
    same = next((r for r in others if r["algorithm"] == auto["resolved"]), None)
    return auto, best, same


def auto_summary(launches: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> str:
    """Auto / the fastest candidate per size, from ``(path, rows)`` of one or more launches.

    The noise column, auto / the same algorithm run by name in the same rounds, is the run's noise: both
    rows run the same code, so anything but 1.00 there is the machine, not the choice.

    Several files with the same size (the head-to-head launches: each its own mpiexec) are launches of one
    comparison: one ratio per launch (auto's median / the fastest row's median of that launch), and their
    median. Where the allocator and the scheduler put a launch's processes moves a 1 MiB call on shared
    memory by ±20 % from one launch to the next, more than the iterations of one launch can average out.
    """
    names = " ".join(path for path, _ in launches)
    rows = [r for _, rs in launches for r in rs]
    sizes = sorted({r["size"] for r in rows})
    per_size = {size: [h for h in ([r for r in rs if r["size"] == size] for _, rs in launches) if h] for size in sizes}
    out = []
    if all(len(hs) == 1 for hs in per_size.values()):
        out.append(f"# {names}: auto / fastest candidate (MPI_Allreduce or any registered algorithm), medians")
        out.append(f"| {'size':>9} | {'auto runs':<16} | {'auto us':>10} | {'fastest':<16} | {'fastest us':>10} "
                   f"| auto/fastest | auto/same algorithm (noise) | iters |")
        out.append("|----------:|------------------|-----------:|------------------|-----------:|-------------:|"
                   "----------------------------:|------:|")
        for size, (here,) in per_size.items():
            auto, best, same = _compare(here)
            noise = f"{auto['time_median_us'] / same['time_median_us']:.2f}" if same else "-"
            out.append(f"| {size:>9} | {auto['resolved']:<16} | {auto['time_median_us']:>10.1f} | "
                       f"{best['algorithm']:<16} | {best['time_median_us']:>10.1f} | "
                       f"{auto['time_median_us'] / best['time_median_us']:>12.2f} | {noise:>27} | "
                       f"{auto.get('iters', '-'):>5} |")
        return "\n".join(out)
    out.append(f"# {names}: auto / fastest candidate (MPI_Allreduce or any registered algorithm); "
               "one ratio of medians per launch (mpiexec), and their median")
    out.append(f"| {'size':>9} | {'auto runs':<16} | {'fastest':<16} | {'auto / fastest, each launch':<30} "
               f"| {'median':>6} | iters |")
    out.append("|----------:|------------------|------------------|--------------------------------|-------:|------:|")
    for size, hs in per_size.items():
        pairs = [_compare(here) for here in hs]
        ratios = [a["time_median_us"] / b["time_median_us"] for a, b, _ in pairs]
        runs = "/".join(sorted({a["resolved"] for a, _, _ in pairs}))
        fastest = "/".join(sorted({b["algorithm"] for _, b, _ in pairs}))
        each = " ".join(f"{x:.2f}" for x in ratios)
        out.append(f"| {size:>9} | {runs:<16} | {fastest:<16} | {each:<30} | {statistics.median(ratios):>6.2f} "
                   f"| {pairs[0][0].get('iters', '-'):>5} |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------
# halves: the halves against MPICH's (benchmarks/results/shm-halves)


def halves_table(files: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> str:
    """Time / MPICH's time per collective and algorithm from ``(file name, rows)`` (``pair-*`` and ``all-*``)."""
    pairs: dict[tuple[str, str], list[float]] = {}
    alls: dict[tuple[str, str], list[float]] = {}
    for name, rows in files:
        native = next(r for r in rows if r["algorithm"] == "native")["time_median_us"]
        into = pairs if os.path.basename(name).startswith("pair-") else alls
        for r in rows:
            if r["algorithm"] != "native":
                alg = r["algorithm"] if r["algorithm"] != "auto" else f"auto ({r['resolved']})"
                into.setdefault((r["collective"], alg), []).append(r["time_median_us"] / native)

    def fmt(xs: list[float]) -> str:
        return " ".join(f"{x:.2f}" for x in xs) or "-"

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f}" if xs else "-"

    out = ["# time / MPICH's time (medians of 30 calls; each run's ratio, then their median), p = 4, 16 MiB float64",
           f"| {'collective':<20} | {'algorithm':<26} | {'pairs: runs':<22} | pairs | {'all: runs':<22} | all |",
           f"|{'-' * 22}|{'-' * 28}|{'-' * 24}|------:|{'-' * 24}|----:|"]
    for key in sorted(set(pairs) | set(alls)):
        p, a = pairs.get(key, []), alls.get(key, [])
        out.append(f"| {key[0]:<20} | {key[1]:<26} | {fmt(p):<22} | {med(p):>5} | {fmt(a):<22} | {med(a):>3} |")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------
# odd-sides: is there a better odd-ring program than the circulant? An exhaustive search (benchmarks/results/model)
#
# The programs in question: translation-invariant reduce-scatters on a ring of ``d`` in ``L = ⌈log2 d⌉`` steps,
# every node sending to the node ``s_t`` ahead at step ``t`` (``s_t`` signed, ``|s_t| ≤ d/2``). The partial of
# the block ``j`` places ahead travels along the steps of a set ``T(j)``, smallest step first, so the sets form a
# *family* closed under dropping their smallest step, with ``Σ_{t∈T(j)} s_t ≡ j (mod d)``: ``d`` sets, distinct
# residues. A node sends the blocks whose set starts with ``t`` at step ``t``, over ``hops(s_t)`` links, so a ring
# link carries ``Σ_{T ≠ ∅} hops(s_{min T})`` blocks in all (the *block-hops*; a ring reduce-scatter's minimum is
# ``d − 1``, in ``d − 1`` steps). The search tries every skip sequence (``s_0 = ±1``) and every closed family of
# ``d`` sets, and prints the fewest block-hops found next to the circulant's
# (:func:`swing_mpi.schedule.rings.circulant_program`: skips ``1, 2, 4, …`` and ``d − 2^{L−1}``). ``--two-sided``:
# programs with two peers per step, ``c ± s_t`` (:func:`best_two_sided`).


def closed_families(L: int) -> list[list[int]]:
    """Every family of subsets of ``range(L)`` (bitmasks) holding ``∅`` and closed under dropping the minimum."""

    def subtrees(s: int) -> list[list[int]]:
        low = (s & -s).bit_length() - 1 if s else L  # a child adds a step below the set's smallest
        out = [[s]]
        for t in range(low):
            grown = []
            below = subtrees(s | 1 << t)
            for base in out:
                grown.append(base)
                grown.extend(base + sub for sub in below)
            out = grown
        return out

    return subtrees(0)


def hops(s: int, d: int) -> int:
    """Links a message ``s`` places ahead crosses on a ring of ``d`` (the shorter way)."""
    s %= d
    return min(s, d - s)


def best_program(d: int) -> tuple[int, tuple[int, ...], list[int]]:
    """Return ``(block-hops, skips, family)`` of the cheapest program (ties: the first found)."""
    L = (d - 1).bit_length()
    families = [f for f in closed_families(L) if len(f) == d]
    first = [(s & -s).bit_length() - 1 for s in range(1 << L)]
    skip_range = [x for x in range(-(d // 2), d // 2 + 1) if x]
    best: tuple[int, tuple[int, ...], list[int]] | None = None
    for rest in itertools.product(skip_range, repeat=L - 1):
        for s0 in (1, -1):
            skips = (s0, *rest)
            residue = [sum(skips[t] for t in range(L) if s >> t & 1) % d for s in range(1 << L)]
            cost = [hops(skips[first[s]], d) if s else 0 for s in range(1 << L)]
            for fam in families:
                if len({residue[s] for s in fam}) != d:
                    continue
                c = sum(cost[s] for s in fam)
                if best is None or c < best[0]:
                    best = (c, skips, fam)
    assert best is not None
    return best


def circulant_hops(d: int) -> int:
    """Block-hops of the circulant program (every node sends each block once, at its set's first step)."""
    L = (d - 1).bit_length()
    r = d - (1 << (L - 1))
    skips = [1 << t for t in range(L - 1)] + [r]
    total = 0
    for j in range(1, d):  # block j places ahead: binary digits of j below r, else the last step first
        if j >= r:
            steps = [t for t in range(L - 1) if (j - r) >> t & 1] + [L - 1]
        else:
            steps = [t for t in range(L - 1) if j >> t & 1]
        total += hops(skips[min(steps)], d)
    return total


def best_two_sided(d: int) -> tuple[int, tuple[int, ...], list[int]]:
    """Return ``(block-hops per port, skips, family)`` of the cheapest two-sided program of ``d``.

    Two-sided: with ``h = (d−1)/2``, step ``t`` sends to ``c + s_t`` and ``c − s_t``
    (``1 ≤ s_t ≤ h``), the blocks ``1 … h`` places ahead forward and as many behind
    backward, each along a set of a family closed under dropping its smallest
    step whose skips add up to the offset exactly (no wrap-around), in
    ``⌈log2(h+1)⌉`` steps. A port carries a lane's and its mirror's moves:
    twice ``Σ s_{min T}``. The two-sided circulant
    (:func:`swing_mpi.schedule.rings.twosided_program`) is one of them.
    """
    h = (d - 1) // 2
    L = h.bit_length()
    families = [f for f in closed_families(L) if len(f) == h + 1]
    first = [(s & -s).bit_length() - 1 for s in range(1 << L)]
    best: tuple[int, tuple[int, ...], list[int]] | None = None
    for skips in itertools.product(range(1, h + 1), repeat=L):
        total = [sum(skips[t] for t in range(L) if s >> t & 1) for s in range(1 << L)]
        for fam in families:
            if sorted(total[s] for s in fam) != list(range(h + 1)):
                continue
            c = 2 * sum(skips[first[s]] for s in fam if s)
            if best is None or c < best[0]:
                best = (c, skips, fam)
    assert best is not None
    return best


def two_sided_circulant_hops(d: int) -> int:
    """Return the two-sided circulant's block-hops per port (a lane and its mirror).

    Twice the circulant's on a ring of ``(d+1)/2``: its skips are all shorter
    than half that ring, so its paths never wrap and count the same unwrapped.
    """
    return 2 * circulant_hops((d - 1) // 2 + 1)


def family_text(fam: list[int]) -> str:
    """Write a family of step sets (bit masks) as ``{0,1} {1} …``."""
    return " ".join("{" + ",".join(str(t) for t in range(8) if s >> t & 1) + "}" for s in sorted(fam))


def odd_sides_table(sides: Sequence[int], two_sided: bool = False) -> str:
    """Return the search's table for these odd sides."""
    for d in sides:
        if d < 3 or d % 2 == 0:
            raise ValueError(f"{d}: expected an odd side of at least 3")
    if two_sided:
        out = [f"{'d':>3} {'steps':>5} {'two-way':>7} {'circulant':>9} {'two-sided circ.':>15} {'best found':>10}"
               "  skips, family   (block-hops per port, a lane and its mirror)"]
        for d in sides:
            c, skips, fam = best_two_sided(d)
            out.append(f"{d:>3} {((d - 1) // 2).bit_length():>5} {d - 1:>7} {circulant_hops(d):>9} "
                       f"{two_sided_circulant_hops(d):>15} {c:>10}  {skips}, {family_text(fam)}")
        return "\n".join(out)
    out = [f"{'d':>3} {'steps':>5} {'ring minimum':>12} {'circulant':>9} {'best found':>10}  skips, family"]
    for d in sides:
        c, skips, fam = best_program(d)
        out.append(f"{d:>3} {(d - 1).bit_length():>5} {d - 1:>12} {circulant_hops(d):>9} {c:>10}  "
                   f"{skips}, {family_text(fam)}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------
# steps: the simulator's time per global step beside the model's (benchmarks/results/scale/steps-*.txt)


def steps_vs_model(alg: str, dims_text: str) -> str:
    """One algorithm on one shape at 512 MiB, α 0: the simulator's time per global step beside the model's.

    The model prices step k as the busiest link's bytes of step k with every lane in lockstep; the
    simulator lets each lane (and rank) go on as soon as its own step is done, as the executor does.
    A simulated step here is the time from the end of step k-1 on every lane to the end of step k on
    every lane.
    """
    from swing_mpi.netsim import SimParams, simulate
    from swing_mpi.topology import parse_dims

    dims = parse_dims(dims_text)
    n = 512 << 20
    p = SimParams(alpha_s=0.0)
    a = analyze(alg, dims)
    r = simulate(alg, dims, n, params=p)
    bw = p.link_bytes_per_s
    model = a.time(n, alpha=0.0, link_bytes_per_s=bw)
    out = [f"# {alg} on {dims_text}, 512 MiB, 400 Gb/s, alpha 0: simulated {r.time_s * 1e3:.3f} ms, "
           f"model {model * 1e3:.3f} ms, sim/model {r.time_s / model:.4f}",
           f"{'step':>4} {'phase':<15} {'hops':>4} {'model (ms)':>10} {'sim (ms)':>9} {'sim/model':>9}"]
    for i, k in enumerate(r.steps):
        st = a.steps[k]
        m = st.link * n / bw
        out.append(f"{k:4d} {r.phases[i]:<15} {st.hops:4d} {m * 1e3:10.3f} {r.step_times[i] * 1e3:9.3f} "
                   f"{r.step_times[i] / m:9.3f}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------
# sizes: scaled against exact message sizes, each point simulated both ways (benchmarks/results/scale/sizes)

KIB, MIB = 1 << 10, 1 << 20
SIZES_SHAPES = {"8x8": (8 * KIB, 32 * KIB, 128 * KIB), "16x16": (32 * KIB, 128 * KIB, 512 * KIB),
                "4x4x4": (32 * KIB, 128 * KIB, 512 * KIB), "32x32": (128 * KIB, 2 * MIB), "8x8x8": (128 * KIB, 2 * MIB)}
"""Counts at and above the build count, where ``message_sizes="auto"`` builds the count's own schedules."""
SIZES_BELOW = {"8x8": (32, 512, 1000), "16x16": (32, 2 * KIB, 10000), "4x4x4": (32, 2 * KIB, 10000),
               "32x32": (32, 8 * KIB, 100000), "8x8x8": (32, 32 * KIB, 100000)}
"""Counts under the build count (blocks of under an element on average), and counts not a power of two."""
SIZES_ALGORITHMS = ("swing-bw", "swing-bw-1port", "rabenseifner", "recdoub-mirrored", "bucket", "trivance-bw")


def sizes_points(below: bool = False) -> None:
    """Print one JSON line per point: its time with ``exact`` and with ``scaled`` message sizes, and their ratio.

    ``exact``: every rank's schedule built for the count itself (uneven blocks as the executor sends
    them); ``scaled``: the build count's schedules (``p·lcm(1…2D)`` elements, every block whole), sizes
    scaled to the count. The paper's network and preset ``c`` (``SimParams()``).
    """
    from swing_mpi.model.routing import default_count
    from swing_mpi.netsim import SimParams
    from swing_mpi.netsim.run import simulate
    from swing_mpi.topology import parse_dims

    for dims, sizes in (SIZES_BELOW if below else SIZES_SHAPES).items():
        c0 = default_count(parse_dims(dims))
        for n in sizes:
            for alg in SIZES_ALGORITHMS:
                rec: dict[str, Any] = {"dims": dims, "algorithm": alg, "bytes": n,
                                       "count_over_build": round(n / 4 / c0, 3)}
                for mode in ("exact", "scaled"):
                    t = time.perf_counter()
                    try:
                        r = simulate(alg, dims, n, params=SimParams(), message_sizes=mode)
                    except ValueError as e:
                        rec[mode] = str(e)[:80]
                        continue
                    rec[f"{mode}_s"] = r.time_s
                    rec[f"{mode}_wall_s"] = round(time.perf_counter() - t, 2)
                if "exact_s" in rec and "scaled_s" in rec:
                    rec["scaled_over_exact"] = rec["scaled_s"] / rec["exact_s"]
                print(json.dumps(rec), flush=True)
                print(f"{dims} {alg} {n}: {rec.get('scaled_over_exact')}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# trivance-model: Trivance beside Swing in the cost model (benchmarks/results/trivance/model.md); everything comes
# from swing_mpi.model.analyze on the generated schedules (routed congestion)

TRIVANCE_SHAPES = ["64x64", "16x16x16", "8x8x8x8", "64x16", "128x8", "256x4", "9x9", "27x27", "81x81",
                   "3x3x3x3x3x3x3", "27"]
TRIVANCE_ALGS = ["swing-bw", "trivance-bw", "swing-lat", "trivance-lat", "bucket"]
SLOW_BUCKET = ("81x81", "3x3x3x3x3x3x3")
"""Shapes left without ``bucket`` (minutes each, and not what this table compares)."""
TRIVANCE_SIZES = [("32 B", 32), ("1 KiB", 1 << 10), ("32 KiB", 32 << 10), ("1 MiB", 1 << 20), ("8 MiB", 8 << 20),
         ("32 MiB", 32 << 20), ("128 MiB", 128 << 20)]
TRIVANCE_LAB_SHAPES = ["3x3", "4x4", "8x8", "9x9"]
TRIVANCE_LAB_SIZES = [("4 KiB", 4 << 10), ("16 KiB", 16 << 10),
             ("64 KiB", 64 << 10), ("256 KiB", 256 << 10), ("1 MiB", 1 << 20), ("4 MiB", 4 << 20),
             ("16 MiB", 16 << 20)]


def _best(results: dict[str, Any], names: list[str], nbytes: int, **kw: float) -> tuple[float, str]:
    """Return (time, name) of the fastest of ``names`` at ``nbytes``."""
    return min((results[a].time(nbytes, **kw), a) for a in names)


def trivance_factors_table() -> None:
    print("## Λ, Ψ, Ξ per shape (routed congestion)\n")
    print("| dims | p | algorithm | steps | Λ | Ψ | Ξ distance | Ξ routed | ceiling (routed) | cover |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for dims in TRIVANCE_SHAPES:
        for a in TRIVANCE_ALGS:
            if a == "bucket" and dims in SLOW_BUCKET:
                continue
            t0 = time.time()
            r = analyze(a, dims)
            print(f"| {dims} | {r.p} | {a} | {r.K} | {r.Lambda:.3f} | {r.Psi:.3f} | {r.Xi_distance:.3f} | "
                  f"{r.Xi_routed:.3f} | {100 * r.ceiling('routed'):.1f}% | {r.symmetry} |", flush=True)
            print(f"  {dims} {a}: {time.time() - t0:.1f} s", file=sys.stderr)


def trivance_ratio_table(link_gbps: float = 400.0, alpha_us: float = 1.5) -> None:
    kw = dict(alpha=alpha_us * 1e-6, link_bytes_per_s=link_gbps * 1e9 / 8)
    print(f"\n## Trivance against Swing, model time ({link_gbps:g} Gb/s, α = {alpha_us:g} µs)\n")
    print("Each cell: 1 − T(faster Trivance form) / T(faster Swing form), positive where Trivance wins; "
          "the winning Trivance form in brackets (B bandwidth, L latency).\n")
    print("| dims | " + " | ".join(s for s, _ in TRIVANCE_SIZES) + " |")
    print("|---|" + "---|" * len(TRIVANCE_SIZES))
    for dims in TRIVANCE_SHAPES:
        res = {a: analyze(a, dims) for a in TRIVANCE_ALGS if a != "bucket"}
        cells = []
        for _, n in TRIVANCE_SIZES:
            tt, ta = _best(res, ["trivance-bw", "trivance-lat"], n, **kw)
            ts, _ = _best(res, ["swing-bw", "swing-lat"], n, **kw)
            cells.append(f"{100 * (1 - tt / ts):+.1f}% ({'B' if ta.endswith('bw') else 'L'})")
        print(f"| {dims} | " + " | ".join(cells) + " |", flush=True)


def trivance_lab_table(alpha_ms: float) -> None:
    kw = dict(alpha=alpha_ms * 1e-3, link_bytes_per_s=40e6 / 8)
    print(f"\n## The lab's shapes at 40 Mbit/s, α = {alpha_ms:g} ms: predicted margin of Trivance over Swing\n")
    print("Each cell: model seconds of the faster Trivance form / the faster Swing form / bucket (B bandwidth, "
          "L latency form), then 1 − T(Trivance)/T(Swing), positive where Trivance wins.\n")
    print("| dims | " + " | ".join(s for s, _ in TRIVANCE_LAB_SIZES) + " |")
    print("|---|" + "---|" * len(TRIVANCE_LAB_SIZES))
    for dims in TRIVANCE_LAB_SHAPES:
        res = {a: analyze(a, dims) for a in TRIVANCE_ALGS}
        cells = []
        for _, n in TRIVANCE_LAB_SIZES:
            tt, ta = _best(res, ["trivance-bw", "trivance-lat"], n, **kw)
            ts, sa = _best(res, ["swing-bw", "swing-lat"], n, **kw)
            b = res["bucket"].time(n, **kw)
            tf, sf = ("B" if a.endswith("bw") else "L" for a in (ta, sa))
            cells.append(f"{tt:.4f} {tf} / {ts:.4f} {sf} / {b:.4f}: {100 * (1 - tt / ts):+.1f}%")
        print(f"| {dims} | " + " | ".join(cells) + " |", flush=True)


def trivance_model() -> None:
    """Print benchmarks/results/trivance/model.md (about 25 minutes on 2 shared cores)."""
    trivance_factors_table()
    trivance_ratio_table()
    trivance_ratio_table(alpha_us=1.5, link_gbps=100)
    trivance_lab_table(0.0)
    trivance_lab_table(1.0)


# ---------------------------------------------------------------------------------------------------------------
# trivance-sim: Trivance against Swing in the simulator, from benchmarks/results/trivance/sim<shape>/points.jsonl


def _fmt_time(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.2f} µs"


def trivance_sim_table(shape: str, points: str) -> str:
    """Return one shape's markdown table from ``swing-mpi simulate --json`` lines (algorithm, bytes, time_s)."""
    from swing_mpi.units import format_size

    t: dict[tuple[str, int], float] = {}
    for line in points.splitlines():
        if line.strip():
            d = json.loads(line)
            t[(d["algorithm"], int(d["bytes"]))] = float(d["time_s"])
    rows = [f"### {shape}", "",
            "| size | trivance-bw | swing-bw | bw: Swing ÷ Trivance | trivance-lat | swing-lat | "
            "lat: Swing ÷ Trivance | best Swing ÷ best Trivance |",
            "|---|---|---|---|---|---|---|---|"]
    for n in sorted({n for _, n in t}):
        g = {a: t.get((a, n)) for a in ("trivance-bw", "swing-bw", "trivance-lat", "swing-lat")}
        cells = [format_size(n)]
        for tva, swa in (("trivance-bw", "swing-bw"), ("trivance-lat", "swing-lat")):
            tv, sw = g[tva], g[swa]
            cells += [_fmt_time(tv) if tv else "—", _fmt_time(sw) if sw else "—",
                      f"{sw / tv:.2f}" if tv and sw else "—"]
        tvs = [v for k, v in g.items() if k.startswith("trivance") and v]
        sws = [v for k, v in g.items() if k.startswith("swing") and v]
        cells.append(f"{min(sws) / min(tvs):.2f}" if tvs and sws else "—")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------------------------


def _rows(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)["rows"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="table", required=True)
    a = sub.add_parser("auto", help="auto / the fastest candidate per size from swing-mpi bench --json files")
    a.add_argument("files", nargs="+")
    a.add_argument("--fastest", action="store_true", help="print SIZE ALGORITHM of the fastest non-auto row per size")
    h = sub.add_parser("halves", help="time / MPICH's time per collective and algorithm (a folder of JSON files)")
    h.add_argument("folder")
    o = sub.add_parser("odd-sides", help="the odd-ring program search")
    o.add_argument("sides", nargs="*", type=int)
    o.add_argument("--two-sided", action="store_true", help="programs with two peers per step")
    s = sub.add_parser("steps", help="simulated time per step beside the model's, 512 MiB, alpha 0 (SimGrid)")
    s.add_argument("algorithm")
    s.add_argument("dims")
    z = sub.add_parser("sizes", help="scaled against exact message sizes, JSON lines (SimGrid)")
    z.add_argument("--below", action="store_true", help="counts under the build count and not powers of two")
    sub.add_parser("trivance-model", help="Trivance beside Swing in the cost model (markdown)")
    t = sub.add_parser("trivance-sim", help="Trivance beside Swing in the simulator (markdown)")
    t.add_argument("shapes", nargs="+", help="shapes whose benchmarks/results/trivance/sim<shape>/points.jsonl to read")
    args = ap.parse_args(argv)
    if args.table == "auto":
        rows = [(p, _rows(p)) for p in args.files]
        if args.fastest:
            for size, alg in auto_fastest([r for _, rs in rows for r in rs]):
                print(size, alg)
        else:
            print(auto_summary(rows))
    elif args.table == "halves":
        print(halves_table([(p, _rows(p)) for p in sorted(glob.glob(os.path.join(args.folder, "*.json")))]))
    elif args.table == "odd-sides":
        default = [7, 9, 11, 13, 15, 17, 19] if args.two_sided else [3, 5, 7, 9, 11, 13, 15]
        try:
            print(odd_sides_table(args.sides or default, args.two_sided))
        except ValueError as e:
            ap.error(str(e))
    elif args.table == "steps":
        print(steps_vs_model(args.algorithm, args.dims))
    elif args.table == "sizes":
        sizes_points(args.below)
    elif args.table == "trivance-model":
        trivance_model()
    else:
        print("\n\n".join(trivance_sim_table(shape, (RESULTS / "trivance" / f"sim{shape}" / "points.jsonl").read_text())
                          for shape in args.shapes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
