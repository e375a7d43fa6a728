"""The pieces every ``swing-mpi`` subcommand shares: one vocabulary, deprecated spellings, one message per job.

* :class:`Parser`: an ``ArgumentParser`` whose usage errors and deprecation notices
  are printed by one rank of an ``mpiexec`` job only (:func:`job_rank`), not once per rank.
* :func:`deprecated`: an old option spelling that still works for one release,
  converted to the new option's value, with a one-line notice on stderr.
* :func:`add_collective`, :func:`collective_name`: ``--collective`` with one spelling
  (``allreduce``, ``reduce_scatter``, ``allgather``; ``reduce_scatter_block`` accepted).
* :func:`say`: a message on stderr from rank 0 of the job only.
* :func:`time_option`: an option's ``type`` for a time with its unit (``500ms``), a bare
  number in the unit its help states.

No MPI is imported: the rank comes from the launcher's environment.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

__all__ = ["Parser", "job_rank", "say", "deprecated", "add_collective", "collective_name", "COLLECTIVES",
           "COLLECTIVE_ALIASES", "split_names", "time_option"]

_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_RANK", "SLURM_PROCID")

COLLECTIVES = ("allreduce", "reduce_scatter", "allgather")
"""``--collective``'s names: the all-reduce and its two halves as collectives of their own."""
COLLECTIVE_ALIASES = {"reduce_scatter_block": "reduce_scatter"}
"""Other spellings ``--collective`` accepts (MPI's name of the equal-block reduce-scatter)."""


def job_rank() -> int:
    """Return this process's rank in its ``mpiexec`` job, from the launcher's environment (0 outside a job)."""
    for var in _RANK_VARS:
        value = os.environ.get(var, "")
        if value.strip().isdigit():
            return int(value)
    return 0


def say(msg: str) -> None:
    """Print ``msg`` on stderr, from rank 0 of the job only (every rank would print the same line)."""
    if job_rank() == 0:
        print(msg, file=sys.stderr, flush=True)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that prints its usage errors on rank 0 of a job only (every rank still exits 2)."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and ``message`` on rank 0; exit 2 on every rank."""
        if job_rank() == 0:
            self.print_usage(sys.stderr)
            print(f"{self.prog}: error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)


class _Deprecated(argparse.Action):
    """An old spelling of an option: sets the new option's ``dest`` from ``convert(value)`` and says so once."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, convert: Callable[[Any], Any],
                 example: Callable[[Any], str], **kw: Any) -> None:
        self.new, self.convert, self.example = new, convert, example
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        try:
            value = self.convert(values)
        except ValueError as e:
            parser.error(f"argument {option_string}: {e}")
        setattr(namespace, self.dest, value)
        say(f"{parser.prog}: warning: {option_string} is deprecated and will be removed in the next release; "
            f"use {self.example(values)}")


def deprecated(parser: Any, *flags: str, dest: str, new: str, convert: Callable[[Any], Any] = lambda v: v,
               example: Callable[[Any], str] | None = None, **kw: Any) -> None:
    """Add ``flags`` as an old spelling of the option ``new`` (whose value lands in ``dest``).

    ``convert`` turns the old value into what the new option would have parsed to
    (e.g. ``"40"`` of ``--link-mbps`` into ``"40M"`` of ``--link``); ``example``
    writes the new spelling for the notice. Hidden from ``--help`` (docs/cli.md lists them).
    """
    ex = example or (lambda v: f"{new} {convert(v)}")
    parser.add_argument(*flags, dest=dest, action=_Deprecated, new=new, convert=convert, example=ex,
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw)


def collective_name(text: str) -> str:
    """Return ``--collective``'s value in its one spelling (``reduce_scatter_block`` → ``reduce_scatter``)."""
    name = COLLECTIVE_ALIASES.get(text.strip(), text.strip())
    if name not in COLLECTIVES:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r} (choose from {', '.join(COLLECTIVES)}; reduce_scatter_block is "
            "accepted for reduce_scatter)")
    return name


def add_collective(parser: Any, *, help: str, choices: Sequence[str] = COLLECTIVES) -> None:
    """Add ``--collective`` (default ``allreduce``) taking ``choices`` and ``reduce_scatter_block``."""
    def parse(text: str) -> str:
        name = collective_name(text)
        if name not in choices:
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(choices)})")
        return name

    parse.__name__ = "collective"
    parser.add_argument("--collective", type=parse, default="allreduce", metavar="{" + ",".join(choices) + "}",
                        help=help + " (reduce_scatter_block is accepted for reduce_scatter)"
                        if "reduce_scatter" in choices else help)


def split_names(spec: str | Sequence[str] | None) -> list[str]:
    """Names from a comma list or from repeated options (``["a,b", "c"]``), in order, without duplicates."""
    if spec is None:
        return []
    items = [spec] if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for item in items:
        for name in item.split(","):
            name = name.strip()
            if name and name not in out:
                out.append(name)
    return out


def time_option(flag: str, *, bare: str = "s") -> Callable[[str], float]:
    """Return an argparse ``type`` reading a time with its unit (``"500ms"``, ``"2s"``) into seconds.

    A bare number is read in ``bare`` (the unit the option's help states); the message of a bad
    value names ``flag``.
    """
    from .units import parse_time

    def parse(text: str) -> float:
        try:
            return parse_time(text, flag, bare=bare)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = "time"
    return parse
