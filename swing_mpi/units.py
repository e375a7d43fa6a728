"""Quantities with units: one parser and one formatter for every command and table.

Sizes in bytes are binary everywhere: ``K`` = ``KiB`` = 1024 bytes, ``M`` =
``MiB`` = 2^20, ``G`` = 2^30, ``T`` = 2^40 (a trailing ``B``/``iB`` is
optional), as in OSU's and nccl-tests' size arguments. So ``4M`` is 4 MiB in
``bench``, ``model``, ``calibrate`` and ``choose`` alike.

Link rates are bits per second with a decimal SI suffix, as network links are
sold: ``400G`` = 400e9 bit/s, ``40M`` = 40e6 bit/s (:func:`parse_rate`).
Times take a unit: ``1.5us``, ``2ms``, ``100ns``, ``0.5s`` (:func:`parse_time`).
A bare number is refused for both, so that ``--link 400`` cannot silently mean
400 bit/s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

__all__ = ["parse_size", "parse_sizes", "format_size", "short_size", "require_finite", "parse_rate", "format_rate",
           "parse_byte_rate", "format_byte_rate", "parse_time", "format_time", "format_dims", "plural", "RATE_HELP",
           "BYTE_RATE_HELP", "TIME_HELP", "SIZE_HELP"]

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*")


def parse_size(text: str | int) -> int:
    """Turn ``"8"``, ``"64K"``, ``"16M"``, ``"1.5G"``, ``"4KiB"``, ``"1MB"`` or an int into bytes.

    Fractions must come out as whole bytes (``"1.5K"`` is 1536; ``"0.3K"`` is an error).
    """
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError(f"size must be >= 0, got {text}")
        return text
    m = _SIZE_RE.fullmatch(str(text))
    if not m:
        raise ValueError(f"cannot parse size {text!r}: expected bytes with an optional K/M/G suffix "
                         "(binary: 1K = 1024), e.g. 8, 64K, 16M, 4MiB")
    value = float(m.group(1)) * _SUFFIX[m.group(2).upper()]
    if value != int(value):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def parse_sizes(spec: str) -> list[int]:
    """Sizes in bytes from a list or ranges, sorted, without duplicates.

    ``MIN:MAX`` gives the powers of two between (both ends included),
    ``MIN:MAX:FACTOR`` each ``FACTOR`` times the last, a comma list
    (``8,64K,1M``) or a mix (``8,1K:1M:4``).
    """
    out = set()
    for item in str(spec).split(","):
        item = item.strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) == 1:
            out.add(parse_size(parts[0]))
            continue
        if len(parts) not in (2, 3):
            raise ValueError(f"cannot parse size range {item!r}: expected MIN:MAX or MIN:MAX:FACTOR")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        factor = int(parts[2]) if len(parts) == 3 else 2
        if factor < 2:
            raise ValueError(f"size factor must be >= 2, got {factor}")
        if lo < 1 or hi < lo:
            raise ValueError(f"size range {item!r} is empty: need 1 <= MIN <= MAX")
        if len(parts) == 2 and lo & (lo - 1):
            out.add(lo)
            lo = 1 << lo.bit_length()  # the powers of two between MIN and MAX
        s = lo
        while s <= hi:
            out.add(s)
            s *= factor
        if len(parts) == 2 and hi & (hi - 1):
            out.add(hi)
    if not out:
        raise ValueError(f"no sizes in {spec!r}")
    if min(out) < 1:
        raise ValueError("sizes must be at least 1 byte")
    return sorted(out)


def format_size(n: float) -> str:
    """Format bytes for people: ``1048576`` → ``"1 MiB"``, ``1536`` → ``"1.5 KiB"``, ``8`` → ``"8 B"``."""
    for unit, f in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            v = n / f
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 1e-9 else f"{v:.3g} {unit}"
    return f"{n:.0f} B"


def short_size(n: float) -> str:
    """Format bytes compactly, as :func:`parse_size` reads them back: ``1048576`` → ``"1M"``."""
    return format_size(n).replace(" B", "").replace("iB", "").replace(" ", "")


def require_finite(flag: str, value: float, *, above: float | None = None, at_least: float | None = None) -> None:
    """Raise ``ValueError`` unless ``value`` (the option ``flag``) is finite and ``> above`` / ``>= at_least``."""
    ok = math.isfinite(value) and (above is None or value > above) and (at_least is None or value >= at_least)
    if not ok:
        bound = f" > {above:g}" if above is not None else f" >= {at_least:g}" if at_least is not None else ""
        raise ValueError(f"{flag} must be a finite number{bound}, got {value:g}")


SIZE_HELP = "bytes; K/M/G are binary (1K = 1024 B, 1M = 1 MiB)"
RATE_HELP = "bits per second with a decimal suffix: 400G = 400e9 bit/s, 40M = 40e6 bit/s"
BYTE_RATE_HELP = "bytes per second with a decimal suffix and B/s: 200GB/s = 200e9 bytes/s"
TIME_HELP = "a time with its unit: s, ms, us or ns, e.g. 1.5us"

_NUMBER = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
_RATE_RE = re.compile(rf"\s*{_NUMBER}\s*([kKmMgGtT]?)(bps|b/s|bit/s|bits/s|bit|b)?\s*")
_RATE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BYTE_RATE_RE = re.compile(rf"\s*{_NUMBER}\s*([kKmMgGtT]?)(B/s|Bps)\s*")
_TIME_RE = re.compile(rf"\s*{_NUMBER}\s*(s|ms|us|µs|μs|ns)?\s*")
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}


def parse_rate(text: str, flag: str = "link rate") -> float:
    """Bits per second from ``"400G"``, ``"40M"``, ``"100Gbps"``, ``"2.5Gbit/s"`` or ``"9600bps"`` (decimal SI).

    A bare number (``"400"``) is refused: write its unit (``400G``, or ``400bps``
    for bits per second). ``flag`` names the option in the message.
    """
    m = _RATE_RE.fullmatch(str(text))
    if not m:
        raise ValueError(f"{flag}: cannot parse {text!r}: expected {RATE_HELP}, e.g. 400G or 40M")
    if not m.group(2) and not m.group(3):
        n = m.group(1)
        raise ValueError(f"{flag}: {text!r} has no unit: write {n}G for {n} Gbit/s, {n}M for {n} Mbit/s "
                         f"or {n}bps for {n} bit/s")
    v = float(m.group(1)) * _RATE[m.group(2).upper()]
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{flag} must be > 0, got {text!r}")
    return v


def format_rate(bits_per_s: float) -> str:
    """Format a rate for people: ``4e11`` → ``"400 Gb/s"``, ``4e7`` → ``"40 Mb/s"``."""
    for unit, f in (("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bits_per_s >= f:
            return f"{bits_per_s / f:.4g} {unit}"
    return f"{bits_per_s:.4g} b/s"


def parse_byte_rate(text: str, flag: str = "memory bandwidth") -> float:
    """Bytes per second from ``"200GB/s"``, ``"1.5TB/s"``, ``"80GBps"`` (decimal SI; ``B/s`` required)."""
    m = _BYTE_RATE_RE.fullmatch(str(text))
    if not m:
        raise ValueError(f"{flag}: cannot parse {text!r}: expected {BYTE_RATE_HELP}, e.g. 200GB/s")
    v = float(m.group(1)) * _RATE[m.group(2).upper()]
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{flag} must be > 0, got {text!r}")
    return v


def format_byte_rate(v: float) -> str:
    """``2e11`` → ``"200 GB/s"``."""
    for unit, f in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if v >= f:
            return f"{v / f:.4g} {unit}"
    return f"{v:.4g} B/s"


def parse_time(text: str, flag: str = "time", *, bare: str | None = None) -> float:
    """Seconds from ``"1.5us"``, ``"2ms"``, ``"100ns"`` or ``"0.5s"`` (``µs`` is ``us`` too).

    A bare number is refused unless ``bare`` names the unit it is read in
    (e.g. ``bare="s"`` where a bare number has always meant seconds); ``0``
    needs no unit. The result must be finite and >= 0.
    """
    m = _TIME_RE.fullmatch(str(text))
    if not m:
        raise ValueError(f"{flag}: cannot parse {text!r}: expected {TIME_HELP}")
    unit = m.group(2)
    value = float(m.group(1))
    if unit is None:
        if bare is None and value != 0:
            raise ValueError(f"{flag}: {text!r} has no unit: write s, ms, us or ns, e.g. {m.group(1)}us")
        unit = bare or "s"
    v = value * _TIME[unit]
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{flag} must be a finite time >= 0, got {text!r}")
    return v


def format_time(seconds: float) -> str:
    """Format seconds for people with the unit that fits: ``1.5e-6`` → ``"1.5 us"``, ``0.002`` → ``"2 ms"``."""
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= f:
            return f"{seconds / f:.4g} {unit}"
    return "0 s" if seconds == 0 else f"{seconds / 1e-9:.4g} ns"


def format_dims(dims: Sequence[int]) -> str:
    """Write dims in their one form, in text and JSON: ``(2, 2)`` → ``"2x2"``, ``(16,)`` → ``"16"``."""
    return "x".join(str(int(d)) for d in dims)


def plural(n: int, word: str, words: str | None = None) -> str:
    """``"1 lane"``, ``"4 lanes"``: ``n`` and ``word`` in the number ``n`` asks for."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
