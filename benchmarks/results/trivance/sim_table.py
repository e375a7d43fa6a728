"""Trivance against Swing in the simulator: one markdown table per shape from sim<shape>/points.jsonl.

    python benchmarks/results/trivance/sim_table.py 27x27 81x81 64x64 16x16x16
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from swing_mpi.units import format_size

HERE = Path(__file__).resolve().parent


def fmt_time(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.2f} µs"


def table(shape: str) -> str:
    t: dict[tuple[str, int], float] = {}
    for line in (HERE / f"sim{shape}" / "points.jsonl").read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            t[(d["algorithm"], int(d["bytes"]))] = float(d["time_s"])
    sizes = sorted({n for _, n in t})
    rows = [f"### {shape}", "",
            "| size | trivance-bw | swing-bw | bw: Swing ÷ Trivance | trivance-lat | swing-lat | "
            "lat: Swing ÷ Trivance | best Swing ÷ best Trivance |",
            "|---|---|---|---|---|---|---|---|"]
    for n in sizes:
        g = {a: t.get((a, n)) for a in ("trivance-bw", "swing-bw", "trivance-lat", "swing-lat")}
        cells = [format_size(n)]
        for pair in (("trivance-bw", "swing-bw"), ("trivance-lat", "swing-lat")):
            tv, sw = g[pair[0]], g[pair[1]]
            cells += [fmt_time(tv) if tv else "—", fmt_time(sw) if sw else "—",
                      f"{sw / tv:.2f}" if tv and sw else "—"]
        tvs = [v for k, v in g.items() if k.startswith("trivance") and v]
        sws = [v for k, v in g.items() if k.startswith("swing") and v]
        cells.append(f"{min(sws) / min(tvs):.2f}" if tvs and sws else "—")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print("\n\n".join(table(s) for s in sys.argv[1:]))
