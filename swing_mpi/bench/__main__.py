"""``python -m swing_mpi.bench``: the same as ``swing-mpi bench``."""

import sys

from .cli import main

sys.exit(main())
