import sys
from mpi4py import MPI
from swing_mpi import bench

def counters():
    out = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = open(path).read().splitlines()
        for a, b in zip(lines[::2], lines[1::2]):
            ka, kb = a.split(), b.split()
            for k, v in zip(ka[1:], kb[1:]):
                out[ka[0] + k] = int(v)
    return out

import os, subprocess
comm = MPI.COMM_WORLD
for kv in os.environ.get("LAB_SYSCTLS", "").split():
    subprocess.run(["sysctl", "-q", "-w", kv], check=True)
if os.environ.get("LAB_TBF_LATENCY"):
    for dev in os.listdir("/sys/class/net"):
        if dev != "lo":
            subprocess.run(["tc", "qdisc", "change", "dev", dev, "root", "tbf", "rate", os.environ["LAB_RATE"],
                            "burst", "256kb", "latency", os.environ["LAB_TBF_LATENCY"]], check=True)
comm.Barrier()
keys = ["Tcp:RetransSegs", "TcpExt:TCPTimeouts", "TcpExt:TCPLossProbes", "TcpExt:TCPFastRetrans", "Tcp:OutSegs",
        "TcpExt:TCPSpuriousRTOs", "Ip:ForwDatagrams"]
before = counters()
rc = bench.main(sys.argv[1:])
after = counters()
d = {k: after.get(k, 0) - before.get(k, 0) for k in keys}
tot = comm.gather(d)
if comm.rank == 0:
    print("NETSTAT", {k: sum(x[k] for x in tot) for k in keys}, flush=True)
