"""One batched Prometheus query shared by the analysis loops of many SitsDeployments.

Why: each SitsDeployment's loop evaluates every rule once per period, and the loops of a
policy in one phase slot wake just after the same period start (core/analysis/schedule.py,
at most 15 slots at 30 s intervals). Queried one deployment at a time, 1,000 deployments
under SITS2026 send 4,000 queries per period. A policy template that groups by ``{{by}}``
instead returns the series of every deployment of a namespace in one answer, so the first
loop to ask sends the query and the others of the same namespace take their own series from
its answer.

Two rules keep a shared answer as good as a private one:

* Staleness bound. A loop reuses an answer only when the query was sent at most
  ``max_age`` seconds before it asked (the analyzer passes min(2 s, interval / 10)); older
  answers are never reused, a fresh query is sent instead.
* Single flight. Loops asking while the query is in flight await that same query rather
  than sending another one; its error is the error of every loop that shares it (each
  rollout freezes, as it would have on its own query).

An answer is indexed once per query (deployment -> variant -> value), so each loop's share
costs a dictionary lookup, not a scan of the namespace's series.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass
class _Flight(Generic[T]):
    """One query: when it was sent, and its answer (or error) once it came."""

    sent_at: float
    answer: asyncio.Future[T]


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark an error as seen: when every caller was cancelled, nobody else reads it."""
    if not future.cancelled():
        future.exception()


class SharedQueries(Generic[T]):
    """Single-flight, staleness-bounded answers by query text (one instance per client,
    so per policy's Prometheus)."""

    def __init__(
        self, send: Callable[[str], Awaitable[T]], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._send = send
        self._clock = clock
        self._flights: dict[str, _Flight[T]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    async def answer(self, query: str, max_age: float) -> T:
        """The answer of a query sent at most `max_age` seconds ago (in flight or done),
        else of a query sent now."""
        now = self._clock()
        flight = self._flights.get(query)
        if flight is None or now - flight.sent_at > max_age:
            self._forget_older(now, max_age)
            flight = _Flight(now, asyncio.ensure_future(self._send(query)))
            flight.answer.add_done_callback(_retrieve)
            self._flights[query] = flight
        # A caller cancelled (its loop stopped) must not cancel the query of the others.
        return await asyncio.shield(flight.answer)

    def _forget_older(self, now: float, max_age: float) -> None:
        """Drop answers no caller may use any more, so the table holds one period's keys."""
        stale = [
            query
            for query, flight in self._flights.items()
            if flight.answer.done() and now - flight.sent_at > max_age
        ]
        for query in stale:
            del self._flights[query]
