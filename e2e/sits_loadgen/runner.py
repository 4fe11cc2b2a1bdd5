"""The open-loop driver: send each planned request at its time, record, summarise.

Open loop: requests go out at their planned times whether or not earlier ones have been
answered, as independent users would send them; a slow server gets more concurrent
requests, not fewer arrivals (a closed loop would hide exactly the overload a canary
analysis must see). The concurrency cap bounds the client's own resources: an arrival
that finds the cap reached is recorded as ``dropped`` and not sent, never queued.

Bounds: no arrival after ``duration_s`` or beyond ``max_requests``; requests still in
flight then get ``drain_timeout_s`` to finish and are cancelled after it (recorded as
``cancelled``). A run therefore lasts at most ``duration_s + drain_timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .clock import Clock, RealClock
from .config import LoadConfig
from .plan import PlannedRequest, plan
from .records import (
    CANCELLED,
    DROPPED,
    ERROR,
    SUCCESS,
    JsonlWriter,
    RequestRecord,
    SendResult,
    completed_record,
    unsent_record,
)
from .safety import check_target
from .sender import OpenAISender, Sender
from .summary import Summary, percentile, summarize

log = logging.getLogger(__name__)

RecordHook = Callable[[RequestRecord], None]
ProgressHook = Callable[["Progress"], None]
#: Asked before each send; True ends the arrivals early (in-flight requests still finish).
StopCheck = Callable[[], bool]


@dataclass(frozen=True)
class Progress:
    """A live snapshot, every ``progress_interval_s``; window figures cover the last one."""

    elapsed_s: float
    sent: int
    completed: int
    success: int
    errors: int
    dropped: int
    in_flight: int
    window_rate: float
    window_p50_ms: float | None
    window_p95_ms: float | None

    def line(self) -> str:
        p50 = "-" if self.window_p50_ms is None else f"{self.window_p50_ms:.0f}ms"
        p95 = "-" if self.window_p95_ms is None else f"{self.window_p95_ms:.0f}ms"
        return (
            f"[sits-loadgen] {self.elapsed_s:6.1f}s sent={self.sent} ok={self.success} "
            f"err={self.errors} drop={self.dropped} in_flight={self.in_flight} "
            f"| last interval: {self.window_rate:.1f} done/s p50={p50} p95={p95}"
        )


@dataclass(frozen=True)
class LoadResult:
    """Everything a run measured: records in plan order, and their summary."""

    config: LoadConfig
    started_at: float  # epoch seconds
    elapsed_s: float
    records: tuple[RequestRecord, ...]
    summary: Summary


class _Run:
    """One run's mutable state; ``run_load`` is its only user."""

    def __init__(
        self,
        config: LoadConfig,
        clock: Clock,
        sender: Sender,
        hooks: list[RecordHook],
        on_progress: ProgressHook | None,
        stop: StopCheck | None = None,
    ) -> None:
        self.config, self.clock, self.sender = config, clock, sender
        self.stop = stop
        self.hooks, self.on_progress = hooks, on_progress
        self.records: list[RequestRecord] = []
        self.in_flight: set[asyncio.Task[None]] = set()
        self.sent = 0
        self.t0 = clock.monotonic()
        self.started_at = clock.wall()
        self._reported = 0  # records already covered by a progress line

    def elapsed(self) -> float:
        return self.clock.monotonic() - self.t0

    async def execute(self) -> None:
        reporter = asyncio.ensure_future(self._report()) if self._reporting() else None
        try:
            await self._dispatch()
            await self._drain()
        finally:
            await self._cancel(list(self.in_flight))
            if reporter is not None:
                await self._cancel([reporter])

    def _reporting(self) -> bool:
        return self.on_progress is not None and self.config.progress_interval_s > 0

    async def _dispatch(self) -> None:
        """Send each planned request at its offset; stop at the duration."""
        for planned in plan(self.config):
            delay = planned.at_s - self.elapsed()
            if delay > 0:
                await self.clock.sleep(delay)
            if self.elapsed() >= self.config.duration_s:
                return  # a late loop must not stretch the run past its bound
            if self.stop is not None and self.stop():
                return  # the caller has seen enough: drain what is in flight
            if len(self.in_flight) >= self.config.concurrency:
                self._finish(unsent_record(planned, self.clock.wall(), DROPPED))
                continue
            self.sent += 1
            task = asyncio.create_task(self._one(planned))
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)

    async def _one(self, planned: PlannedRequest) -> None:
        start, began = self.clock.wall(), self.clock.monotonic()
        try:
            result = await self.sender.send(planned)
        except asyncio.CancelledError:
            latency = self.clock.monotonic() - began
            self._finish(unsent_record(planned, start, CANCELLED, latency))
            raise
        except Exception as err:  # a sender that raised: still a data point, not a crash
            latency = self.clock.monotonic() - began
            result = SendResult(ok=False, latency_s=latency, error=type(err).__name__)
        self._finish(completed_record(planned, start, result))

    def _finish(self, record: RequestRecord) -> None:
        self.records.append(record)
        for hook in self.hooks:
            try:
                hook(record)
            except Exception:  # a broken live view must not stop the measurement
                log.exception("record hook %r failed", hook)

    async def _drain(self) -> None:
        """Wait for in-flight requests, at most ``drain_timeout_s``; cancel the rest."""
        timer = asyncio.ensure_future(self.clock.sleep(self.config.drain_timeout_s))
        try:
            while self.in_flight and not timer.done():
                await asyncio.wait({*self.in_flight, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await self._cancel([timer])

    @staticmethod
    async def _cancel(tasks: Sequence[asyncio.Future[None]]) -> None:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _report(self) -> None:
        assert self.on_progress is not None
        while True:
            await self.clock.sleep(self.config.progress_interval_s)
            try:
                self.on_progress(self.progress())
            except Exception:  # as for record hooks: report, keep measuring
                log.exception("progress hook %r failed", self.on_progress)

    def progress(self) -> Progress:
        """The snapshot now; the window is everything completed since the last one."""
        window = self.records[self._reported :]
        self._reported = len(self.records)
        latencies = [r.latency_ms for r in window if r.outcome == SUCCESS and r.latency_ms]
        outcomes = [r.outcome for r in self.records]
        return Progress(
            elapsed_s=self.elapsed(),
            sent=self.sent,
            completed=len(self.records),
            success=outcomes.count(SUCCESS),
            errors=outcomes.count(ERROR),
            dropped=outcomes.count(DROPPED),
            in_flight=len(self.in_flight),
            window_rate=len(window) / self.config.progress_interval_s,
            window_p50_ms=percentile(latencies, 0.5),
            window_p95_ms=percentile(latencies, 0.95),
        )

    def result(self) -> LoadResult:
        records = tuple(sorted(self.records, key=lambda r: r.index))
        elapsed = self.elapsed()
        return LoadResult(
            self.config, self.started_at, elapsed, records, summarize(records, elapsed)
        )


async def run_load(
    config: LoadConfig,
    *,
    on_record: RecordHook | None = None,
    on_progress: ProgressHook | None = None,
    sender: Sender | None = None,
    clock: Clock | None = None,
    stop: StopCheck | None = None,
) -> LoadResult:
    """Run ``config`` to its bounds and return every record and the summary.

    ``on_record`` is called with each record as it completes (a live view);
    ``on_progress`` every ``config.progress_interval_s`` seconds. ``sender`` and
    ``clock`` are for tests; by default requests go through ``AsyncOpenAI`` in real time.
    ``stop`` (checked before each send, from any thread) ends the arrivals early: a live
    scenario stops its load once the rollout has finished, then drains.
    Records are also written to ``config.out`` (JSON lines) when it is set.
    """
    check_target(config.base_url)
    clock = clock or RealClock()
    own: OpenAISender | None = None
    if sender is None:
        sender = own = OpenAISender(config, clock)
    with contextlib.ExitStack() as stack:
        hooks: list[RecordHook] = []
        if config.out is not None:
            hooks.append(stack.enter_context(JsonlWriter(config.out)).write)
        if on_record is not None:
            hooks.append(on_record)
        run = _Run(config, clock, sender, hooks, on_progress, stop)
        try:
            await run.execute()
        finally:
            if own is not None:
                await own.aclose()
    return run.result()


def run_load_sync(
    config: LoadConfig,
    *,
    on_record: RecordHook | None = None,
    on_progress: ProgressHook | None = None,
) -> LoadResult:
    """``run_load`` for callers without an event loop (scripts, the demo)."""
    return asyncio.run(run_load(config, on_record=on_record, on_progress=on_progress))
