"""The benchmark's plot: goodput against size, and the time ratio to native (matplotlib, optional)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..schedule import AUTO, NATIVE
from ..units import short_size
from .results import ALLREDUCE, collective_of, ensure_parent, number

__all__ = ["plot_results", "plot_title"]


def plot_title(env: Mapping[str, Any]) -> str:
    """Return a plot title naming the run: collective, dtype, op, ranks, dims and the MPI library."""
    return (f"{env.get('collective') or ALLREDUCE} {env.get('dtype', '')} {env.get('op', '')}, p={env.get('p')}, "
            f"dims {env.get('dims')} — {env.get('mpi_library', '')}")


def plot_results(rows: Sequence[Mapping[str, Any]], path: str, *, title: str | None = None,
                 place: str | None = None) -> str:
    """Plot goodput (algbw) against size and the time ratio to native below; return ``path``.

    Log-log, one line per algorithm (the model dashed where ``model_us`` is
    known). ``place``: ``out`` (default where measured) or ``in``.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator, ScalarFormatter

    places = {r["place"] for r in rows}
    if place is None:
        place = "out" if "out" in places else sorted(places)[0]
    rows = [r for r in rows if r["place"] == place]
    names: list[str] = []
    for r in rows:
        n = str(r.get("label") or r["algorithm"])
        if n not in names:
            names.append(n)
    peak = max((number(r.get("algbw_Bps")) or 0.0) for r in rows) if rows else 0.0
    unit, div = ("GB/s", 1e9) if peak >= 1e9 else ("MB/s", 1e6)
    if len(names) <= 10:
        colors = [plt.get_cmap("tab10")(i) for i in range(10)]
    else:  # the 10 strong colours of tab20 first, then their light partners
        colors = [plt.get_cmap("tab20")(i) for i in list(range(0, 20, 2)) + list(range(1, 20, 2))]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 9), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    any_model = False
    for i, name in enumerate(names):
        rs = sorted((r for r in rows if str(r.get("label") or r["algorithm"]) == name), key=lambda r: int(r["size"]))
        color = colors[i % len(colors)]
        native = bool(rs) and rs[0]["algorithm"] == NATIVE
        style: dict[str, Any] = dict(color=color, marker="s" if native else "o", markersize=4,
                                     linewidth=2.2 if name == NATIVE else 1.4)
        xs = [int(r["size"]) for r in rs]
        ys = [(number(r.get("algbw_Bps")) or float("nan")) / div for r in rs]
        label = name
        if rs and rs[0]["algorithm"] == AUTO:
            ran = sorted({str(r.get("resolved")) for r in rs})
            label = f"{name} ({'/'.join(ran)})"
        ax.plot(xs, ys, label=label, **style)
        model = [(int(r["size"]), number(r.get("model_us"))) for r in rs]
        points = [(x, x / (t * 1e-6) / div) for x, t in model if t]
        if points:
            any_model = True
            ax.plot([x for x, _ in points], [y for _, y in points], linestyle="--", color=color, linewidth=1.0,
                    alpha=0.8)
        vs = [number(r.get("vs_native")) for r in rs]
        if any(v is not None for v in vs):
            ax2.plot(xs, [float("nan") if v is None else v for v in vs], **style)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({int(r["size"]) for r in rows})
    ticks = sizes if len(sizes) <= 14 else sizes[::2]
    ax2.set_xticks(ticks, [short_size(x) for x in ticks])
    ax2.xaxis.set_minor_locator(NullLocator())
    ax.set_ylabel(f"goodput (algbw = size / median time), {unit}")
    ax.grid(True, which="both", alpha=0.3)
    if any_model:
        ax.plot([], [], linestyle="--", color="gray", label="model (dashed)")
    ax.legend(fontsize=8, ncol=2, loc="best")
    collectives = sorted({collective_of(r) for r in rows}) or [ALLREDUCE]
    ax.set_title(title or f"{'/'.join(collectives)} goodput")
    ax2.axhline(1.0, color="black", linewidth=0.8)
    ax2.set_yscale("log", base=2)
    ax2.yaxis.set_major_formatter(ScalarFormatter())
    ax2.set_ylabel("median time / native median\n(< 1: faster than native)")
    ax2.set_xlabel(f"message size (bytes, {'in-place' if place == 'in' else 'out-of-place'})")
    ax2.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    ensure_parent(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
