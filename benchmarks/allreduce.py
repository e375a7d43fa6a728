#!/usr/bin/env python3
"""Allreduce benchmark, run under mpiexec: the same code and options as ``swing-mpi bench``.

    mpiexec -n 4 python -m mpi4py benchmarks/allreduce.py --quick
    mpiexec -n 16 python -m mpi4py benchmarks/allreduce.py --dims 4x4 --sizes 8:16M --plot out.png
    mpiexec -n 4 python -m mpi4py benchmarks/allreduce.py --collective allgather --quick

See ``benchmarks/README.md`` and ``python benchmarks/allreduce.py --help``.
"""

import os
import sys

try:
    import swing_mpi  # noqa: F401
except ImportError:  # a checkout that is not installed: use the tree this file is in
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from swing_mpi.bench import build_parser, run


def main(argv=None):
    return run(build_parser("benchmarks/allreduce.py").parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
