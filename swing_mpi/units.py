"""Sizes in bytes: one parser and one formatter for every command and table.

Units are binary everywhere: ``K`` = ``KiB`` = 1024 bytes, ``M`` = ``MiB`` =
2^20, ``G`` = 2^30, ``T`` = 2^40 (a trailing ``B``/``iB`` is optional), as
in OSU's and nccl-tests' size arguments. So ``4M`` is 4 MiB in ``bench``,
``model``, ``calibrate`` and ``choose`` alike.
"""

from __future__ import annotations

import math
import re

__all__ = ["parse_size", "parse_sizes", "format_size", "short_size", "require_finite"]

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
