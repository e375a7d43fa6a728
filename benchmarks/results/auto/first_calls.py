"""auto's cost from a size's first call: auto and every candidate in interleaved rounds, each on a new communicator.

    SWING_MPI_TUNING=tuning.json mpiexec -n 16 python -m mpi4py first_calls.py --dims 4x4 --sizes 8,64K,1M,16M

A new user's first calls of a size include auto's learning (its trial, :mod:`swing_mpi.online`), so
auto is timed from its first call, beside every candidate from theirs: each algorithm gets a new
communicator (a new state: a new trial for auto, first-call costs for all) and new arrays, after one
``native`` call has paid the process's own first-call costs (MPI's and Python's); each round
times one call of every algorithm (a new random order each round, each call from a barrier, the time of a call its
slowest rank's). The first rounds go up to ``--calls`` or until the fastest candidate has spent
``--budget`` seconds; ``first`` is auto's total over them / the fastest candidate's total. Then
``--steady`` more rounds once auto's trial is over: ``steady`` is auto's median / the fastest candidate's median.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import swing_mpi
from swing_mpi.choose import candidates
from swing_mpi.topology import parse_dims
from swing_mpi.units import format_size, parse_sizes


def rounds(comms: list, bufs: list, algs: list[str], dims: tuple[int, ...], count: int, *, budget: float,
           skip: int = 0) -> np.ndarray:
    """Time rounds of one call of every algorithm; stop at ``count`` rounds or the fastest one's ``budget``."""
    world = MPI.COMM_WORLD
    out = []
    spent = np.zeros(len(algs))
    for r in range(count):
        row = np.zeros(len(algs))
        # a new random order every round, the same on every rank: with a rotating order each algorithm always
        # followed the same one, and in the lab a call's speed depends on what the one before left in the
        # links' token buckets (3x4, 64 KiB: auto, always right after native, measured 10x native's time)
        order = np.random.default_rng([r, skip]).permutation(len(algs))
        for j in order.tolist():
            x, y = bufs[j]
            world.Barrier()
            t0 = time.perf_counter()
            swing_mpi.allreduce(comms[j], x, y, MPI.SUM, algorithm=algs[j], dims=dims)
            row[j] = time.perf_counter() - t0
        world.Allreduce(MPI.IN_PLACE, row, MPI.MAX)
        out.append(row)
        spent += row
        if spent[1:].min() > budget:
            break
    return np.array(out)


def main() -> None:
    """Measure every size; rank 0 prints a line per size and writes ``--json``."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--dims", required=True)
    ap.add_argument("--sizes", default="8,64K,1M,16M")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--steady", type=int, default=60)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    dims = tuple(parse_dims(args.dims, world.Get_size()))
    algs = ["auto", *candidates(dims, exact=False, commutative=True)]
    warm = world.Dup()  # the process's first MPI and swing_mpi calls (about 0.2 s at p=4) go to no one's account
    x = np.ones(1)
    swing_mpi.allreduce(warm, x, np.empty(1), MPI.SUM, algorithm="native")
    warm.Free()
    rows = []
    for n in parse_sizes(args.sizes):
        count = max(1, n // 8)
        comms = [world.Dup() for _ in algs]
        rng = np.random.default_rng([world.Get_rank(), count])
        bufs = [(rng.uniform(0.5, 1.5, count), np.empty(count)) for _ in algs]
        first = rounds(comms, bufs, algs, dims, args.calls, budget=args.budget)
        trial = swing_mpi.api.auto_trial(comms[0], bufs[0][1], MPI.SUM, dims=dims)
        while trial is not None and trial.pick is None:  # steady state: after auto's trial (untimed here)
            swing_mpi.allreduce(comms[0], *bufs[0], MPI.SUM, algorithm="auto", dims=dims)
        steady = rounds(comms, bufs, algs, dims, args.steady, budget=args.budget, skip=len(first))
        tot, med = first.sum(axis=0), np.median(steady, axis=0)
        bf, bs = 1 + int(np.argmin(tot[1:])), 1 + int(np.argmin(med[1:]))
        row = {"bytes": n, "calls": len(first), "first": float(tot[0] / tot[bf]), "first_best": algs[bf],
               "steady": float(med[0] / med[bs]), "steady_best": algs[bs],
               "first_s": {a: float(t) for a, t in zip(algs, tot)}, "steady_us": {a: float(t) * 1e6 for a, t in
                                                                                 zip(algs, med)},
               "trial": None if trial is None else {"contenders": list(trial.contenders), "pick": trial.pick,
                                                    "rounds": trial.rounds, "calls": len(trial.times)}}
        rows.append(row)
        if world.Get_rank() == 0:
            t = row["trial"]
            print(f"{format_size(n):>8}: {len(first):3d} first calls auto/fastest {row['first']:.2f} "
                  f"({algs[bf]} {tot[bf]:.3f} s, auto {tot[0]:.3f} s); steady {row['steady']:.2f} ({algs[bs]} "
                  f"{med[bs] * 1e6:.0f} us, auto {med[0] * 1e6:.0f} us); "
                  + ("no trial" if t is None else f"trial {','.join(t['contenders'])} -> {t['pick']} "
                                                  f"in {t['calls']} calls"), flush=True)
        for c in comms:
            c.Free()
    if world.Get_rank() == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"p": world.Get_size(), "dims": list(dims), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
