"""Plots of the model (matplotlib, optional: ``pip install swing-mpi[plot]``).

:func:`plot_goodput`: goodput against vector size, one line per algorithm,
the peak ``D × link rate`` dashed (the paper's Panel 1).
:func:`plot_figure1`: busiest-link load per reduce-scatter step on a ring,
Swing against recursive doubling (the paper's Figure 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..units import format_size
from .cost import (
    DEFAULT_ALPHA,
    DEFAULT_LINK_BYTES_PER_S,
    ModelResult,
    analyze,
    default_sizes,
)

__all__ = ["plot_goodput", "plot_figure1", "require_matplotlib"]


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` with a headless backend, or a clear ``RuntimeError``."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            "plotting needs matplotlib: pip install matplotlib (or pip install 'swing-mpi[plot]')"
        ) from e
    return plt


def plot_goodput(results: Sequence[ModelResult], path: str, *, alpha: float = DEFAULT_ALPHA,
                 link_bytes_per_s: float = DEFAULT_LINK_BYTES_PER_S, congestion: str = "routed",
                 sizes: Sequence[int] | None = None, title: str | None = None) -> str:
    """Goodput (Gb/s) against vector size for each result; the peak dashed. Returns ``path``."""
    plt = require_matplotlib()
    if not results:
        raise ValueError("nothing to plot: no model results")
    sizes = list(sizes) if sizes is not None else default_sizes()
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in results:
        g = [r.goodput(n, alpha=alpha, link_bytes_per_s=link_bytes_per_s, congestion=congestion) * 8e-9
             for n in sizes]
        ax.plot(sizes, g, marker=".", label=f"{r.algorithm} (Ψ={r.Psi:.3g}, Ξ={r.Xi(congestion):.3f})")
    D = results[0].D
    peak = D * link_bytes_per_s * 8e-9
    ax.axhline(peak, ls="--", color="grey", label=f"peak = D × link = {peak:g} Gb/s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sizes[::3]
    ax.set_xticks(ticks)
    ax.set_xticklabels([format_size(n) for n in ticks], rotation=45, ha="right")
    ax.set_xlabel("vector size")
    ax.set_ylabel("goodput (Gb/s)")
    dims = "×".join(map(str, results[0].dims))
    ax.set_title(title or f"allreduce model, {dims} torus, {link_bytes_per_s * 8e-9:g} Gb/s, "
                          f"α = {alpha * 1e6:g} µs ({congestion} congestion)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_figure1(path: str, *, ring: int = 16, steps: int = 3,
                 algorithms: Sequence[str] = ("rabenseifner", "swing-bw-1port")) -> str:
    """Messages on the busiest link and cost (units of nβ) per reduce-scatter step on a ring."""
    plt = require_matplotlib()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 4))
    width = 0.8 / len(algorithms)
    top = [0.0, 0.0]
    for i, alg in enumerate(algorithms):
        st = analyze(alg, (ring,)).steps[:steps]
        xs = [s.index + i * width for s in st]
        ax1.bar(xs, [s.link_messages for s in st], width, label=alg)
        total = sum(s.link for s in st)
        ax2.bar(xs, [s.link for s in st], width, label=f"{alg}: Σ = {total:g} nβ")
        top = [max(top[0], max((s.link_messages for s in st), default=0)),
               max(top[1], max((s.link for s in st), default=0))]
    ax1.set_ylim(0, top[0] * 1.35 or 1)
    ax2.set_ylim(0, top[1] * 1.35 or 1)
    for ax in (ax1, ax2):
        ax.set_xticks([k + 0.4 - width / 2 for k in range(steps)])
        ax.set_xticklabels([f"step {k}" for k in range(steps)])
        ax.legend(fontsize=8)
    ax1.set_ylabel("messages on the busiest link")
    ax2.set_ylabel("step time (units of nβ)")
    fig.suptitle(f"{ring}-node ring, first {steps} reduce-scatter steps, routed (Figure 1)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
