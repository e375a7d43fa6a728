r"""``swing-mpi bench``: our collectives against the MPI library's own, side by side.

Run under mpiexec, one process per rank::

    mpiexec -n 4 python -m mpi4py -m swing_mpi bench --quick
    mpiexec -n 16 python -m mpi4py -m swing_mpi bench --dims 4x4 --sizes 8:16M \
        --csv out.csv --json out.json --plot out.png
    mpiexec -n 4 python -m mpi4py -m swing_mpi bench --collective reduce_scatter_block --quick

``--collective`` is ``allreduce`` (default), ``reduce_scatter_block`` or
``allgather``. The size of a point is always the full vector: the
allreduce's vector, the reduce-scatter's input, the all-gather's output
(rounded down to a whole element per rank for the last two; their ``count``
column is the elements per rank, as in nccl-tests).

Measurement (OSU / nccl-tests style). Sizes are the outer loop. For each
size, every algorithm gets one checked call and ``--warmup`` calls, then the
timed calls run round robin (iteration ``i`` of every algorithm, then
``i+1``, in a new order each iteration, the same on every rank;
``--blocked`` for one algorithm after the other), so machine noise hits all
algorithms of a size alike. The orders put every algorithm right after every
other equally often (:func:`~swing_mpi.bench.timing.shuffled`, seeded afresh
each launch): a call timed right after a heavy one runs slower (in the 3x4 lab
at 256 KiB, 1.5x after MPICH's default), and one shuffle per iteration from a
fixed seed had put one algorithm after MPICH's in half its calls, in every launch. Each algorithm has its own send and
receive arrays up to 1 MiB, as each call site of an application has, every
array at the start of pages of its own, so no algorithm gets a better place in
memory by being set up first (the same ``MPI_Allreduce`` of 1 MiB at p = 4
ran 25 % faster or slower depending on where the allocator had put its
arrays). Each timed call is bracketed by ``comm.Barrier()`` (with
``SWING_MPI_WAIT=backoff``, the lab's setting, a nonblocking barrier waited on
sleeping, :func:`~swing_mpi.bench.timing.barrier`); an iteration's time is the
maximum over ranks (the local times are reduced with MAX after the loop).
``--batch K`` makes an iteration K back-to-back calls from one barrier, its
time per call (a program's loop of calls, as nccl-tests time it: one
barrier's exit skew spread over K calls instead of paid by each).
``--settle K`` puts K untimed calls of the same algorithm right before each
timed one (each from a barrier, as the timed one), so it finds the links in
the state its own calls leave (a rate limiter's burst, a queue), not the
previous algorithm's. On shared memory at
8 B-1 KiB even settled calls ran slower right after a switch of algorithm
(the same ``MPI_Allreduce`` called by ``auto`` and directly: 5-40 % in every
launch): to compare two algorithms that closely, give each a turn of several
calls in a row (``--streak K``: only the first follows a switch) or time them
``--blocked``.
``--start sync`` starts every rank's timed call at one instant agreed after
the barrier, on the clock all processes of one host share, and times each
rank from that instant (:class:`~swing_mpi.bench.timing.SyncStart`, as
ReproMPI times collectives): a barrier's exits spread over 36-240 ms among 64
ranks on 2 cores in the 8x8 lab, and from its own exit each rank's call is
charged that spread. A rank that wakes late is still charged its lateness.
``--start auto`` (the default) takes ``sync`` where all ranks run on one host
and wait sleeping (``backoff``: more ranks than cores that share no memory, the
lab), ``barrier`` elsewhere (:func:`~swing_mpi.bench.timing.auto_start`); the
header says which and why.
``iters`` shrinks for large or slow points (at most ``--max-bytes`` moved and
about ``--max-time`` seconds per point, estimated from the warmup; never below
3 unless ``--iters`` is lower). Reported: avg/min/max/median time,
``algbw = size/t`` on the median and ``busbw`` by nccl-tests' convention
(allreduce ``algbw·2(p−1)/p``, reduce-scatter and all-gather
``algbw·(p−1)/p``), the ratio of the median to ``native``'s at the same
size, and ``#wrong``.

Validation: inputs differ per rank (seeded random numbers); the checked call
is compared with MPI's own collective (``comm.Allreduce``,
``comm.Reduce_scatter_block``, ``comm.Allgather``) on the same input: exact
for integers, exact ops and the all-gather, a relative tolerance of
``8·p·eps`` for floating-point SUM/PROD on positive data. Where every rank
holds the same result (allreduce, all-gather) it is also compared with rank
0's bit for bit. ``#wrong`` is the number of wrong elements summed over ranks
(a modified send buffer counts too).

``native`` is MPI's own collective (mpi4py → ``MPI_Allreduce`` …). MPICH
chooses its algorithm at ``MPI_Init`` from ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM``,
so one launch measures one MPICH algorithm: ``benchmarks/sweep.py`` launches
one run per forced algorithm and merges them (``--label mpich-ring`` names
the native rows of such a run).

Modules, none importing one listed before it: :mod:`~swing_mpi.bench.cli` (the parser, run),
:mod:`~swing_mpi.bench.measure` (validation, the sweep), :mod:`~swing_mpi.bench.options` (the
options' defaults, :class:`Config`), :mod:`~swing_mpi.bench.timing` (the timed
calls: start, order, times), :mod:`~swing_mpi.bench.points` (points, their buffers,
iterations), :mod:`~swing_mpi.bench.memory` (leaves out
what a point's buffers cannot hold), :mod:`~swing_mpi.bench.plot` (matplotlib),
:mod:`~swing_mpi.bench.results` (table, files, derived columns). MPI is
imported only while measuring: parsing, formatting and plotting work without it.
"""

from __future__ import annotations

from .cli import (
    DEFAULT_ITERS,
    DEFAULT_SIZES,
    DEFAULT_WARMUP,
    DTYPES,
    OPS,
    QUICK_SIZES,
    Config,
    add_arguments,
    build_parser,
    main,
    parse_algorithms,
    registered_algorithms,
    run,
)
from .measure import iterations_for, point_sizes, run_bench
from .plot import plot_results, plot_title
from .results import (
    COLLECTIVES,
    FIELDS,
    add_model_times,
    add_vs_native,
    env_header_lines,
    format_header,
    format_row,
    format_table,
    model_algorithm,
    native_medians,
    read_results,
    set_vs_native,
    write_csv,
    write_json,
)

__all__ = [
    "add_arguments", "build_parser", "run", "main", "Config", "run_bench",
    "parse_algorithms", "registered_algorithms", "iterations_for", "point_sizes",
    "QUICK_SIZES", "DEFAULT_SIZES", "DEFAULT_ITERS", "DEFAULT_WARMUP", "DTYPES", "OPS", "COLLECTIVES", "FIELDS",
    "format_header", "format_row", "format_table", "env_header_lines",
    "write_csv", "write_json", "read_results",
    "add_vs_native", "native_medians", "set_vs_native", "model_algorithm", "add_model_times",
    "plot_results", "plot_title",
]
