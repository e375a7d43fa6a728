"""Run-time configuration: every ``SWING_MPI_*`` variable, parsed and checked in one place.

:data:`rc` holds them as typed attributes, in the style of ``mpi4py.rc``. They are read once,
when ``swing_mpi`` is imported (as MPI libraries read theirs at ``MPI_Init``); a program or test
that sets variables later calls :meth:`Config.reload`, or assigns an attribute (``swing_mpi.rc.timeout
= 30``; the value is checked as the variable's text would be). Modules read :data:`rc` where they use
a value, or when they build something that keeps it (a plan keeps ``timeout`` and ``datatypes``; a
communicator's state keeps the wait policy and the tuning), so a change reaches the next such object.

A bad value raises ``ValueError`` naming the variable and what it accepts, at import, except for
``SWING_MPI_NETWORK`` and ``SWING_MPI_TRIAL``: rank 0's values count on every rank, so those
raise where they are used (on rank 0, and from there on every rank). No MPI is imported here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Config", "rc", "VARIABLES", "WAITS", "NETWORKS", "CONTEXTS", "ON", "OFF", "parse_timeout",
           "parse_sleep_us", "parse_wait", "ENGINES", "DEFAULT_SEGMENT", "parse_engine", "parse_threads",
           "parse_segment", "parse_switch", "parse_network", "parse_contexts", "parse_ranks_per_node",
           "parse_node_chunk", "DEFAULT_NODE_CHUNK"]

WAITS = ("yield", "spin", "backoff")
"""Wait policies (:mod:`swing_mpi.waiting`); ``auto`` (or unset) picks one per communicator."""
NETWORKS = ("torus", "flat")
"""Network kinds the cost model knows (``$SWING_MPI_NETWORK``)."""
CONTEXTS = ("raw", "thread", "ucontext", "boost")
"""SimGrid's context factories (``$SWING_MPI_SIMGRID_CONTEXTS``, :mod:`swing_mpi.netsim.engine`)."""
DEFAULT_SEGMENT = 1 << 20
"""Bytes of a segment when ``$SWING_MPI_SEGMENT`` is unset: a longer message goes as several, each
reduced as soon as it is in while the next ones are on the wire."""
DEFAULT_NODE_CHUNK = 32 << 10
"""Bytes a node's lane gets at least when ``$SWING_MPI_NODE_CHUNK`` is unset: a vector of ``n`` bytes runs
the torus phase on ``min(K, n // chunk)`` of a node's ``K`` ranks (:mod:`swing_mpi.nodes`)."""
ENGINES = ("auto", "c", "python")
"""Executors (``$SWING_MPI_ENGINE``): the compiled core where it loads (``auto``), insisted on, or never."""
ON = ("on", "1", "yes", "true")
OFF = ("off", "0", "no", "false")


def parse_switch(name: str, text: str | None, default: bool) -> bool:
    """Return an on/off variable's value (``default`` if unset or empty)."""
    v = (text or "").strip().lower()
    if not v:
        return default
    if v in ON:
        return True
    if v in OFF:
        return False
    raise ValueError(f"${name}={text!r} is not understood; expected one of: {', '.join(ON + OFF)}")


def parse_timeout(text: str | None) -> float | None:
    """Return the seconds in ``$SWING_MPI_TIMEOUT`` (None: off, also for ``""``, ``0`` or ``off``)."""
    text = (text or "").strip().lower()
    if text in ("", "0", "off", "none", "no"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"SWING_MPI_TIMEOUT={text!r}: expected seconds, e.g. 30 or 0.5") from None
    if seconds == 0:
        return None
    if not 0 < seconds < math.inf:
        raise ValueError(f"SWING_MPI_TIMEOUT={text!r}: expected a positive number of seconds")
    return seconds


def parse_wait(text: str | None) -> str | None:
    """Return ``$SWING_MPI_WAIT``: one of :data:`WAITS`, or None (unset, empty or ``auto``: chosen per communicator)."""
    mode = (text or "").strip()
    if mode in ("", "auto"):
        return None
    if mode not in WAITS:
        raise ValueError(f"SWING_MPI_WAIT={mode!r}: expected one of auto, {', '.join(WAITS)}")
    return mode


def parse_sleep_us(text: str | None) -> float:
    """Return ``$SWING_MPI_SLEEP_US`` (µs slept between idle polls; 0 or unset: none)."""
    if text is None or not text.strip():
        return 0.0
    try:
        us = float(text)
    except ValueError:
        us = -1.0
    if not 0 <= us < math.inf:  # also NaN
        raise ValueError(f"SWING_MPI_SLEEP_US={text!r}: expected microseconds >= 0")
    return us


def _parse_choice(name: str, what: str, choices: tuple[str, ...], text: str | None) -> str | None:
    """Return ``$name``'s value, lower case, one of ``choices`` (None if unset or empty)."""
    v = (text or "").strip().lower()
    if not v:
        return None
    if v not in choices:
        raise ValueError(f"${name}={text!r} is not {what}; expected one of: {', '.join(choices)}")
    return v


def parse_network(text: str | None) -> str | None:
    """Return ``$SWING_MPI_NETWORK`` (None if unset), one of :data:`NETWORKS`."""
    return _parse_choice("SWING_MPI_NETWORK", "a network kind", NETWORKS, text)


def parse_contexts(text: str | None) -> str | None:
    """Return ``$SWING_MPI_SIMGRID_CONTEXTS`` (None if unset: ``raw``), one of :data:`CONTEXTS`."""
    return _parse_choice("SWING_MPI_SIMGRID_CONTEXTS", "a SimGrid context factory", CONTEXTS, text)


def parse_engine(text: str | None) -> str:
    """Return ``$SWING_MPI_ENGINE``: one of :data:`ENGINES` (unset: ``auto``)."""
    return _parse_choice("SWING_MPI_ENGINE", "an engine", ENGINES, text) or "auto"


def parse_threads(text: str | None) -> int | None:
    """Return ``$SWING_MPI_THREADS`` (threads a rank reduces with; unset or ``auto``: the node's spare cores)."""
    v = (text or "").strip().lower()
    if v in ("", "auto"):
        return None
    if not v.isdigit() or not 1 <= int(v) <= 64:
        raise ValueError(f"SWING_MPI_THREADS={text!r}: expected auto or a whole number of threads, 1 to 64")
    return int(v)


def parse_segment(text: str | None) -> int:
    """Return ``$SWING_MPI_SEGMENT`` in bytes (messages longer than this are cut; 0: never). Default 1 MiB.

    Takes a byte count with an optional binary suffix (``256K``, ``1M``). Every rank must use the same value.
    """
    return _parse_bytes("SWING_MPI_SEGMENT", text, DEFAULT_SEGMENT, 4096,
                        expected="bytes (e.g. 1M, 262144 or 0 for no segments)",
                        too_small="a segment is at least 4096 bytes (or 0: none)")


def parse_ranks_per_node(text: str | None) -> int | None:
    """Return ``$SWING_MPI_RANKS_PER_NODE`` (each K consecutive ranks make a node; unset or ``auto``: MPI's nodes)."""
    v = (text or "").strip().lower()
    if v in ("", "auto"):
        return None
    if not v.isdigit() or int(v) < 1:
        raise ValueError(f"SWING_MPI_RANKS_PER_NODE={text!r}: expected auto or a whole number of ranks, >= 1")
    return int(v)


def parse_node_chunk(text: str | None) -> int:
    """Return ``$SWING_MPI_NODE_CHUNK`` in bytes (default 32 KiB; 0: every rank of a node always leads a lane)."""
    return _parse_bytes("SWING_MPI_NODE_CHUNK", text, DEFAULT_NODE_CHUNK, 0)


def _parse_bytes(name: str, text: str | None, default: int, least: int, *,
                 expected: str = "bytes (e.g. 32K, 1M or 65536)", too_small: str | None = None) -> int:
    """Return a byte count with an optional binary suffix (``256K``, ``1M``); ``default`` if unset.

    ``expected`` and ``too_small`` word the errors (a text that is no count; a count below ``least`` but not 0).
    """
    v = (text or "").strip().upper().removesuffix("B").removesuffix("I")
    if not v:
        return default
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1:], 1)
    digits = v[:-1] if scale > 1 else v
    if not digits.isdigit():
        raise ValueError(f"{name}={text!r}: expected {expected}")
    n = int(digits) * scale
    if 0 < n < least:
        raise ValueError(f"{name}={text!r}: {too_small or f'at least {least} bytes (or 0)'}")
    return n


def _text(text: str | None) -> str | None:
    return (text or "").strip() or None


def _model_cache(text: str | None) -> str | None:
    v = _text(text)
    return "off" if v is not None and v.lower() in ("off", "no", "0", "none") else v


# variable, attribute, parser of the text, errors deferred to the use (rank 0's value counts)
_SPEC: tuple[tuple[str, str, Callable[[str | None], Any], bool], ...] = (
    ("SWING_MPI_ALGORITHM", "algorithm", _text, False),
    ("SWING_MPI_DIMS", "dims", _text, False),
    ("SWING_MPI_CHECK", "check", lambda t: parse_switch("SWING_MPI_CHECK", t, False), False),
    ("SWING_MPI_TIMEOUT", "timeout", parse_timeout, False),
    ("SWING_MPI_WAIT", "wait", parse_wait, False),
    ("SWING_MPI_SLEEP_US", "sleep_us", parse_sleep_us, False),
    ("SWING_MPI_DATATYPES", "datatypes", lambda t: parse_switch("SWING_MPI_DATATYPES", t, True), False),
    ("SWING_MPI_TUNING", "tuning", _text, False),
    ("SWING_MPI_NETWORK", "network", parse_network, True),
    ("SWING_MPI_TRIAL", "trial", lambda t: parse_switch("SWING_MPI_TRIAL", t, True), True),
    ("SWING_MPI_MODEL_CACHE", "model_cache", _model_cache, False),
    ("SWING_MPI_ENGINE_COSTS", "engine_costs", _text, False),
    ("SWING_MPI_SIMGRID_CONTEXTS", "simgrid_contexts", parse_contexts, False),
    ("SWING_MPI_ENGINE", "engine", parse_engine, False),
    ("SWING_MPI_THREADS", "threads", parse_threads, False),
    ("SWING_MPI_SEGMENT", "segment", parse_segment, False),
    ("SWING_MPI_RANKS_PER_NODE", "ranks_per_node", parse_ranks_per_node, False),
    ("SWING_MPI_NODE_CHUNK", "node_chunk", parse_node_chunk, False),
)
VARIABLES: dict[str, str] = {var: attr for var, attr, _, _ in _SPEC}
"""Variable -> attribute of :class:`Config`."""
_COUNTS = ("threads", "segment", "ranks_per_node", "node_chunk")
"""Settings that take a whole number as well as its text."""
_PARSERS = {attr: (var, parse, deferred) for var, attr, parse, deferred in _SPEC}


class Config:
    """The values of the ``SWING_MPI_*`` variables (see docs/api.md for each one's meaning).

    Attributes:
        algorithm: default algorithm of a call (None: ``auto``).
        dims: default torus dims, as text (``"4x4"``; None: the communicator's topology or a ring).
        check: compare every collective's arguments across ranks by default.
        timeout: seconds a wait may see no progress before ``TimeoutError`` (None: forever).
        wait: ``yield``, ``spin`` or ``backoff``; None: chosen per communicator (:mod:`swing_mpi.waiting`).
        sleep_us: µs slept between idle polls of the ``yield`` policy (0: ``sched_yield`` only).
        datatypes: send several ranges as one MPI datatype (False: pack them with numpy).
        tuning: the tuning file, or ``default`` (None: the config file, else the built-in constants).
        network: ``torus`` or ``flat``, overriding the tuning's network kind (None: keep it).
        trial: ``auto`` tries close contenders on a size's first calls.
        model_cache: folder of the model's coefficient cache, ``off``, or None (the user cache folder).
        engine_costs: the engine preset's file (:mod:`swing_mpi.probe`; None: the user config folder's).
        simgrid_contexts: SimGrid's context factory for the simulator (None: ``raw``).
        engine: ``auto`` (the compiled core where it loads), ``c`` (insist) or ``python``.
        threads: threads a rank reduces large blocks with (None: the node's cores over its ranks).
        segment: bytes of a segment (messages longer are cut so reduction overlaps the wire; 0: never).
        ranks_per_node: each K consecutive ranks make a node (None: the nodes MPI's shared memory finds).
        node_chunk: bytes a node's lane gets at least (a small vector runs on fewer of a node's ranks).
    """

    algorithm: str | None
    dims: str | None
    check: bool
    timeout: float | None
    wait: str | None
    sleep_us: float
    datatypes: bool
    tuning: str | None
    network: str | None
    trial: bool
    model_cache: str | None
    engine_costs: str | None
    simgrid_contexts: str | None
    engine: str
    threads: int | None
    segment: int
    ranks_per_node: int | None
    node_chunk: int
    _problems: dict[str, str]

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        """Read every variable from ``environ`` (default ``os.environ``)."""
        object.__setattr__(self, "_problems", {})
        self.reload(environ)

    def reload(self, environ: Mapping[str, str] | None = None) -> None:
        """Read every variable again from ``environ`` (default ``os.environ``); a bad value raises ``ValueError``."""
        env = os.environ if environ is None else environ
        problems: dict[str, str] = {}
        values: dict[str, Any] = {}
        for var, attr, parse, deferred in _SPEC:
            try:
                values[attr] = parse(env.get(var))
            except ValueError as e:
                if not deferred:
                    raise
                problems[attr] = str(e)
                values[attr] = None
        for attr, value in values.items():
            object.__setattr__(self, attr, value)
        object.__setattr__(self, "_problems", problems)

    def problem(self, attr: str) -> str | None:
        """Return why the variable of ``attr`` was not understood (None: it was)."""
        return self._problems.get(attr)

    def checked(self, attr: str) -> Any:
        """Return ``attr``'s value; raise ``ValueError`` if its variable was not understood (the deferred ones)."""
        problem = self._problems.get(attr)
        if problem is not None:
            raise ValueError(problem)
        return getattr(self, attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        """Set an attribute as its variable would: text is parsed, other values are checked by type."""
        if attr not in _PARSERS:
            raise AttributeError(f"swing_mpi.rc has no setting {attr!r}; known: {', '.join(_PARSERS)}")
        _, parse, _ = _PARSERS[attr]
        if isinstance(value, str) or value is None:
            value = parse(value)
        elif isinstance(value, bool) and attr in ("check", "datatypes", "trial"):
            pass
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and attr in ("timeout", "sleep_us"):
            value = parse(repr(float(value)))
        elif isinstance(value, int) and not isinstance(value, bool) and attr in _COUNTS:
            value = parse(str(value))
        else:
            raise TypeError(f"swing_mpi.rc.{attr}: {type(value).__name__} is not accepted")
        object.__setattr__(self, attr, value)
        self._problems.pop(attr, None)

    def __call__(self, **settings: Any) -> None:
        """Set several attributes at once (``rc(timeout=30, wait="spin")``)."""
        for attr, value in settings.items():
            setattr(self, attr, value)

    def __repr__(self) -> str:
        """Show every setting."""
        return "Config(" + ", ".join(f"{a}={getattr(self, a)!r}" for a in _PARSERS) + ")"


rc = Config()
"""The settings of this process, read from the environment when ``swing_mpi`` is imported."""
