"""The benchmark's measurement: the timed calls and the check, on points (:mod:`~swing_mpi.bench.points`).

Everything here runs under mpiexec; mpi4py is imported inside the functions,
so importing this module needs no MPI. How a point is measured and checked is
described in :mod:`swing_mpi.bench`.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import shlex
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import rc
from ..schedule import AUTO, NATIVE
from . import memory
from .points import (
    DEFAULT_MAX_BYTES,
    OWN_BUFFERS_MAX,
    Point,
    Prepared,
    iterations_for,
    make_input,
    page_array,
    page_copy,
    point_sizes,
)
from .results import ALLREDUCE, COLLECTIVES, add_vs_native
from .timing import SyncStart, auto_start, shuffled, time_point, timed

if TYPE_CHECKING:
    from .options import Config

__all__ = [
    "DEFAULT_MAX_BYTES", "OWN_BUFFERS_MAX", "iterations_for", "point_sizes", "make_input", "page_array", "page_copy",
    "Point", "collective_function", "collective_call", "count_wrong", "Prepared", "prepare_point", "shuffled",
    "SyncStart", "time_point", "resolve_dims", "environment", "library_version", "placed_comm", "run_bench",
]

_MPI_OPS = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN", "band": "BAND", "bor": "BOR", "bxor": "BXOR"}


def collective_function(collective: str) -> Callable[..., Any]:
    """Return ``swing_mpi``'s function for ``collective``, or raise ``ValueError`` if this version lacks it."""
    import swing_mpi

    fn = getattr(swing_mpi, collective, None)
    if fn is None:
        raise ValueError(f"swing_mpi.{collective} does not exist in this version: "
                         f"only --algorithms {NATIVE} can measure {collective}")
    return fn


def collective_call(comm: Any, mpi_op: Any, alg: str, dims: Any, pt: Point, send: np.ndarray,
                    recv: np.ndarray, ours: Any = None) -> Callable[[], Any]:
    """Return a zero-argument callable doing one collective of ``pt`` with ``alg`` on these arrays.

    ``ours``: the communicator our collectives run on (default ``comm``; a
    ``swing_mpi.Intracomm`` with coordinates for ``--node-env``).
    """
    from mpi4py import MPI

    sendbuf: Any = MPI.IN_PLACE if pt.place == "in" else send
    reduces = pt.collective.reduces
    if alg == NATIVE:  # called as an application calls it, the method looked up on each call
        if pt.collective.name == ALLREDUCE:
            return lambda: comm.Allreduce(sendbuf, recv, mpi_op)
        if pt.collective.name == "reduce_scatter_block":
            return lambda: comm.Reduce_scatter_block(sendbuf, recv, mpi_op)
        return lambda: comm.Allgather(sendbuf, recv)
    fn = collective_function(pt.collective.name)
    c = comm if ours is None else ours
    if reduces:
        return lambda: fn(c, sendbuf, recv, mpi_op, algorithm=alg, dims=dims)
    return lambda: fn(c, sendbuf, recv, algorithm=alg, dims=dims)


def count_wrong(comm: Any, pt: Point, send: np.ndarray, recv: np.ndarray, exact: bool) -> int:
    """Count this rank's wrong elements: vs the reference, vs rank 0's bits, a modified send buffer.

    Collective. The comparison with rank 0 applies where every rank holds the
    same result (allreduce, all-gather), not to the reduce-scatter's blocks.
    """
    res = pt.result(recv)
    if exact or pt.dtype.kind not in "fc":
        bad = res != pt.ref
    else:
        rtol = 8 * max(comm.Get_size(), 2) * np.finfo(pt.dtype).eps
        bad = ~np.isclose(res, pt.ref, rtol=rtol, atol=0.0)
    isz = pt.dtype.itemsize
    if pt.collective.name != "reduce_scatter_block":
        r0 = res.copy()
        comm.Bcast(r0, root=0)
        bad |= np.any(res.view(np.uint8).reshape(-1, isz) != r0.view(np.uint8).reshape(-1, isz), axis=1)
    n = int(np.count_nonzero(bad))
    if pt.place == "out":
        n += int(np.count_nonzero(send.view(np.uint8).reshape(-1, isz)
                                  != pt.input.view(np.uint8).reshape(-1, isz)))
    return n


def _poison(a: np.ndarray) -> None:
    if a.dtype.kind in "fc":
        a.fill(np.nan)
    else:
        a.view(np.uint8).fill(0xA5)


def prepare_point(comm: Any, mpi_op: Any, cfg: Config, alg: str, dims: Any, pt: Point, *,
                  exact: bool, ours: Any = None) -> Prepared:
    """Run the checked call and the warmup of ``alg`` on ``pt``; fix its iteration count (equal on all ranks)."""
    from mpi4py import MPI

    send, recv = pt.buffers()
    call = collective_call(comm, mpi_op, alg, dims, pt, send, recv, ours)
    wrong = -1
    _poison(recv)  # a result that is never written is caught
    t_first = timed(comm, pt, call, recv)
    if cfg.check:
        wrong = comm.allreduce(count_wrong(comm, pt, send, recv, exact), op=MPI.SUM)
    warm = [timed(comm, pt, call, recv) for _ in range(cfg.warmup)]
    trial = _finish_trial(comm if ours is None else ours, mpi_op, alg, dims, pt, call, recv)
    est = comm.allreduce(float(np.median(warm)) if warm else t_first, op=MPI.MAX)
    iters = iterations_for(pt.nbytes * cfg.batch, cfg.iters, max_bytes=cfg.max_bytes,
                           seconds_per_call=est * (cfg.batch + cfg.settle), max_time=cfg.max_time)
    return Prepared(alg, call, recv, int(wrong), iters, trial)


def _finish_trial(comm: Any, mpi_op: Any, alg: str, dims: Any, pt: Point, call: Callable[[], Any],
                  recv: np.ndarray) -> dict[str, Any] | None:
    """Call ``auto`` until its trial on this point is over (a warmup of its own); describe the trial.

    The benchmark times what ``auto`` runs after its first calls, as it times
    every algorithm after its warmup; the trial's calls and result are reported.
    """
    if alg != AUTO or pt.collective.name != ALLREDUCE:
        return None
    from ..api import auto_trial

    trial = auto_trial(comm, recv, mpi_op, dims=dims)
    if trial is None:
        return None
    extra = 0
    while trial.pick is None:  # the same on every rank: each rank's trial ends at the same call
        timed(comm, pt, call, recv)
        extra += 1
    return {"contenders": list(trial.contenders), "rounds": trial.rounds, "pick": trial.pick,
            "medians_us": [m * 1e6 for m in trial.medians], "times_us": [x * 1e6 for x in trial.times],
            "calls_after_warmup": extra}


def resolve_dims(comm: Any, spec: str | None) -> tuple[tuple[int, ...], str]:
    """Return the torus dims the calls use (exactly what ``swing_mpi`` will use) and where they come from."""
    from ..api import dims_for

    if spec:
        return dims_for(comm, spec), "--dims"
    dims = dims_for(comm)
    src = ("$SWING_MPI_DIMS" if rc.dims
           else ("ring of all ranks" if len(dims) == 1 else "default"))
    return tuple(dims), src


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "unknown"
    return re.sub(r"\s+", " ", line)


def library_version(*, full: bool = False) -> str:
    """Return ``MPI.Get_library_version()``: its first line, whitespace collapsed, or (``full``) all of it.

    Open MPI's string ends in a NUL character, which would make a text report a binary file.
    """
    from mpi4py import MPI

    text = MPI.Get_library_version().replace("\x00", "").strip()
    return text if full else _first_line(text)


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def environment(comm: Any, cfg: Config, dims: tuple[int, ...], dims_source: str,
                sizes: Sequence[int]) -> dict[str, Any]:
    """Return what the run measured and where: library, native's algorithm, options, host, command."""
    import mpi4py
    from mpi4py import MPI

    from .. import __version__

    coll = COLLECTIVES[cfg.collective]
    lib = library_version(full=True)
    forced = os.environ.get(coll.mpich_cvar)
    ompi = os.environ.get(coll.ompi_var)
    if "MPICH" in lib:
        native_desc = (f"MPICH algorithm {forced!r} ({coll.mpich_cvar}={forced})" if forced
                       else f"MPICH's default selection ({coll.mpich_cvar} unset)")
        mpich_alg = forced or "default"
    else:
        native_desc = (f"Open MPI {coll.ompi_var[len('OMPI_MCA_'):]}={ompi}" if ompi
                       else "the library's default selection")
        mpich_alg = ""
    native_desc = f"comm.{coll.mpi_call}, {native_desc}"
    if cfg.label:
        native_desc += f"; rows labelled {cfg.label!r}"
    relevant = {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("MPIR_CVAR_", "MPICH_", "FI_", "UCX_", "SWING_MPI_", "OMPI_MCA_", "MPIEXEC_TIMEOUT"))}
    argv = getattr(sys, "orig_argv", None) or [sys.executable] + sys.argv
    return {
        "collective": coll.name,
        "p": comm.Get_size(),
        "dims": "x".join(map(str, dims)),
        "dims_source": dims_source,
        "node_env": getattr(cfg, "node_env", None),
        "dtype": cfg.dtype,
        "op": cfg.op,
        "mpi_library": library_version(),
        "mpi_library_full": lib,
        "mpi_vendor": list(MPI.get_vendor()[:1]) + [".".join(map(str, MPI.get_vendor()[1]))],
        "mpich_algorithm": mpich_alg,
        "native_desc": native_desc,
        "label": cfg.label or NATIVE,
        "iters": cfg.iters,
        "warmup": cfg.warmup,
        "max_bytes": cfg.max_bytes,
        "max_time": cfg.max_time,
        "places": cfg.places,
        "check": cfg.check,
        "interleave": cfg.interleave,
        "batch": cfg.batch,
        "settle": cfg.settle,
        "streak": cfg.streak,
        "seed": cfg.seed,
        "sizes": list(sizes),
        "algorithms": cfg.algorithms,
        "model": cfg.model_params(),
        "host": socket.gethostname(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "mpi4py": mpi4py.__version__,
        "swing_mpi": __version__,
        "cpus": os.cpu_count(),
        "loadavg": _loadavg(),
        "command": shlex.join(argv),
        "environment": relevant,
    }


def _resolved(alg: str, pt: Point, p: int, mpi_op: Any, datatype: Any, dims: tuple[int, ...], tuning: Any) -> str:
    """Name what ``alg`` runs on ``pt``: ``auto``'s pick, or the fallback of a non-commutative op."""
    if alg == NATIVE:
        return alg
    if pt.collective.name == ALLREDUCE:
        from ..api import resolve

        return resolve(alg, p, pt.nbytes, mpi_op, datatype, dims=dims, count=pt.count, tuning=tuning)
    if alg != AUTO:
        return alg
    from ..api import is_exact
    from ..choose import choose_collective

    return choose_collective(pt.collective.registry, p, dims, pt.nbytes,
                             exact=mpi_op is None or is_exact(mpi_op, datatype), commutative=True,
                             native_ok=True, tuning=tuning)


def placed_comm(comm: Any, dims: tuple[int, ...], node_env: str | None) -> Any:
    """Return ``comm`` with this rank at the torus node in ``$node_env`` (``--node-env``), or None.

    Collective: every rank must have the variable; the nodes must be a permutation of the torus
    (``swing_mpi.Intracomm(coords=...)`` checks that on every rank).
    """
    if not node_env:
        return None
    import os

    from ..api import Intracomm
    from ..topology import Torus

    text = os.environ.get(node_env)
    problem = None
    node = -1
    try:
        node = int(text) if text is not None else -1
    except ValueError:
        problem = f"${node_env}={text!r} is not a node number"
    if text is None:
        problem = f"${node_env} is not set"
    bad = comm.allgather(problem)
    if any(bad):
        raise ValueError("--node-env: " + "; ".join(f"rank {r}: {b}" for r, b in enumerate(bad) if b))
    torus = Torus(dims)
    if not 0 <= node < torus.size:
        coords: Any = (node,)  # Intracomm reports it on every rank
    else:
        coords = torus.coords(node)
    return Intracomm(comm, dims=dims, coords=coords)


def run_bench(comm: Any, cfg: Config, *, start: Callable[[dict[str, Any]], None] | None = None,
              log: Callable[[dict[str, Any], list[dict[str, Any]], int, float], None] | None = None,
              ours: Any = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the whole sweep on ``comm``; return ``(env, rows)`` (on every rank).

    ``ours``: the communicator our collectives run on (:func:`placed_comm`; default ``comm``).

    On rank 0, ``start(env)`` is called before the first point and
    ``log(env, rows_of_one_size, size_index, seconds)`` after each size.
    """
    from mpi4py import MPI

    from ..api import comm_tuning, is_exact

    dims, dims_source = resolve_dims(comm, cfg.dims)
    tuning = comm_tuning(comm)  # what auto uses on this communicator (collective on first use)
    p = comm.Get_size()
    dtype = np.dtype(cfg.dtype)
    sizes = point_sizes(cfg.sizes, dtype.itemsize, p, cfg.collective)
    env = environment(comm, cfg, dims, dims_source, sizes)
    env["start"], env["start_why"] = auto_start(comm) if cfg.start == "auto" else (cfg.start, "asked")
    sync = SyncStart(comm) if env["start"] == "sync" else None
    env["start_lead_s"] = sync.lead if sync is not None else None
    coll = COLLECTIVES[cfg.collective]
    mpi_op = getattr(MPI, _MPI_OPS[cfg.op]) if coll.reduces else None
    datatype = MPI.Datatype.fromcode(dtype.char)
    exact = mpi_op is None or is_exact(mpi_op, datatype) or dtype.kind in "iub"
    label = cfg.label or NATIVE
    rows: list[dict[str, Any]] = []
    budget = memory.memory_budget(comm)
    left_out: dict[str, str] = {}  # algorithm -> why (from the first size it did not fit on)
    env["left_out"] = []
    if start is not None and comm.Get_rank() == 0:
        start(env)
    for si, nbytes in enumerate(sizes):
        size_rows = []
        t_size = time.perf_counter()
        for place in cfg.places:
            pt = Point(comm, mpi_op, cfg, nbytes, place)
            algs = [a for a in cfg.algorithms if a not in left_out]
            runs = {a: _resolved(a, pt, p, mpi_op, datatype, dims, tuning) for a in algs}
            if budget is not None:
                algs = memory.fit(comm, algs, runs, left_out, budget, pt.nbytes, datatype.Get_size(), dims, exact,
                                  env["left_out"])
            preps = [prepare_point(comm, mpi_op, cfg, alg, dims, pt, exact=exact, ours=ours) for alg in algs]
            results = time_point(comm, pt, preps, interleave=cfg.interleave, batch=cfg.batch, start=sync,
                                 settle=cfg.settle, streak=cfg.streak)
            for alg, res, prep in zip(algs, results, preps):
                size_rows.append({
                    "size": pt.nbytes, "count": pt.block, "type": cfg.dtype, "redop": cfg.op,
                    "algorithm": alg, "label": label if alg == NATIVE else alg,
                    "resolved": runs[alg] if prep.trial is None else prep.trial["pick"],
                    "trial": prep.trial,
                    "place": place, "p": p, "dims": env["dims"], "mpich_algorithm": env["mpich_algorithm"],
                    "warmup": cfg.warmup, **res, "vs_native": None, "model_us": None, "collective": coll.name,
                })
            del pt
        add_vs_native(size_rows)
        rows.extend(size_rows)
        if log is not None and comm.Get_rank() == 0:
            log(env, size_rows, si, time.perf_counter() - t_size)
    return env, rows
