"""Durations as people write them: ``500ms``, ``30s``, ``2m``, ``1h30m``, ``1d``.

Settings accept them (a bare number is seconds, as before) and every message that
shows a duration limit prints one, so nobody reads ``86400000 ms``.
"""

from __future__ import annotations

import math
import re

_UNITS = [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)]
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|d|h|m|s)")


def human_ms(ms: float) -> str:
    """``86400000`` -> ``1d``, ``90000`` -> ``1m30s``, ``1500`` -> ``1.5s``, ``10`` -> ``10ms``."""
    ms = round(ms, 3)
    if ms == 0:
        return "0s"
    if ms < 0:
        return "-" + human_ms(-ms)
    if ms < 1000:
        return f"{ms:g}ms"
    parts = []
    rest = ms
    for unit, size in _UNITS[:3]:
        if rest >= size:
            parts.append(f"{int(rest // size)}{unit}")
            rest = round(rest % size, 3)
    if rest >= 1000 or (rest and parts):
        parts.append(f"{rest / 1000:g}s")  # 1.5s, 1m15.5s
    elif rest:
        parts.append(f"{rest:g}ms")
    return "".join(parts)


def human(seconds: float) -> str:
    """``human_ms`` for a number of seconds."""
    return human_ms(seconds * 1000)


def parse(text: str) -> float:
    """Seconds from ``1d``, ``1h30m``, ``30s``, ``500ms``, ``1.5s`` or a bare number
    of seconds (``86400``, ``0.25``). Raises ValueError for anything else."""
    text = text.strip().lower()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise ValueError(f"not a duration: {text!r}")
        return value
    if not text or _PART.sub("", text.replace(" ", "")):
        raise ValueError(f"not a duration: {text!r}")
    sizes = dict(_UNITS)
    return sum(float(n) * sizes[u] for n, u in _PART.findall(text.replace(" ", ""))) / 1000
