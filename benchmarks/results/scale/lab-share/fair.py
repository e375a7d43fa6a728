"""Re-shape this rank's lab node so that each port shares its link evenly between source nodes.

Run by every rank of a lab, in its own namespace, before the program (as root):

    swing-mpi lab --dims D ... -n P -- bash -c "python benchmarks/results/scale/lab-share/fair.py && exec PROGRAM"

Each port's token bucket (``tbf rate R burst B``) becomes an HTB class of rate R and burst B with one
child class per source node (rate R/P, ceiling R, a 2 MB FIFO each) chosen by the packet's source
address: the port serves the sources that have packets waiting in turn (deficit round robin), so a
flow the node forwards no longer takes the link from the node's own. An experiment, not a lab option.
"""

import os
import re
import subprocess

from swing_mpi.lab.plan import node_address

p = int(os.environ.get("PMI_SIZE") or os.environ["OMPI_COMM_WORLD_SIZE"])
me = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True).stdout
net = int(re.search(r"inet 10\.(\d+)\.", me).group(1))
lines = []
for dev in sorted(set(re.findall(r"^\d+: (\S+)\s+inet 10\.", me, re.M))):
    tbf = subprocess.run(["tc", "qdisc", "show", "dev", dev], capture_output=True, text=True, check=True).stdout
    rate, burst = re.search(r"rate (\S+) burst (\S+)", tbf).groups()
    bits = float(rate[:-4]) * {"K": 1e3, "M": 1e6, "G": 1e9}[rate[-4]] if rate[-4] in "KMG" else float(rate[:-3])
    lines += [f"qdisc del dev {dev} root",
              f"qdisc add dev {dev} root handle 1: htb default ffff",
              f"class add dev {dev} parent 1: classid 1:1 htb rate {rate} ceil {rate} burst {burst} cburst {burst}",
              f"class add dev {dev} parent 1:1 classid 1:ffff htb rate {bits / p / 1e3:.0f}kbit ceil {rate} "
              f"quantum 65536 burst 70k cburst 70k"]
    for s in range(p):
        cid = f"{s + 16:x}"
        lines += [f"class add dev {dev} parent 1:1 classid 1:{cid} htb rate {bits / p / 1e3:.0f}kbit ceil {rate} "
                  f"quantum 65536 burst 70k cburst 70k",
                  f"qdisc add dev {dev} parent 1:{cid} handle {s + 256:x}: bfifo limit 2000000",
                  f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip src "
                  f"{node_address(s, net=net)}/32 flowid 1:{cid}"]
subprocess.run(["tc", "-batch", "-"], input="\n".join(lines) + "\n", text=True, check=True)
