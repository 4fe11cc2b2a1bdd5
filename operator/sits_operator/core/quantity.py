"""Kubernetes resource quantities ("7Gi", "500M", "1.5G") as byte counts.

Only what sizing needs: binary and decimal suffixes for memory, no milli-units.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIXES: dict[str, int] = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_QUANTITY = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<suffix>[KMGTP]i|[kMGTP])?$")


def parse_bytes(quantity: str) -> int:
    """Return the number of bytes a memory quantity stands for; ValueError if malformed."""
    match = _QUANTITY.match(quantity.strip())
    if match is None:
        raise ValueError(f"not a memory quantity: {quantity!r}")
    try:
        number = Decimal(match["number"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"not a memory quantity: {quantity!r}") from exc
    return int(number * _SUFFIXES[match["suffix"] or ""])
