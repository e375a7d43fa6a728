#!/usr/bin/env python3
"""``rank_logs.py DIR CMD…``: run CMD with this MPI rank's output in DIR/rank<N>.log."""
import os
import sys

rank = os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0"
log = os.path.join(sys.argv[1], f"rank{rank}.log")
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(fd, 1)
os.dup2(fd, 2)
os.execv(sys.argv[2], sys.argv[2:])
