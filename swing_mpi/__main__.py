"""``python -m swing_mpi``: the ``swing-mpi`` command line."""
import sys

from .cli import main

sys.exit(main())
