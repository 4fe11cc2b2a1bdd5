"""The gateway's own sliding-window SLIs per variant, for span attributes.

Spans carry ``sits2026.success_rate_5m`` and ``sits2026.latency_p95_ms`` as the gateway
saw them when the request ended, so a trace shows the variant's health at that moment
without a Prometheus round trip. Same definitions as the PromQL of the design: success
over 5 minutes, p95 over 1 minute from the same histogram buckets, interpolated inside a
bucket as ``histogram_quantile`` does.

Cost matters (it runs per request): counts live in one-second slots of a ring with
running totals, so a record is O(1) plus, once per second, subtracting the slots that
fell out of the window; a quantile scans only the bucket totals.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Sequence


class RollingCounts:
    """Per-second count vectors over the last ``seconds`` seconds, with running totals."""

    __slots__ = ("_clock", "_now", "_slots", "_width", "totals")

    def __init__(self, seconds: int, width: int, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._width = width
        self._slots = [[0] * width for _ in range(seconds)]
        self._now = int(clock())
        self.totals = [0] * width

    def add(self, index: int, amount: int = 1) -> None:
        self.advance()
        self._slots[self._now % len(self._slots)][index] += amount
        self.totals[index] += amount

    def advance(self) -> None:
        """Expire the slots of the seconds that left the window since the last call."""
        now = int(self._clock())
        if now == self._now:
            return
        steps = min(now - self._now, len(self._slots))
        for second in range(now - steps + 1, now + 1):
            self._expire(self._slots[second % len(self._slots)])
        self._now = now

    def _expire(self, slot: list[int]) -> None:
        for index, count in enumerate(slot):
            if count:
                self.totals[index] -= count
                slot[index] = 0


def histogram_quantile(q: float, bounds: Sequence[float], counts: Sequence[int]) -> float | None:
    """Prometheus' interpolation over cumulative buckets; None without observations.

    ``counts`` has one more entry than ``bounds`` (the +Inf bucket); a quantile that falls
    there is reported as the highest finite bound, as Prometheus does.
    """
    total = sum(counts)
    if total == 0:
        return None
    rank, seen = q * total, 0
    for index, count in enumerate(counts):
        if seen + count >= rank and count:
            if index == len(bounds):
                return bounds[-1]
            lower = bounds[index - 1] if index else 0.0
            return lower + (bounds[index] - lower) * (rank - seen) / count
        seen += count
    return bounds[-1]


class VariantWindow:
    """Success rate over 5 min and p95 latency over 1 min for one variant."""

    __slots__ = ("_bounds", "_latency", "_outcomes")

    def __init__(
        self,
        bounds: Sequence[float],
        *,
        success_seconds: int = 300,
        latency_seconds: int = 60,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bounds = tuple(bounds)
        self._outcomes = RollingCounts(success_seconds, 2, clock)  # [errors, successes]
        self._latency = RollingCounts(latency_seconds, len(self._bounds) + 1, clock)

    def record(self, success: bool, seconds: float) -> None:
        self._outcomes.add(1 if success else 0)
        self._latency.add(bisect.bisect_left(self._bounds, seconds))

    def success_rate(self) -> float | None:
        self._outcomes.advance()
        errors, successes = self._outcomes.totals
        total = errors + successes
        return successes / total if total else None

    def latency_p95_ms(self) -> float | None:
        self._latency.advance()
        seconds = histogram_quantile(0.95, self._bounds, self._latency.totals)
        return None if seconds is None else seconds * 1000.0
