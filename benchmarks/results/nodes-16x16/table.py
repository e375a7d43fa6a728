"""Turn the rows of run.sh (k4.jsonl, k48.jsonl) into this folder's tables; --model writes model-k*.jsonl first.

    python benchmarks/results/nodes-16x16/table.py            # the simulated rows
    python benchmarks/results/nodes-16x16/table.py headline-k # the simulated headline sizes
    python benchmarks/results/nodes-16x16/table.py --model    # the cost model's (swing-mpi model's forms)

Per size: the fastest node-aware form of ours (multi- or single-leader, its algorithm), the fastest flat one
(the torus 16x16xK, its last dimension shared memory), a C MPI's node-aware allreduce (single leader, its best
algorithm among nodes) and the ratios (> 1: ours is faster).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = [1 << e for e in range(5, 30)]
ALGS = ("swing-bw", "swing-lat", "bucket")


def model_rows(k: int) -> list[dict]:
    """Return the cost model's rows (α 1.5 µs, 400 Gb/s, no reduction cost among nodes) in run.sh's form."""
    from swing_mpi.model.node_phases import NodeCosts, model_c_node_aware, model_forms

    nc = NodeCosts.from_engine(k)
    kw = dict(alpha=1.5e-6, link_bytes_per_s=50e9)
    rows = []
    for n in SIZES:
        for a in ALGS:
            f = model_forms(a, (16, 16), n, nc, **kw)
            rows.append({"form": "multi-leader", "algorithm": a, "bytes": n, "time_s": f["multi_leader_s"],
                         "node_s": f["multi_leader_node_s"], "how": "model"})
            rows.append({"form": "single-leader", "algorithm": a, "bytes": n, "time_s": f["single_leader_s"],
                         "node_s": f["single_leader_node_s"], "how": "model"})
            if f["flat_s"] is not None:
                rows.append({"form": "flat", "algorithm": a, "bytes": n, "time_s": f["flat_s"], "node_s": 0.0,
                             "how": "model"})
        c = model_c_node_aware((16, 16), n, nc, **kw)
        rows.append({"form": "c-node-aware", "algorithm": c["c_algorithm"], "bytes": n, "time_s": c["c_node_aware_s"],
                     "node_s": c["c_node_s"], "how": "model"})
    return rows


def fmt_time(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} µs"


def fmt_size(n: int) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            return f"{n // f} {unit}"
    return f"{n} B"


def table(rows: list[dict], k: int) -> str:
    out = [f"| K = {k} ranks per node | node-aware (ours) | flat (ours, 16x16x{k}) | C node-aware | vs flat | vs C |",
           "|---|---|---|---|---|---|"]
    for n in sorted({r["bytes"] for r in rows}):
        here = [r for r in rows if r["bytes"] == n]
        ours = min((r for r in here if r["form"] in ("multi-leader", "single-leader")), key=lambda r: r["time_s"])
        flat = min((r for r in here if r["form"] == "flat"), key=lambda r: r["time_s"], default=None)
        c = next((r for r in here if r["form"] == "c-node-aware"), None)
        cell = (f"{fmt_time(ours['time_s'])} {ours['form'].split('-')[0]} {ours['algorithm']} "
                f"(node {fmt_time(ours['node_s'])})")
        fl = f"{fmt_time(flat['time_s'])} {flat['algorithm']}" if flat else "-"
        cc = f"{fmt_time(c['time_s'])} {c['algorithm']} (node {fmt_time(c['node_s'])})" if c else "-"
        vf = f"{flat['time_s'] / ours['time_s']:.2f}x" if flat else "-"
        vc = f"{c['time_s'] / ours['time_s']:.2f}x" if c else "-"
        out.append(f"| {fmt_size(n)} | {cell} | {fl} | {cc} | {vf} | {vc} |")
    return "\n".join(out)


def main() -> int:
    model = "--model" in sys.argv[1:]
    prefix = next((a for a in sys.argv[1:] if not a.startswith("--")), "model-k" if model else "k")
    for k in (4, 48):
        path = HERE / f"{prefix}{k}.jsonl"
        if model:
            path.write_text("".join(json.dumps(r) + "\n" for r in model_rows(k)))
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        print(table(rows, k))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
