r"""Where an allreduce spends its time in the lab: every rank's step times against the routed model.

Run one rank per torus node, e.g. in the 8x8 lab::

    python -m swing_mpi lab --dims 8x8 -- python -m mpi4py \
        benchmarks/results/lab-points/trace_steps.py --dims 8x8 --algorithm swing-bw --size 4M

Each iteration is ``comm.Barrier()`` then one allreduce; every rank notes
when it left the barrier, when it posted each step (per lane) and when each
step's data had arrived. Rank 0 prints, per iteration: the spread of the
barrier's exits, and per step the model's time for that step (routed loads at
the lab's link rate, α = 0), the median and worst transfer time (arrival
minus the later of the rank's and its peers' posts) and the step's end (the
last rank), all from the first rank's barrier exit. ``--yield-barrier``
replaces MPICH's (spinning) barrier by ``Ibarrier`` and the executor's
yielding wait. A diagnostic: it wraps the executor's private methods.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mpi4py import MPI

import swing_mpi
from swing_mpi import executor
from swing_mpi.model.cost import analyze
from swing_mpi.units import parse_size

rec: list[tuple[str, int, int, float, tuple[int, ...]]] = []
_post, _apply = executor.Plan._post, executor.Plan._apply


def post(self, lane, k, work):
    t = time.perf_counter()
    reqs = _post(self, lane, k, work)
    rec.append(("post", lane, k, t, tuple(peer for peer, _ in self.req_peers[lane][k])))
    return reqs


def apply(self, lane, k, work):
    rec.append(("done", lane, k, time.perf_counter(), ()))
    return _apply(self, lane, k, work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dims", required=True)
    ap.add_argument("--algorithm", default="swing-bw")
    ap.add_argument("--size", default="4M")
    ap.add_argument("--iters", type=int, default=6, help="iterations (the first two are not printed)")
    ap.add_argument("--rate-mbit", type=float, default=40.0)
    ap.add_argument("--yield-barrier", action="store_true")
    args = ap.parse_args()
    executor.Plan._post, executor.Plan._apply = post, apply
    comm = MPI.COMM_WORLD
    dims = tuple(int(x) for x in args.dims.split("x"))
    n = parse_size(args.size) // 8 * 8
    a = np.ones(n // 8)
    b = np.empty_like(a)
    model = analyze(args.algorithm, dims) if comm.rank == 0 else None
    rate = args.rate_mbit * 1e6 / 8
    for it in range(args.iters):
        if args.yield_barrier:
            executor._wait_all([comm.Ibarrier()])
        else:
            comm.Barrier()
        rec.clear()
        t0 = time.perf_counter()
        swing_mpi.allreduce(comm, a, b, algorithm=args.algorithm, dims=dims)
        t1 = time.perf_counter()
        every = comm.gather((t0, t1, list(rec)), root=0)
        if comm.rank or it < 2:
            continue
        assert model is not None
        start = min(e[0] for e in every)
        posted, done, peers = {}, {}, {}
        for r, (_, _, events) in enumerate(every):
            for kind, lane, k, t, pp in events:
                if kind == "post":
                    posted[r, lane, k] = t - start
                    peers[r, lane, k] = pp
                else:
                    done[r, lane, k] = t - start
        exits = [e[0] - start for e in every]
        print(f"iteration {it}: first exit to last end {max(e[1] for e in every) - start:.3f} s, worst rank "
              f"{max(e[1] - e[0] for e in every):.3f} s, model {model.time(n, alpha=0, link_bytes_per_s=rate):.3f} s;"
              f" barrier exits spread over {max(exits) * 1e3:.1f} ms")
        for k in range(model.K):
            net = [d - max([posted[r, lane, k]] + [posted.get((q, lane, k), 0.0) for q in peers[r, lane, k]])
                   for (r, lane, kk), d in done.items() if kk == k and (r, lane, k) in peers]
            if not net:
                continue
            end = max(d for (_, _, kk), d in done.items() if kk == k)
            ms = np.array(net) * 1e3
            print(f"  step {k:2d}: model {model.steps[k].load('routed') * n / rate * 1e3:6.1f} ms, transfer median "
                  f"{np.median(ms):6.1f} worst {ms.max():6.1f} ms, last rank done at {end * 1e3:7.1f} ms")
        print(flush=True)


if __name__ == "__main__":
    main()
