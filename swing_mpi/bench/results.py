"""The benchmark's rows: the table, CSV/JSON files, the ratio to native and the model column.

Pure data and text: no MPI, no numpy. A row is a dict with the keys of
:data:`FIELDS` (plus, in JSON only, ``times_us``, every timed iteration, and ``order_seed``,
from which :func:`swing_mpi.bench.timing.shuffled` gives the orders they ran in).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..schedule import AUTO, NATIVE
from ..units import format_size

__all__ = [
    "Collective", "COLLECTIVES", "ALLREDUCE", "FIELDS", "MIN_ITERS", "MPICH_EQUIVALENT",
    "number", "ensure_parent", "display_name", "collective_of",
    "format_header", "format_row", "format_table", "env_header_lines", "start_text",
    "JSON_ONLY", "write_csv", "write_json", "read_results",
    "add_vs_native", "native_medians", "set_vs_native", "model_algorithm", "add_model_times",
]

MIN_ITERS = 3
"""Iterations per point never drop below this (unless ``--iters`` is lower)."""


@dataclass(frozen=True)
class Collective:
    """What the benchmark needs to know of one collective: its MPI call, its busbw, its variables."""

    name: str
    mpi_call: str
    """The ``MPI.Comm`` method that is ``native`` (and the reference of ``#wrong``)."""
    bus_numerator: int
    """busbw = algbw · ``bus_numerator``·(p−1)/p (nccl-tests' convention)."""
    reduces: bool
    """Whether the collective takes a reduction op."""
    mpich_cvar: str
    """MPICH's variable that forces its algorithm (read at ``MPI_Init``)."""
    ompi_var: str
    """Open MPI's ``coll_tuned`` variable for the same."""
    registry: str
    """Its name in the registry's ``AlgorithmInfo.collectives`` (the reduce-scatter's, for the block form)."""

    def bus_factor(self, p: int) -> float:
        """Return busbw / algbw on ``p`` ranks."""
        return self.bus_numerator * (p - 1) / p if p > 0 else 0.0

    @property
    def bus_formula(self) -> str:
        """The busbw formula as the table header states it."""
        return f"algbw*{self.bus_numerator}(p-1)/p" if self.bus_numerator != 1 else "algbw*(p-1)/p"


ALLREDUCE = "allreduce"

#: The collectives ``--collective`` measures. The size of a point is always the
#: full vector: the allreduce's vector, the reduce-scatter's input, the all-gather's output.
COLLECTIVES: dict[str, Collective] = {
    c.name: c for c in (
        Collective(ALLREDUCE, "Allreduce", 2, True, "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
                   "OMPI_MCA_coll_tuned_allreduce_algorithm", "allreduce"),
        Collective("reduce_scatter_block", "Reduce_scatter_block", 1, True,
                   "MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM",
                   "OMPI_MCA_coll_tuned_reduce_scatter_block_algorithm", "reduce_scatter"),
        Collective("allgather", "Allgather", 1, False, "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM",
                   "OMPI_MCA_coll_tuned_allgather_algorithm", "allgather"),
    )
}

#: MPICH allreduce algorithm (``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM``) -> our schedule with the
#: same peers and sizes, for the model line of a forced native run.
MPICH_EQUIVALENT = {"ring": "ring", "recursive_doubling": "recdoub"}

#: Every row of the CSV/JSON output, in this order.
FIELDS = (
    "size", "count", "type", "redop", "algorithm", "label", "resolved", "place", "p", "dims",
    "mpich_algorithm", "iters", "warmup", "time_avg_us", "time_min_us", "time_max_us",
    "time_median_us", "algbw_Bps", "busbw_Bps", "vs_native", "wrong", "model_us", "collective",
)


def collective_of(row: Mapping[str, Any]) -> str:
    """Return the row's collective (files written before ``--collective`` hold allreduce rows)."""
    return str(row.get("collective") or ALLREDUCE)


def number(x: Any) -> float | None:
    """Return ``x`` as a float, or ``None`` for a missing value, text that is no number, or NaN."""
    if x is None or x == "":
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def ensure_parent(path: str) -> None:
    """Create the directory that will hold ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


# -- table -------------------------------------------------------------------------------

_BW = {"GB": 1e9, "MB": 1e6}


def format_header(bw_unit: str = "GB") -> str:
    """Return the two column-title lines of the table (``#``-prefixed, nccl-tests style)."""
    u = f"{bw_unit}/s"
    top = (f"#{'':>11} {'':>10} {'':>10} {'':>5} {'':<30} {'':>5} {'':>5} |"
           f"{'time (us)':^48}| {'bandwidth (' + u + ')':^21} |{'':>10} {'':>6}")
    cols = (f"#{'size':>11} {'count':>10} {'type':>10} {'redop':>5} {'algorithm':<30} {'place':>5} {'iters':>5} |"
            f"{'avg':>11} {'min':>11} {'max':>11} {'median':>11}  | {'algbw':>9} {'busbw':>10}  |"
            f"{'vs_native':>10} {'#wrong':>6}")
    return top + "\n" + cols


def _time_text(us: Any) -> str:
    v = number(us)
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 1e5 else f"{v:.4g}"


def _bw_text(bps: Any, unit: str) -> str:
    v = number(bps)
    if v is None:
        return "-"
    v /= _BW[unit]
    return f"{v:.4f}" if v < 10 else (f"{v:.2f}" if v < 1e4 else f"{v:.4g}")


def display_name(row: Mapping[str, Any]) -> str:
    """Return the row's ``label``, with what ``auto`` ran: ``auto:swing-lat``."""
    name = str(row.get("label") or row.get("algorithm"))
    if row.get("algorithm") == AUTO and row.get("resolved") and row.get("resolved") != AUTO:
        name = f"{name}:{row['resolved']}"
    return name


def format_row(row: Mapping[str, Any], bw_unit: str = "GB") -> str:
    """Return one data line of the table."""
    vs = number(row.get("vs_native"))
    wrong = row.get("wrong")
    wrong_s = "-" if wrong is None or wrong == "" or int(float(wrong)) < 0 else str(int(float(wrong)))
    return (f" {int(float(row['size'])):>11} {int(float(row['count'])):>10} {row['type']:>10} {row['redop']:>5} "
            f"{display_name(row):<30} {row['place']:>5} {int(float(row['iters'])):>5} |"
            f"{_time_text(row.get('time_avg_us')):>11} {_time_text(row.get('time_min_us')):>11} "
            f"{_time_text(row.get('time_max_us')):>11} {_time_text(row.get('time_median_us')):>11}  | "
            f"{_bw_text(row.get('algbw_Bps'), bw_unit):>9} {_bw_text(row.get('busbw_Bps'), bw_unit):>10}  |"
            f"{'-' if vs is None else f'{vs:.3f}':>10} {wrong_s:>6}")


def format_table(rows: Iterable[Mapping[str, Any]], bw_unit: str = "GB") -> str:
    """Return the header and one line per row, with a ``#`` line between sizes."""
    out = [format_header(bw_unit)]
    last = None
    for r in rows:
        if last is not None and r["size"] != last:
            out.append("#")
        last = r["size"]
        out.append(format_row(r, bw_unit))
    return "\n".join(out)


def start_text(env: Mapping[str, Any]) -> str:
    """Say how the bench started each timed call: its ``--start``, and why where ``auto`` chose it."""
    why = env.get("start_why")
    rule = f"--start auto: {why}" if why and why != "asked" else ""
    if env.get("start") == "sync":
        lead = env.get("start_lead_s")
        return ("every rank starts at one instant agreed after the barrier" + (f" ({lead * 1e3:.2g} ms ahead)" if lead
                else "") + " and times from it (one host's clock" + (f", {rule}" if rule else "") + ")")
    return "every rank times from its own exit of a barrier" + (f" ({rule})" if rule else "")


def env_header_lines(env: Mapping[str, Any]) -> list[str]:
    """Return the ``#`` header block printed above the table."""
    coll = COLLECTIVES[str(env.get("collective") or ALLREDUCE)]
    size_note = "" if coll.name == ALLREDUCE else (
        "; size = the full vector ("
        + ("the reduce-scatter input" if coll.reduces else "the all-gather output")
        + "), count = elements per rank")
    cap = format_size(env["max_bytes"]) if env["max_bytes"] else "no cap"
    streak = int(env.get("streak", 1) or 1)
    if not env.get("interleave", True):
        order = "one algorithm after the other, in a random order"
    elif streak > 1:
        order = f"round robin over the algorithms of a size, {streak} calls a turn, in a new order each round"
    else:
        order = "round robin over the algorithms of a size, in a new order each iteration"
    batch = int(env.get("batch", 1) or 1)
    if batch > 1:
        order += f"; an iteration is {batch} back-to-back calls from one barrier, its time per call"
    settle = int(env.get("settle", 0) or 0)
    if settle:
        order += f"; each timed call follows {settle} untimed call{'s' if settle > 1 else ''} of the same algorithm"
    order += f"; {start_text(env)}"
    check = (f"against comm.{coll.mpi_call}"
             + (" and rank 0" if coll.name != "reduce_scatter_block" else "")
             + ", #wrong = wrong elements over all ranks") if env["check"] else "off"
    return [
        f"# swing-mpi bench: {coll.name}, p={env['p']}, dims={env['dims']} ({env['dims_source']}), "
        f"type={env['dtype']}, redop={env['op']}",
        f"# MPI: {env['mpi_library']}",
        f"# native: {env['native_desc']}",
        f"# iterations: {env['iters']} timed (at most {cap} and ~{env['max_time']:g} s per point, at least "
        f"{min(MIN_ITERS, env['iters'])}), {env['warmup']} warmup, {order}; time = max over ranks per iteration; "
        f"busbw = {coll.bus_formula}; vs_native = median/native median{size_note}",
        f"# check: {check}",
        f"# algorithms: {', '.join(env['algorithms'])}",
        f"# host: {env['host']} ({env.get('cpus')} cpus, load {env.get('loadavg')} at start)  date: {env['date']}  "
        f"python {env['python']}  numpy {env['numpy']}  mpi4py {env['mpi4py']}  swing_mpi {env['swing_mpi']}",
        f"# command: {env['command']}",
    ]


# -- output files ----------------------------------------------------------------------

def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return v


JSON_ONLY = ("times_us", "order_seed", "trial")
"""Row keys the CSV leaves out (the JSON has them)."""


def write_csv(rows: Sequence[Mapping[str, Any]], path: str, fields: Sequence[str] = FIELDS) -> None:
    """Write rows as CSV with the columns ``fields`` (extra keys are kept after them)."""
    extra: list[str] = []
    for r in rows:
        for k in r:
            if k not in fields and k not in extra and k not in JSON_ONLY:
                extra.append(k)
    ensure_parent(path)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fields) + extra, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _csv_value(r.get(k)) for k in list(fields) + extra})


def write_json(path: str, env: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], **extra: Any) -> None:
    """Write the environment and every row (with all its times) as JSON."""
    ensure_parent(path)
    with open(path, "w") as f:
        json.dump({"env": env, "rows": list(rows), **extra}, f, indent=1)
        f.write("\n")


_INT_FIELDS = ("size", "count", "p", "iters", "warmup", "wrong")
_FLOAT_FIELDS = ("time_avg_us", "time_min_us", "time_max_us", "time_median_us", "algbw_Bps", "busbw_Bps",
                 "vs_native", "model_us")


def read_results(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return ``(env, rows)`` from a JSON written by :func:`write_json` or a CSV by :func:`write_csv`."""
    if path.endswith(".json"):
        with open(path) as f:
            data = json.load(f)
        return dict(data.get("env", {})), [dict(r) for r in data["rows"]]
    rows: list[dict[str, Any]] = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row: dict[str, Any] = dict(r)
            for k in _INT_FIELDS:
                if row.get(k) not in (None, ""):
                    row[k] = int(float(row[k]))
            for k in _FLOAT_FIELDS:
                row[k] = number(row.get(k))
            rows.append(row)
    return {}, rows


# -- derived columns: ratio to native, model ---------------------------------------------

def add_vs_native(rows: list[dict[str, Any]], reference: Sequence[Mapping[str, Any]] | None = None) -> None:
    """Set ``vs_native`` = median / native's median at the same size and place.

    ``reference``: the rows whose ``algorithm == "native"`` (and label
    ``native``, if there are several) give the native medians; default ``rows``.
    """
    set_vs_native(rows, native_medians(rows if reference is None else reference))


def native_medians(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[int, str], float | None]:
    """Map ``(size, place)`` to native's median time.

    The rows labelled ``native`` (the MPI library's default selection) where
    there are any, else every ``native`` row (a forced algorithm).
    """
    natives = [r for r in rows if r.get("algorithm") == NATIVE]
    plain = [r for r in natives if (r.get("label") or NATIVE) == NATIVE]
    return {(int(r["size"]), r["place"]): number(r.get("time_median_us")) for r in (plain or natives)}


def set_vs_native(rows: list[dict[str, Any]], medians: Mapping[tuple[int, str], float | None]) -> None:
    """Set ``vs_native`` = median / ``medians[(size, place)]`` (``None`` where that is unknown)."""
    for r in rows:
        m = medians.get((int(r["size"]), r["place"]))
        t = number(r.get("time_median_us"))
        r["vs_native"] = (t / m) if (m and t is not None) else None


def model_algorithm(row: Mapping[str, Any], known: Sequence[str] | None = None) -> str | None:
    """Return the registered schedule that models this allreduce row, or ``None``.

    The algorithm itself (what ``auto`` ran), or, for a native run with a
    forced MPICH algorithm, the schedule with the same peers. The model is
    the allreduce's: rows of the other collectives have none.
    """
    if collective_of(row) != ALLREDUCE:
        return None
    if known is None:
        from ..schedule import ALGORITHMS
        known = tuple(ALGORITHMS)
    alg = row.get("algorithm")
    if alg == NATIVE:
        name = MPICH_EQUIVALENT.get(str(row.get("mpich_algorithm") or ""))
    elif alg == AUTO:
        name = row.get("resolved")
    else:
        name = alg
    return name if name in known else None


def add_model_times(rows: list[dict[str, Any]], *, link_bytes_per_s: float, alpha: float = 0.0,
                    congestion: str = "routed", warn: Callable[[str], None] | None = None) -> bool:
    """Fill ``model_us`` from ``swing_mpi.model.predict_time`` where it can; False if the model is missing."""
    try:
        from .. import model as cost_model
    except Exception as e:  # the model is optional
        if warn:
            warn(f"no model lines: swing_mpi.model not importable ({e})")
        return False
    predict = getattr(cost_model, "predict_time", None)
    if predict is None:
        if warn:
            warn("no model lines: swing_mpi.model has no predict_time")
        return False
    from ..topology import parse_dims

    failed = set()
    for r in rows:
        name = model_algorithm(r)
        if name is None or name in failed:
            continue
        try:
            dims = parse_dims(r["dims"])
            t = predict(name, dims, int(r["size"]), alpha=alpha, link_bytes_per_s=link_bytes_per_s,
                        congestion=congestion)
            r["model_us"] = float(t) * 1e6
        except Exception as e:  # one algorithm the model cannot do must not stop the rest
            failed.add(name)
            if warn:
                warn(f"no model line for {name}: {type(e).__name__}: {e}")
    return True
