"""A simulated clock for tests of the runner: hours of load in milliseconds, no sleeping.

``SimClock.run(coro)`` drives virtual time: whenever every task has had its turn (the
loop is given a number of passes) and ``coro`` is not finished, time jumps to the
earliest pending ``sleep`` and wakes it. Only sleeps on this clock advance time, so tests
must make every wait go through it (the runner does; a fake sender should too).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

SETTLE_PASSES = 50  # loop passes given to tasks before time moves (wake-ups chain a few deep)
EPOCH_2027 = 1_798_761_600.0


class SimulatedRunStuckError(RuntimeError):
    """The awaited work waits on something other than this clock."""


class SimClock:
    """Virtual monotonic and wall time; ``sleep`` returns when ``run`` reaches its time."""

    def __init__(self, wall_at_zero: float = EPOCH_2027) -> None:
        self._now = 0.0
        self._wall_at_zero = wall_at_zero
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._wall_at_zero + self._now

    async def sleep(self, seconds: float) -> None:
        wake = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + max(0.0, seconds), next(self._order), wake))
        await wake

    async def run(self, work: Awaitable[T]) -> T:
        """Await ``work``, advancing virtual time whenever nothing else can run."""
        task = asyncio.ensure_future(work)
        while not task.done():
            await self._settle()
            if not task.done() and not self._wake_next():
                task.cancel()
                raise SimulatedRunStuckError("nothing sleeps on the clock, yet work waits")
        return task.result()

    @staticmethod
    async def _settle() -> None:
        for _ in range(SETTLE_PASSES):
            await asyncio.sleep(0)

    def _wake_next(self) -> bool:
        """Move time to the earliest live sleeper and wake it; False when there is none."""
        while self._sleepers:
            at, _, wake = heapq.heappop(self._sleepers)
            if wake.done():  # its sleep was cancelled
                continue
            self._now = max(self._now, at)
            wake.set_result(None)
            return True
        return False
