"""The TCP traffic agent that measures a lab's link rates with plain sockets (no MPI).

:func:`blast` starts one agent per node involved, each inside its node's namespace
(a fresh interpreter running :func:`agent_main` with a JSON config); every agent accepts one connection from
each of its senders, sends to each of its receivers, and reports the bytes per second
it received from each sender inside a common measuring window. Every agent first
listens and says ``ready``; only when all are ready does :func:`blast` hand them one
common start time (interpreters start slowly on a busy machine with 64 nodes). Counting
only after a warm-up lets TCP reach its steady rate, so the numbers say what the token
buckets allow, not how fast connections open.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .plan import LabPlan
from .system import LabError

__all__ = ["AGENT_PORT", "blast", "agent_main"]

#: TCP port every agent listens on (inside its own namespace, so it never clashes with the host).
AGENT_PORT = 47011

# ``-c`` rather than ``-m``: the package imports this module, and runpy warns about that.
_ENTRY = "import sys; from swing_mpi.lab.agent import agent_main; sys.exit(agent_main())"


def blast(plan: LabPlan, flows: Sequence[tuple[int, int]], seconds: float, *, warm: float = 0.5) -> list[float]:
    """Run TCP flows ``(src, dst)`` between the nodes of ``plan`` at once; return the MB/s each receives.

    The lab of ``plan`` must be built. Raises :class:`~swing_mpi.lab.system.LabError`
    when an agent fails (a connection refused means a route or link is broken).
    """
    nodes = sorted({n for f in flows for n in f})
    procs: dict[int, subprocess.Popen] = {}
    pkg_parent = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        for r in nodes:
            cfg = {
                "addr": plan.address(r),
                "port": AGENT_PORT,
                "recv_from": [plan.address(s) for s, d in flows if d == r],
                "send_to": [plan.address(d) for s, d in flows if s == r],
                "warm": warm,
                "seconds": seconds,
            }
            argv = ["ip", "netns", "exec", plan.namespace(r), sys.executable, "-c", _ENTRY, json.dumps(cfg)]
            procs[r] = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
        for r, p in procs.items():  # every agent listens before anyone sends
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                p.wait(timeout=10)
                err = p.stderr.read() if p.stderr else ""
                raise LabError(f"rate agent in {plan.namespace(r)} did not start: {err.strip()[-2000:]}")
        start = time.time() + 0.5
        for p in procs.values():
            assert p.stdin is not None
            p.stdin.write(f"{start!r}\n")
            p.stdin.flush()
        results: dict[int, dict[str, float]] = {}
        deadline = start + warm + seconds + 20
        for r, p in procs.items():
            out, err = p.communicate(timeout=max(1.0, deadline - time.time()))  # closes stdin too
            if p.returncode != 0:
                raise LabError(f"rate agent in {plan.namespace(r)} failed: {err.strip()[-2000:]}")
            results[r] = json.loads(out)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    return [results[d].get(plan.address(s), 0.0) / 1e6 for s, d in flows]


def agent_main(argv: Sequence[str] | None = None) -> int:
    """Run one node's agent: config JSON in ``argv[0]`` (default ``sys.argv[1]``), rates JSON on stdout.

    Listens, prints ``ready``, reads the start time (seconds since the epoch) from
    stdin, then receives one connection from each ``recv_from`` address and sends to
    each ``send_to`` address from ``start`` until ``start + warm + seconds``; prints the
    bytes per second received from each sender within ``[start + warm, start + warm +
    seconds]``. Returns 1 (errors on stderr) when a connection fails.
    """
    cfg: dict[str, Any] = json.loads((sys.argv[1:] if argv is None else list(argv))[0])
    warm, secs = cfg["warm"], cfg["seconds"]
    counted: dict[str, int] = {}
    errors: list[str] = []
    lock = threading.Lock()

    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((cfg["addr"], cfg["port"]))
    srv.listen(64)
    print("ready", flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        return 1  # the driver gave up before the start
    start = float(line)
    w0, w1 = start + warm, start + warm + secs
    srv.settimeout(max(5.0, w1 - time.time() + 5))

    def receiver(conn: socket.socket, peer: str) -> None:
        buf = bytearray(1 << 20)
        n_in = 0
        conn.settimeout(w1 - time.time() + 10)
        try:
            while True:
                k = conn.recv_into(buf)
                if not k:
                    break
                now = time.time()
                if w0 <= now <= w1:
                    n_in += k
                if now > w1:
                    break
        except OSError as e:
            with lock:
                errors.append(f"recv from {peer}: {e}")
        finally:
            conn.close()
        with lock:
            counted[peer] = counted.get(peer, 0) + n_in

    def acceptor() -> None:
        threads = []
        try:
            for _ in cfg["recv_from"]:
                conn, (peer, _) = srv.accept()
                th = threading.Thread(target=receiver, args=(conn, peer))
                th.start()
                threads.append(th)
        except OSError as e:
            with lock:
                errors.append(f"accept: {e}")
        for th in threads:
            th.join()

    def sender(dst: str) -> None:
        payload = b"\0" * (256 << 10)
        time.sleep(max(0.0, start - time.time()))
        s = None
        while s is None:
            try:
                s = socket.create_connection((dst, cfg["port"]), timeout=2, source_address=(cfg["addr"], 0))
            except OSError as e:
                if time.time() > start + 3:
                    with lock:
                        errors.append(f"connect to {dst}: {e}")
                    return
                time.sleep(0.05)
        s.settimeout(10)
        try:
            while time.time() < w1 + 0.1:
                s.sendall(payload)
        except OSError:
            pass  # the receiver stops reading once its window is over
        finally:
            s.close()

    acc = threading.Thread(target=acceptor)
    acc.start()
    senders = [threading.Thread(target=sender, args=(d,)) for d in cfg["send_to"]]
    for th in senders:
        th.start()
    for th in senders:
        th.join()
    acc.join()
    srv.close()
    if errors:
        print("; ".join(errors), file=sys.stderr)
        return 1
    print(json.dumps({peer: b / secs for peer, b in counted.items()}))
    return 0
