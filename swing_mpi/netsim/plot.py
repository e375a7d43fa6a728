"""Goodput against vector size from simulated points, one line per algorithm (matplotlib, the ``plot`` extra)."""

from __future__ import annotations

from collections.abc import Sequence

from ..model.plot import require_matplotlib
from ..units import format_size
from .result import SimResult

__all__ = ["plot_goodput"]


def plot_goodput(results: Sequence[SimResult], path: str, *, title: str | None = None) -> None:
    """Write goodput (Gb/s) against size (log) for every algorithm in ``results``, the peak dashed."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    by: dict[str, list[SimResult]] = {}
    for r in results:
        by.setdefault(r.algorithm, []).append(r)
    for name, rs in by.items():
        rs = sorted((r for r in rs if r.time_s > 0), key=lambda r: r.nbytes)
        ax.plot([r.nbytes for r in rs], [r.goodput_bytes_per_s * 8e-9 for r in rs], marker="o", ms=3, label=name)
    if results:
        ax.axhline(results[0].peak_bytes_per_s * 8e-9, ls="--", color="grey", lw=1, label="peak")
        sizes = sorted({r.nbytes for r in results if r.nbytes > 0})
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([format_size(s) for s in sizes], rotation=45, fontsize=7)
        r0 = results[0]
        ax.set_title(title or f"simulated {r0.collective}, {r0.network} {'x'.join(map(str, r0.dims))}, "
                              f"{r0.params.link_bps / 1e9:g} Gb/s links, α {r0.params.alpha_s * 1e6:g} µs")
    ax.set_xlabel("vector size")
    ax.set_ylabel("goodput (Gb/s)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
