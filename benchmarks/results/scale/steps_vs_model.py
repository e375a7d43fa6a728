"""One algorithm on one shape at 512 MiB, alpha 0: the simulator's time per global step beside the model's.

    python benchmarks/results/scale/steps_vs_model.py recdoub-mirrored 64x16 > benchmarks/results/scale/steps-recdoub-mirrored-64x16.txt

The model prices step k as the busiest link's bytes of step k with every lane in lockstep; the
simulator lets each lane (and rank) go on as soon as its own step is done, as the executor does.
A simulated step here is the time from the end of step k-1 on every lane to the end of step k on
every lane.
"""

import sys

from swing_mpi.model import analyze
from swing_mpi.netsim import SimParams, simulate
from swing_mpi.topology import parse_dims

alg, dims = sys.argv[1], parse_dims(sys.argv[2])
n = 512 << 20
p = SimParams(alpha_s=0.0)
a = analyze(alg, dims)
r = simulate(alg, dims, n, params=p)
bw = p.link_bytes_per_s
model = a.time(n, alpha=0.0, link_bytes_per_s=bw)
print(f"# {alg} on {sys.argv[2]}, 512 MiB, 400 Gb/s, alpha 0: simulated {r.time_s * 1e3:.3f} ms, "
      f"model {model * 1e3:.3f} ms, sim/model {r.time_s / model:.4f}")
print(f"{'step':>4} {'phase':<15} {'hops':>4} {'model (ms)':>10} {'sim (ms)':>9} {'sim/model':>9}")
for i, k in enumerate(r.steps):
    st = a.steps[k]
    m = st.link * n / bw
    print(f"{k:4d} {r.phases[i]:<15} {st.hops:4d} {m * 1e3:10.3f} {r.step_times[i] * 1e3:9.3f} "
          f"{r.step_times[i] / m:9.3f}")
