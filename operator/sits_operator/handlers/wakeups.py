"""Per-SitsDeployment wake-up signals: a child's watch event wakes its parent's loop.

Kopf has no work queue keyed by owner; this is the smallest equivalent. One asyncio
Event per parent: many child events before the loop runs collapse into one reconcile.
"""

from __future__ import annotations

import asyncio

from sits_operator.core.observe import ParentKey


class Wakeups:
    def __init__(self) -> None:
        self._events: dict[ParentKey, asyncio.Event] = {}

    def event_for(self, key: ParentKey) -> asyncio.Event:
        return self._events.setdefault(key, asyncio.Event())

    def wake(self, key: ParentKey) -> None:
        event = self._events.get(key)
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        for event in self._events.values():
            event.set()

    def drop(self, key: ParentKey) -> None:
        self._events.pop(key, None)

    async def wait(self, key: ParentKey, *, resync: float, debounce: float) -> bool:
        """Wait for a wake-up or the resync timeout; True if woken. Then let bursts settle."""
        event = self.event_for(key)
        try:
            await asyncio.wait_for(event.wait(), timeout=resync)
        except TimeoutError:
            return False
        await asyncio.sleep(debounce)
        return True
