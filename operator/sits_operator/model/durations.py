"""Go-style durations ("90s", "1m30s", "500ms") as seconds: the CRDs' duration format."""

from __future__ import annotations

import re

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go duration; ValueError when the text is not one."""
    parts = _PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def format_duration(seconds: float) -> str:
    """Short Go-style rendering for windows in PromQL ("30s", "5m")."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{int(seconds * 1000)}ms"
