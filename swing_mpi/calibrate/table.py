"""calibrate's results: the decision tables, the model's constants and the report.

The medians per (p, dims, op class) become the tables ``auto`` decides from
(:class:`swing_mpi.tuning.DecisionTable`); α, β and a per-call constant are fitted to our algorithms'
medians for each network kind (:mod:`swing_mpi.model.fit`); ``native_below_bytes`` is where ``native``
won by :data:`~swing_mpi.choose.NATIVE_BELOW_MARGIN`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..choose import NATIVE_BELOW_MARGIN, choose
from ..model.features import NETWORKS
from ..model.fit import Fit, fit_constants
from ..schedule import ALGORITHMS, NATIVE
from ..tuning import DecisionTable, Tuning
from ..units import format_size, plural
from .measuring import ITEMSIZE, Measured, Series

__all__ = ["tables_from", "fit", "native_threshold", "report"]


def tables_from(m: Measured, *, p: int, dims: tuple[int, ...]) -> list[DecisionTable]:
    """Build the decision tables of a measurement: float64 SUM (inexact) and int64 SUM (exact)."""
    out = []
    for exact, dtype in ((False, "float64"), (True, "int64")):
        times: dict[str, tuple[float | None, ...]] = {}
        for s in m.series:
            if not s.exact:
                times.setdefault(s.algorithm, tuple(m.medians[s.name]))
        if exact:
            mine = [s for s in m.series if s.exact]
            if not mine:
                continue
            for s in mine:
                times[s.algorithm] = tuple(m.medians[s.name])
        times = {a: ts for a, ts in times.items() if any(t is not None for t in ts)}
        if times:
            out.append(DecisionTable(p=p, dims=dims, exact=exact, sizes=tuple(m.sizes), times=tuple(times.items()),
                                     dtype=dtype, op="sum"))
    return out


# -- fitting ------------------------------------------------------------------------------

def fit(m: Measured, dims: tuple[int, ...], *, gamma: float, network: str | None = None) -> Fit:
    """Fit α, β and a per-call constant to our algorithms' medians, for each network kind."""
    return fit_constants([(s.algorithm, s.exact, n, t) for s in m.series if s.algorithm != NATIVE
                          for n, t in zip(m.sizes, m.medians[s.name]) if t is not None], dims,
                         gamma=gamma, network=network)


def native_threshold(m: Measured, *, margin: float = NATIVE_BELOW_MARGIN) -> int | None:
    """Return below which size the model should hand vectors to ``native``, or ``None``.

    At each size ``native`` wins if its float64 median is at least ``margin``
    below the best of ours. The threshold is the step that agrees with the
    most sizes (native below it, ours from it on); ties go to the smaller.
    """
    nat = m.medians.get(f"{NATIVE}/float64")
    if not nat:
        return None
    sizes, wins = [], []
    for i, n in enumerate(m.sizes):
        ours = [m.medians[s.name][i] for s in m.series if s.algorithm != NATIVE and not s.exact]
        ours_t = [t for t in ours if t is not None]
        t_nat = nat[i]
        if t_nat is not None and ours_t:
            sizes.append(n)
            wins.append(t_nat <= (1.0 - margin) * min(ours_t))
    best_i, best_err = 0, len(sizes) + 1
    for i in range(len(sizes) + 1):
        err = sum(1 for w in wins[:i] if not w) + sum(1 for w in wins[i:] if w)
        if err < best_err:
            best_i, best_err = i, err
    if best_i == 0:
        return None
    return sizes[best_i] if best_i < len(sizes) else sizes[-1] + 1


def _class_series(m: Measured, exact: bool) -> dict[str, Series]:
    """Algorithm -> the series its times come from, for one op class (as :func:`tables_from` builds it)."""
    out = {s.algorithm: s for s in m.series if not s.exact}
    if exact:
        out.update({s.algorithm: s for s in m.series if s.exact})
    return out


def _held_out(rounds: dict[str, list[float]]) -> float | None:
    """Return auto / fastest when the pick is made on the even rounds and timed on the odd ones."""
    usable = {k: v for k, v in rounds.items() if len(v) >= 2}
    if not usable:
        return None
    even = {k: float(np.median(v[0::2])) for k, v in usable.items()}
    odd = {k: float(np.median(v[1::2])) for k, v in usable.items()}
    pick = min(even, key=lambda k: even[k])
    return odd[pick] / min(odd.values())


def report(tuning: Tuning, f: Fit, m: Measured, *, p: int, dims: tuple[int, ...]) -> str:
    """Return the calibration report: medians, auto / fastest per point, the fit and the decision table."""
    shape = "x".join(map(str, dims))
    model_only = replace(tuning, tables=())
    lines = [f"# swing-mpi calibrate: p={p}, dims {shape}, {plural(len(m.sizes), 'size')}, "
             f"{plural(len(m.series), 'series', 'series')}, "
             f"measured in {m.seconds:.1f} s"]
    has_exact = any(s.exact for s in m.series)
    for exact in ((False, True) if has_exact else (False,)):
        by_alg = _class_series(m, exact)
        algs = list(by_alg)
        lines += ["", f"## {'int64 SUM (exact ops)' if exact else 'float64 SUM (inexact ops)'}: median us "
                      "(max over ranks per call); '-' not measured (clearly beaten at smaller sizes)",
                  "## auto/fastest: pick from the even rounds, timed on the odd rounds (held out); "
                  "model: what the model alone would pick there"]
        w = {a: max(10, len(a)) for a in algs}  # every column as wide as its header: the rows line up
        wn = max([16, *(len(a) for a in algs), *(len(a) for a in ALGORITHMS)])
        head = f"| {'size':>9} | " + " | ".join(f"{a:>{w[a]}}" for a in algs) + \
            f" | {'fastest':<{wn}} | {'auto/fastest':>12} | {'model':<{wn}} | {'model/fastest':>13} |"
        lines += [head, "|" + "|".join("-" * (len(c) + 0) for c in head.split("|")[1:-1]) + "|"]
        for i, n in enumerate(m.sizes):
            meds = {a: m.medians[s.name][i] for a, s in by_alg.items()}
            got = {a: t for a, t in meds.items() if t is not None}
            cells = [f"{got[a] * 1e6:>{w[a]}.1f}" if a in got else f"{'-':>{w[a]}}" for a in algs]
            if not got:
                continue
            fastest = min(got, key=lambda a: got[a])
            ho = _held_out({a: m.rounds[s.name][i] for a, s in by_alg.items() if meds[a] is not None})
            mp = choose(p, dims, n // ITEMSIZE, ITEMSIZE, exact=exact, commutative=True, tuning=model_only)
            mr = f"{got[mp] / got[fastest]:>13.2f}" if mp in got else f"{'(not run)':>13}"
            lines.append(f"| {format_size(n):>9} | " + " | ".join(cells)
                         + f" | {fastest:<{wn}} | {(f'{ho:.2f}' if ho is not None else 'n/a'):>12} "
                         f"| {mp:<{wn}} | {mr} |")
    lines += ["", "# model for calls no table covers: T = per call + K*alpha + n*(moved*beta + reduced*gamma)",
              f"gamma = {f.gamma * 1e9:.4f} ns per reduced byte (reduction kernel, all ranks at once)"]
    for net in NETWORKS:
        a, b, c0 = f.constants[net]
        lines.append(f"{net:>5}: alpha = {a * 1e6:.2f} us, beta = {b * 1e9:.4f} ns/B, per call {c0 * 1e6:.1f} us, "
                     f"rms relative error {f.rms[net] * 100:.1f} %, its picks {math.exp(f.regret.get(net, 0.0)):.2f}x "
                     f"the fastest (geometric mean)" + ("  <- kept" if net == f.network else ""))
    lines.append(f"network: {f.network} " + ("(forced by $SWING_MPI_NETWORK)" if f.forced else
                                              "(its model picks best)"))
    nb = tuning.native_below_bytes
    lines.append("native_below_bytes = " + ("none" if nb is None else f"{nb} (model: MPI_Allreduce below "
                                                                     f"{format_size(nb)})"))
    lines += ["", f"# decision table: what auto runs on p={p}, dims {shape} with this tuning"]
    grid = [8 << i for i in range(24)]  # 8 B … 64 MiB
    for exact in ((False, True) if has_exact else (False,)):
        runs: list[tuple[int, int, str]] = []
        for n in grid:
            pick = choose(p, dims, n // ITEMSIZE, ITEMSIZE, exact=exact, commutative=True, tuning=tuning)
            if runs and runs[-1][2] == pick:
                runs[-1] = (runs[-1][0], n, pick)
            else:
                runs.append((n, n, pick))
        lines.append(f"{'int64 SUM' if exact else 'float64 SUM'}: " + ", ".join(
            f"{format_size(lo)}" + (f"-{format_size(hi)}" if hi != lo else "") + f" {a}" for lo, hi, a in runs))
    lines += [f"note: {x}" for x in m.notes]
    return "\n".join(lines)
