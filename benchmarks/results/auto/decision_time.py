"""First-call decision time of ``auto`` from the model (no table) on a large torus, in a fresh process.

python benchmarks/results/auto/decision_time.py 64x64 torus
"""

import sys
import time
from dataclasses import replace

from swing_mpi.choose import choose
from swing_mpi.tuning import DEFAULT_TUNING

dims = tuple(int(x) for x in sys.argv[1].split("x"))
network = sys.argv[2]
p = 1
for d in dims:
    p *= d
tuning = replace(DEFAULT_TUNING, network=network, native_below_bytes=None)
total = 0.0
print(f"# {sys.argv[1]} ({p} ranks), network {network}: first decision per size, in order, one process")
for n in (8, 1 << 10, 64 << 10, 1 << 20, 16 << 20):
    t0 = time.perf_counter()
    pick = choose(p, dims, max(1, n // 8), 8, exact=False, commutative=True, tuning=tuning)
    dt = time.perf_counter() - t0
    total += dt
    t0 = time.perf_counter()
    choose(p, dims, max(1, n // 8) + 1, 8, exact=False, commutative=True, tuning=tuning)
    again = time.perf_counter() - t0
    print(f"{n:>9} B -> {pick:<16} first {dt * 1e3:8.1f} ms   a new size after it {again * 1e6:7.1f} us")
print(f"total {total:.2f} s")
