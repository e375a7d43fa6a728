#!/usr/bin/env python3
"""Allreduce of more than 2^31 elements with swing_mpi, checked, with its memory overhead.

Run under mpiexec (not part of CI; needs about 3 vectors of memory per rank)::

    MPIEXEC_TIMEOUT=1200 mpiexec -n 2 python -m mpi4py scripts/large_count.py
    ... scripts/large_count.py --count 2147483655 --dtype uint8 --op sum --algorithm swing-bw --native

Every rank fills its input chunk by chunk from a cheap formula,
``x_r[i] = ((i·K_r + C_r) >> 29) mod 256`` (uint64 arithmetic), so the
expected result of SUM (mod 256) or BXOR at any index is computed on the
fly: the result is compared with it at spot slices (start, end, block
boundaries at ``k·n/(2Dp)``, around 2^31 and 2^32, random 1 MiB slices) and, unless
``--quick``, over the whole vector in chunks; the send buffer is checked
unchanged and the result's CRC equal on all ranks.

Memory: before the call the buffers are allocated and touched; then the
peak RSS is reset (``/proc/self/clear_refs``) and ``tracemalloc`` started
(numpy reports its data allocations to it). Reported per rank: the RSS peak
during the call minus the RSS before it (everything the call added: our
scratch, MPI's internal buffers), numpy's traced peak (our temporaries
only) and the scratch held by the cached plan, each also as a multiple of
one vector. ``--native`` does the same for ``comm.Allreduce`` afterwards.

Before allocating anything, rank 0 of each node checks ``MemAvailable`` in
``/proc/meminfo`` against what the ranks on that node need (2 vectors out
of place, 1 in place, plus 1 vector of allowance for temporaries, plus
256 MiB) and all ranks stop with a clear message if it does not fit.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
import zlib

import numpy as np
from mpi4py import MPI

GiB = 1 << 30
CHUNK = 1 << 24
K = [0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
     0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9]


_SUB = 1 << 20  # formula evaluated in cache-sized pieces
_BASE = np.arange(_SUB, dtype=np.uint64)


def _h(r: int, s: int, e: int, out: np.ndarray, op: str | None = None) -> None:
    """out[:] = x_r[s:e] (op None), or out op= x_r[s:e] (op "sum"/"bxor"), uint8."""
    k = np.uint64(K[r % len(K)] | 1)
    c = np.uint64((r * 0x632BE59BD9B4E019 + 12345) % (1 << 64))
    tmp = np.empty(_SUB, np.uint64)
    with np.errstate(over="ignore"):
        for a in range(s, e, _SUB):
            m = min(_SUB, e - a)
            t = tmp[:m]
            np.add(_BASE[:m], np.uint64(a), out=t)
            t *= k
            t += c
            t >>= np.uint64(29)
            o = out[a - s:a - s + m]
            if op is None:
                o[...] = t
            elif op == "sum":
                o += t.astype(np.uint8)  # uint8: mod 256, as int8 two's complement too
            else:
                o ^= t.astype(np.uint8)


def make_input(r: int, s: int, e: int) -> np.ndarray:
    out = np.empty(e - s, np.uint8)
    _h(r, s, e, out)
    return out


def expected(p: int, op: str, s: int, e: int) -> np.ndarray:
    acc = make_input(0, s, e)
    for r in range(1, p):
        _h(r, s, e, acc, op)
    return acc


def meminfo() -> dict[str, int]:
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0]) * 1024
    return out


def status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


def reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def fmt(b: float) -> str:
    return f"{b / GiB:.3f} GiB"


def spot_slices(n: int, p: int, ndims: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    pts = {0, n}
    parts = 2 * ndims * p
    pts.update(k * n // parts for k in range(parts + 1))
    pts.update(x for x in (1 << 31, 1 << 32) if x < n)
    sl = [(max(0, q - 4096), min(n, q + 4096)) for q in sorted(pts)]
    for _ in range(8):
        a = int(rng.integers(0, max(1, n - (1 << 20))))
        sl.append((a, min(n, a + (1 << 20))))
    return sl


def measure(comm: MPI.Intracomm, fn) -> dict:
    """Run fn() with the RSS peak reset and tracemalloc on; what the call added."""
    comm.Barrier()
    rss0 = status("VmRSS")
    peak_ok = reset_peak_rss()
    tracemalloc.start()
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    hwm = status("VmHWM")
    comm.Barrier()
    return {"seconds": dt, "rss_before": rss0, "rss_added": (hwm - rss0) if peak_ok else -1,
            "numpy_peak": traced_peak, "rss_after": status("VmRSS")}


def check(comm: MPI.Intracomm, out: np.ndarray, p: int, op: str, ndims: int, full: bool, what: str) -> bool:
    n = len(out)
    u = out.view(np.uint8)
    bad = []
    slices = spot_slices(n, p, ndims, np.random.default_rng(7))
    for a, b in slices:
        if a < b and not np.array_equal(u[a:b], expected(p, op, a, b)):
            i = a + int(np.flatnonzero(u[a:b] != expected(p, op, a, b))[0])
            bad.append(f"spot slice [{a}, {b}): first wrong element [{i}]")
    crc = 0
    t0 = time.perf_counter()
    for s in range(0, n, CHUNK):
        e = min(n, s + CHUNK)
        crc = zlib.crc32(u[s:e], crc)
        if full and not bad and not np.array_equal(u[s:e], expected(p, op, s, e)):
            i = s + int(np.flatnonzero(u[s:e] != expected(p, op, s, e))[0])
            bad.append(f"full check: first wrong element [{i}]")
    crcs = comm.allgather(crc)
    if len(set(crcs)) != 1:
        bad.append(f"result differs between ranks (crc32 {crcs})")
    allbad = comm.allgather(bad)
    if comm.Get_rank() == 0:
        for r, b in enumerate(allbad):
            for line in b[:5]:
                print(f"  {what} rank {r}: {line}", flush=True)
        ok = not any(allbad)
        print(f"  {what}: {'OK' if ok else 'WRONG'} ({'full + ' if full else ''}{len(slices)} "
              f"spot slices, crc32 {crcs[0]:#010x} on all ranks: {len(set(crcs)) == 1}, "
              f"check {time.perf_counter() - t0:.0f} s)", flush=True)
    return not any(allbad)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=(1 << 31) + 7, help="elements (default 2^31 + 7)")
    ap.add_argument("--dtype", choices=["uint8", "int8"], default="uint8")
    ap.add_argument("--op", choices=["sum", "bxor"], default="sum")
    ap.add_argument("--algorithm", default="swing-bw")
    ap.add_argument("--dims", default=None, help="torus dims (default: a ring of all ranks)")
    ap.add_argument("--in-place", action="store_true", help="MPI.IN_PLACE (one vector less per rank)")
    ap.add_argument("--native", action="store_true", help="also run comm.Allreduce and measure it")
    ap.add_argument("--quick", action="store_true", help="spot slices only, no full check")
    args = ap.parse_args()

    import swing_mpi
    from swing_mpi.state import comm_state, dims_for

    comm = MPI.COMM_WORLD
    p, rank = comm.Get_size(), comm.Get_rank()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local = node.Get_size()
    n = args.count
    vec = n  # one byte per element
    per_rank = vec * (1 if args.in_place else 2) + vec
    need = local * per_rank + 256 * (1 << 20)
    refuse = ""
    if node.Get_rank() == 0:
        avail = meminfo().get("MemAvailable", 0)
        if avail < need:
            refuse = (f"large_count: not enough memory on {MPI.Get_processor_name()}: {local} rank(s) x "
                      f"({'1' if args.in_place else '2'} vector(s) + 1 vector for temporaries) of "
                      f"{fmt(vec)} = {fmt(need)} needed with margin, MemAvailable is {fmt(avail)}. "
                      f"Use a smaller --count, --in-place, or fewer ranks per node.")
    refusals = [x for x in comm.allgather(refuse) if x]
    if refusals:
        if rank == 0:
            print(refusals[0], file=sys.stderr, flush=True)
        return 2
    if rank == 0:
        print(f"large_count: p={p} count={n} (2^31 {'+' if n >= 1 << 31 else '-'} "
              f"{abs(n - (1 << 31))}) {args.dtype} {args.op.upper()} {args.algorithm} "
              f"{'in place' if args.in_place else 'out of place'}; vector {fmt(vec)}; "
              f"MemAvailable {fmt(meminfo()['MemAvailable'])}, need {fmt(need)}", flush=True)
    dt = np.dtype(args.dtype)
    op = MPI.SUM if args.op == "sum" else MPI.BXOR
    dims = dims_for(comm, args.dims)

    t0 = time.perf_counter()
    x = np.empty(n, dt)
    xu = x.view(np.uint8)
    for s in range(0, n, CHUNK):
        _h(rank, s, min(n, s + CHUNK), xu[s:min(n, s + CHUNK)])
    if args.in_place:
        out, send = x, MPI.IN_PLACE
    else:
        out = np.empty(n, dt)
        out.fill(0)  # touched (np.zeros would not): its pages count in the RSS before the call
        send = x
    if rank == 0:
        print(f"  inputs generated in {time.perf_counter() - t0:.0f} s; RSS {fmt(status('VmRSS'))} per rank",
              flush=True)

    # warm-up: the private communicator, imports and first messages are not the vector's cost
    w = np.ones(4096, dt)
    swing_mpi.allreduce(comm, MPI.IN_PLACE, w, op, algorithm=args.algorithm, dims=args.dims)
    MPI.Intracomm.Allreduce(comm, MPI.IN_PLACE, w, op)
    comm_state(comm).plans.clear()
    m = measure(comm, lambda: swing_mpi.allreduce(comm, send, out, op, algorithm=args.algorithm,
                                                  dims=args.dims))
    st = comm_state(comm)
    m["plan_scratch"] = sum(pl.scratch.nbytes + pl.slot_work.nbytes for pl in st.plans.values())
    ok = check(comm, out, p, args.op, len(dims), not args.quick, f"swing_mpi {args.algorithm}")
    if not args.in_place:
        same = all(np.array_equal(xu[s:min(n, s + CHUNK)], make_input(rank, s, min(n, s + CHUNK)))
                   for s in range(0, n, CHUNK))
        if not all(comm.allgather(same)):
            ok = False
            if rank == 0:
                print("  the send buffer was modified", flush=True)
    st.plans.clear()  # give the cached plan's scratch back before the native run
    results = [("swing_mpi " + args.algorithm, m)]
    if args.native:
        if args.in_place:
            for s in range(0, n, CHUNK):
                _h(rank, s, min(n, s + CHUNK), xu[s:min(n, s + CHUNK)])
        else:
            out[...] = 0
        mn = measure(comm, lambda: MPI.Intracomm.Allreduce(comm, send, out, op))
        mn["plan_scratch"] = 0
        ok = check(comm, out, p, args.op, len(dims), not args.quick, "native MPI_Allreduce") and ok
        results.append(("native", mn))

    allres = comm.gather(results, root=0)
    if rank == 0:
        print(f"\n  {'what':<18} {'rank':>4} {'seconds':>8} {'GB/s':>6} {'RSS before':>12} "
              f"{'RSS added':>12} {'x vec':>6} {'numpy peak':>12} {'x vec':>6} {'plan scratch':>12} {'x vec':>6}")
        for r, res in enumerate(allres):
            for what, mm in res:
                print(f"  {what:<18} {r:>4} {mm['seconds']:>8.2f} {vec / mm['seconds'] / 1e9:>6.2f} "
                      f"{fmt(mm['rss_before']):>12} {fmt(mm['rss_added']):>12} {mm['rss_added'] / vec:>6.2f} "
                      f"{fmt(mm['numpy_peak']):>12} {mm['numpy_peak'] / vec:>6.2f} "
                      f"{fmt(mm['plan_scratch']):>12} {mm['plan_scratch'] / vec:>6.2f}")
        print(f"\nlarge_count: {'PASSED' if ok else 'FAILED'}", flush=True)
    node.Free()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
