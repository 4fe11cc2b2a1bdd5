"""Time, injected: the runner reads and waits through a ``Clock`` so tests need not sleep.

Why not call ``time`` and ``asyncio.sleep`` directly: rate and bound logic is only worth
testing over thousands of simulated seconds, which must take milliseconds of real time
(``testing.SimClock``). The real clock is the default everywhere else.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time for intervals, wall time for records, and a way to wait."""

    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """The process's clocks and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
