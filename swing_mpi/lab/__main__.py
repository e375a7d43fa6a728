"""``python -m swing_mpi.lab``: see :mod:`swing_mpi.lab.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
