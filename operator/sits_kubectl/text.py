"""Small renderings shared by `get` and `explain`: ages, times, numbers, weights.

Pure functions of their arguments (the caller passes `now`), so screens are reproducible
in tests and a watch redraws ages without asking the apiserver again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime


def parse_time(text: object) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp as the apiserver writes them; None if not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def age(since: float | None, now: float) -> str:
    """kubectl's AGE column ("42s", "3m12s", "2h5m", "6d"): exact while short, coarse later."""
    if since is None:
        return "-"
    seconds = max(0, int(now - since))
    if seconds < 120:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 10:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    hours, mins = divmod(minutes, 60)
    if hours < 3:
        return f"{minutes}m" if hours == 0 else f"{hours}h{mins}m"
    days, hrs = divmod(hours, 24)
    if days < 2:
        return f"{hours}h"
    return f"{days}d{hrs}h" if days < 8 and hrs else f"{days}d"


def clock(epoch: float | None) -> str:
    """UTC wall-clock time of an epoch ("20:28:31"); the apiserver's times are UTC too."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S")


def stamp(epoch: float | None) -> str:
    """Date and UTC time ("2026-05-28 20:28:31 UTC") for statements that must be exact."""
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def number(value: float | None) -> str:
    """An SLI value: 4 significant digits, no trailing noise; "-" without data."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.4g}"


def weights(split: Mapping[str, int]) -> str:
    """ "v1 80 · v2 20" in the order given (the spec's variant order)."""
    return " · ".join(f"{name} {share}" for name, share in split.items()) or "-"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
