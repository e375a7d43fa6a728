#!/usr/bin/env python3
"""Two small mpi4py applications that switch to swing_mpi in one line.

* ``cg``: conjugate gradients on a 1-D Poisson problem distributed by rows;
  every iteration does a halo exchange and two dot products, each an
  ``Allreduce`` of one float64 (the latency path).
* ``sgd``: data-parallel least-squares regression; every step allreduces the
  gradient of a ``dim``-element model (the bandwidth path).

The one line is ``comm = swing_mpi.Intracomm(MPI.COMM_WORLD)``; everything
else is plain mpi4py. Run::

    mpiexec -n 4 python -m mpi4py benchmarks/apps.py --app cg --steps 200
    mpiexec -n 4 python -m mpi4py benchmarks/apps.py --app sgd --dim 1000000 --steps 10

It runs both with ``MPI.COMM_WORLD`` and with the swing_mpi drop-in, checks
they agree, and prints the time per application step side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from mpi4py import MPI


def cg_solve(comm: MPI.Intracomm, n_local: int = 1000, steps: int = 200) -> dict[str, object]:
    """Solve ``A x = b`` (A = tridiag(−1, 2, −1), b = 1) with ``steps`` CG iterations."""
    rank, size = comm.Get_rank(), comm.Get_size()
    b = np.ones(n_local)
    x = np.zeros(n_local)

    def matvec(v: np.ndarray) -> np.ndarray:
        left = np.zeros(1)
        right = np.zeros(1)
        reqs = []
        if rank > 0:
            reqs += [comm.Isend(v[:1], rank - 1, 11), comm.Irecv(left, rank - 1, 12)]
        if rank < size - 1:
            reqs += [comm.Isend(v[-1:], rank + 1, 12), comm.Irecv(right, rank + 1, 11)]
        MPI.Request.Waitall(reqs)
        out = 2 * v
        out[1:] -= v[:-1]
        out[:-1] -= v[1:]
        out[0] -= left[0]
        out[-1] -= right[0]
        return out

    def dot(a: np.ndarray, c: np.ndarray) -> float:
        local = np.array([a @ c])
        total = np.empty(1)
        comm.Allreduce(local, total, MPI.SUM)
        return float(total[0])

    r = b - matvec(x)
    p = r.copy()
    rr = dot(r, r)
    history: list[float] = [rr ** 0.5]
    t0 = time.perf_counter()
    done = 0
    for _ in range(steps):
        if rr <= 1e-28 * history[0] ** 2:  # converged (all ranks see the same rr)
            break
        done += 1
        ap = matvec(p)
        alpha = rr / dot(p, ap)
        x += alpha * p
        r -= alpha * ap
        rr_new = dot(r, r)
        history.append(rr_new ** 0.5)
        p = r + (rr_new / rr) * p
        rr = rr_new
    elapsed = time.perf_counter() - t0
    return {"x": x, "residuals": history, "seconds_per_step": elapsed / max(done, 1)}


def sgd_train(comm: MPI.Intracomm, dim: int = 100000, samples: int = 64, steps: int = 10,
              lr: float = 0.1) -> dict[str, object]:
    """Data-parallel gradient descent on ``‖X w − y‖²``; one gradient allreduce a step."""
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(1234)
    w_true = rng.standard_normal(dim) / np.sqrt(dim)
    local = np.random.default_rng(rank)
    X = local.standard_normal((samples, dim)) / np.sqrt(dim)
    y = X @ w_true
    w = np.zeros(dim)
    grad = np.empty(dim)
    losses: list[float] = []
    t0 = time.perf_counter()
    for _ in range(steps):
        err = X @ w - y
        g_local = X.T @ err / (samples * size)
        comm.Allreduce(g_local, grad, MPI.SUM)
        w -= lr * grad
        loss = np.array([err @ err])
        comm.Allreduce(MPI.IN_PLACE, loss, MPI.SUM)
        losses.append(float(loss[0]))
    elapsed = time.perf_counter() - t0
    return {"w": w, "losses": losses, "seconds_per_step": elapsed / max(steps, 1)}


def main(argv: list[str] | None = None) -> int:
    import swing_mpi

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", choices=["cg", "sgd"], default="cg")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--n-local", type=int, default=1000, help="cg: rows per rank")
    ap.add_argument("--dim", type=int, default=100000, help="sgd: model size (elements)")
    ap.add_argument("--algorithm", default=None, help="swing_mpi algorithm (default: auto)")
    ap.add_argument("--json", default=None, help="write the timings to this file (rank 0)")
    args = ap.parse_args(argv)

    world = MPI.COMM_WORLD
    swing = swing_mpi.Intracomm(world, algorithm=args.algorithm)  # <- the one-line switch
    results = {}
    for name, comm in (("native", world), ("swing_mpi", swing), ("native-again", world)):
        world.Barrier()
        if args.app == "cg":
            results[name] = cg_solve(comm, args.n_local, args.steps)
        else:
            results[name] = sgd_train(comm, args.dim, steps=args.steps)
    key = "x" if args.app == "cg" else "w"
    agree = bool(np.allclose(results["native"][key], results["swing_mpi"][key], rtol=1e-8, atol=1e-10))
    agree = world.allreduce(agree, MPI.LAND)
    if world.Get_rank() == 0:
        native = min(results["native"]["seconds_per_step"], results["native-again"]["seconds_per_step"])
        ours = results["swing_mpi"]["seconds_per_step"]
        print(f"# {args.app} on {world.Get_size()} ranks, {args.steps} steps"
              f"{'' if args.app == 'cg' else f', model of {args.dim} float64'}")
        print(f"{'comm':<14}{'ms/step':>10}")
        print(f"{'native':<14}{native * 1e3:>10.3f}")
        print(f"{'swing_mpi':<14}{ours * 1e3:>10.3f}   ratio {ours / native:.2f}x native")
        print(f"results agree: {agree}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"app": args.app, "p": world.Get_size(), "steps": args.steps,
                           "native_s_per_step": native, "swing_s_per_step": ours, "agree": agree}, f)
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
