"""The table of run.sh's simulations: ours (best of swing-bw, swing-lat) against C's best, as Markdown and table.csv.

    python benchmarks/results/engine/sim/table.py [DIR]

DIR: a folder of CSV files from ``swing-mpi simulate --csv`` named ``<run>.csv`` (run.sh's), merged into
points.csv first (a run's earlier rows replaced). The table is printed and written to table.csv.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORES = (1, 4, 16)


POINTS = HERE / "points.csv"


def _load() -> list[dict[str, str]]:
    if not POINTS.exists():
        return []
    with open(POINTS, newline="") as f:
        return list(csv.DictReader(f))


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def collect(folder: Path) -> None:
    """Merge ``folder/<run>.csv`` into points.csv, each row tagged with its run."""
    new: list[dict[str, object]] = []
    runs = set()
    for path in sorted(folder.glob("*.csv")):
        runs.add(path.stem)
        with open(path, newline="") as f:
            new += [{"run": path.stem, **r} for r in csv.DictReader(f)]
    kept: list[dict[str, object]] = [dict(r) for r in _load() if r["run"] not in runs]
    _write(POINTS, kept + new)


def _read(name: str, points: list[dict[str, str]]) -> dict[int, list[dict[str, str]]]:
    rows: dict[int, list[dict[str, str]]] = {}
    for r in points:
        if r["run"] == name:
            rows.setdefault(int(r["bytes"]), []).append(r)
    return rows


def _best(rows: list[dict[str, str]]) -> tuple[str, float]:
    r = min(rows, key=lambda r: float(r["time_s"]))
    return r["algorithm"], float(r["time_s"])


def _size(n: int) -> str:
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= s and n % s == 0:
            return f"{n // s} {unit}"
    return f"{n} B"


def _time(t: float) -> str:
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} us"


def main(argv: list[str]) -> int:
    """Collect, write table.csv, print the Markdown table."""
    if argv:
        collect(Path(argv[0]))
    points = _load()
    out_rows: list[dict[str, object]] = []
    md = ["| shape | size | C's best (1.5 us a step, C's reduction) | ours, 1 core | ours, 4 cores | ours, 16 cores "
          "| ours over C, 1 core | 4 cores | 16 cores |", "|---|---|---|---|---|---|---|---|---|"]
    for dims in ("8x8", "64x64"):
        c = _read(f"c-{dims}", points)
        ours = {k: _read(f"engine-{dims}-cores{k}", points) for k in CORES}
        for n in sorted(c):
            ca, ct = _best(c[n])
            cells, ratios = [], []
            row: dict[str, object] = {"dims": dims, "bytes": n, "c_algorithm": ca, "c_time_s": ct}
            for k in CORES:
                got = ours[k].get(n)
                same = False
                if got is None and n < 256 << 10 and ours[1].get(n):  # see run.sh: the same model as 1 core
                    got, same = ours[1][n], True
                if got is None:
                    cells.append("-")
                    ratios.append("-")
                    continue
                a, t = _best(got)
                cells.append(f"{a} {_time(t)}" + (" (as 1 core)" if same else ""))
                ratios.append(f"{ct / t:.2f}x")
                row.update({f"ours_{k}_algorithm": a, f"ours_{k}_time_s": t, f"ours_{k}_over_c": ct / t,
                            f"ours_{k}_as_1_core": same})
            md.append(f"| {dims} | {_size(n)} | {ca} {_time(ct)} | " + " | ".join(cells) + " | "
                      + " | ".join(ratios) + " |")
            out_rows.append(row)
    whole = []
    for dims in ("8x8", "64x64"):
        for k in CORES[1:]:
            got = _read(f"engine-{dims}-cores{k}-whole", points)
            seg = _read(f"engine-{dims}-cores{k}", points)
            for n in sorted(got):
                if n in seg:
                    t0 = float(next(r["time_s"] for r in seg[n] if r["algorithm"] == "swing-bw"))
                    t1 = float(got[n][0]["time_s"])
                    whole.append(f"| {dims} | {_size(n)} | {k} | {_time(t0)} | {_time(t1)} | {t1 / t0:.2f}x |")
    if whole:
        md += ["", "swing-bw with the same threads, segments (overlap) against whole steps (none):", "",
               "| shape | size | cores | segments of 1 MiB | whole steps | whole / segments |",
               "|---|---|---|---|---|---|", *whole]
    if not out_rows:
        print("no results here yet: run run.sh", file=sys.stderr)
        return 1
    _write(HERE / "table.csv", out_rows)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
