"""L3: which LoRA adapters vLLM holds, decided per request by the sidecar.

Every request for an adapter takes a lease (``acquire``) that lasts until the sidecar has
sent the response's last byte. While any lease on an adapter is open the adapter is never
unloaded, so its sequences (and their KV cache) are never cut off. A request for an
adapter that is not resident loads it, once however many requests ask at the same time
(one task per adapter; the requests wait on it). When M (``max_resident``) adapters are
resident, the least valuable idle, unpinned one is evicted (``policy``); when none is
idle, the request waits for one to become idle, at most ``slot_wait_s``, then gets 503;
when the least valuable one is busy, a load waits for it a little
(``eviction_patience_s``) rather than evict a more valuable idle one.
A load that vLLM rejects or that times out is not retried for a backoff period that
doubles with each failure; requests in that period get the last error at once.

Why a load may first send one-token requests to resident adapters: vLLM's unload keeps
the weights in its worker LRU, which would otherwise evict a popular idle adapter rather
than the one the sidecar unloaded (``worker_lru`` explains and models it).

vLLM restarts are noticed two ways: the sidecar calls ``upstream_restarted()`` when its
health probe sees vLLM come back, and a keeper task compares ``GET /v1/models`` with the
resident set every ``reconcile_interval_s``. Either way the adapters vLLM lost are loaded
again (pinned ones always; others while free slots remain).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

import aiohttp

from ..metrics import CacheMetrics, Eviction
from .adapter import (
    OCCUPYING,
    Adapter,
    AdapterLease,
    AdapterUnavailable,
    State,
    resolve_version,
)
from .policy import Candidate, DecayedFrequency
from .spec import LoraConfig, split_versioned
from .telemetry import LoadOutcome, LoraMetrics
from .upstream import UpstreamRejectedError, UpstreamUnreachableError, VllmLoraApi
from .worker_lru import WorkerLru

log = logging.getLogger(__name__)
UNLOAD_TIMEOUT_S = 30.0
TOUCH_TIMEOUT_S = 30.0
_T = TypeVar("_T")


class LoraResidency:
    """Keeps at most ``max_resident`` adapters loaded in one vLLM; one per sidecar."""

    def __init__(
        self,
        config: LoraConfig,
        *,
        upstream: str,
        metrics: CacheMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._upstream = upstream
        self._metrics = LoraMetrics(metrics)
        self._clock = clock
        self._policy = DecayedFrequency(config.half_life_s)
        self._adapters: dict[str, Adapter] = {}
        self._by_served: dict[str, Adapter] = {}
        self._worker = WorkerLru(config.upstream_cpu_loras or config.max_resident)
        # A sequence number stamped on every state change, so that reconciliation acts
        # only on adapters that did not change while /v1/models was being read.
        self._sequence = 0
        self._changed = asyncio.Event()
        self._nudge = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._api: VllmLoraApi | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._waiting = 0

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Version every adapter (reads their files), then keep vLLM in line in the
        background: vLLM may still be loading its model, so nothing here waits for it."""
        versions = await asyncio.gather(
            *(asyncio.to_thread(resolve_version, spec) for spec in self.config.adapters)
        )
        for spec, version in zip(self.config.adapters, versions, strict=True):
            adapter = Adapter(spec, version)
            self._adapters[spec.name] = adapter
            self._by_served[adapter.served_name] = adapter
            if version.broken:
                log.error("%s", version.broken)
        self._session = aiohttp.ClientSession()
        self._api = VllmLoraApi(self._upstream, self._session)
        self._keeper = asyncio.create_task(self._keep(), name="sits-lora-keeper")

    async def close(self) -> None:
        """Stop background work; leaves vLLM's adapters as they are (vLLM may outlive us)."""
        tasks = [t for t in (self._keeper, *(a.task for a in self._adapters.values())) if t]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        self._keeper = self._session = self._api = None

    # -- the sidecar's per-request interface -------------------------------------------

    def is_adapter(self, model: str) -> bool:
        """True for a configured adapter's name (or its current versioned name)."""
        return model in self._adapters or model in self._by_served

    def client_name(self, served_name: str) -> str | None:
        """The client-facing name behind a versioned upstream name (None if not ours)."""
        adapter = self._by_served.get(served_name)
        return adapter.name if adapter else None

    def identity(self, model: str) -> AdapterLease | None:
        """Name, versioned name and digest of ``model``'s adapter without leasing it, for
        keys that must name the adapter version before any load (L1's cache key)."""
        adapter = self._adapters.get(model) or self._by_served.get(model)
        return adapter.lease() if adapter else None

    def acquire(self, model: str) -> AbstractAsyncContextManager[AdapterLease]:
        """Lease ``model``'s adapter, loading it first if needed (raises on entry:
        ``AdapterUnavailable``). Exit the context after the response's last byte."""
        adapter = self._adapters.get(model) or self._by_served.get(model)
        if adapter is None:
            raise AdapterUnavailable(f"{model!r} is not an adapter of this server", 404)
        return self._lease(adapter)

    @contextlib.asynccontextmanager
    async def _lease(self, adapter: Adapter) -> AsyncIterator[AdapterLease]:
        started = self._clock()
        self._policy.record(adapter.name, started)
        adapter.in_flight += 1
        self._metrics.in_flight.inc()
        hit = adapter.state is State.RESIDENT
        try:
            if not hit:
                try:
                    await self._until_resident(adapter, started)
                finally:
                    self._metrics.hit(self._clock() - started, hit=False)
            else:
                self._metrics.hit(0.0, hit=True)
            yield adapter.lease()
        finally:
            adapter.in_flight -= 1
            adapter.last_used = self._clock()
            self._metrics.in_flight.dec()
            if adapter.in_flight == 0:
                self._signal()

    async def _until_resident(self, adapter: Adapter, started: float) -> None:
        """Wait for ``adapter``'s load (starting it if nobody has), bounded in time.

        An adapter being unloaded (chosen as a victim just before this request came) is
        waited out first: loading it again while vLLM processes the unload could leave
        the lease naming an adapter vLLM has just forgotten.
        """
        deadline = started + self.config.slot_wait_s + self.config.load_timeout_s
        while adapter.state is not State.RESIDENT:
            if adapter.state is State.UNLOADING:
                await self._bounded(self._changed.wait(), adapter, started, deadline)
                continue
            self._raise_if_unavailable(adapter)
            task = adapter.task
            if task is None or task.done():
                task = self._start_load(adapter, may_wait=True)
            failure = await self._bounded(asyncio.shield(task), adapter, started, deadline)
            if failure is not None:
                raise failure.copy()

    async def _bounded(
        self, step: Awaitable[_T], adapter: Adapter, started: float, deadline: float
    ) -> _T:
        """Await ``step`` as a request waiting on a load; 504 once ``deadline`` passes."""
        self._set_waiting(+1)
        try:
            return await asyncio.wait_for(step, max(0.0, deadline - self._clock()))
        except TimeoutError:
            raise AdapterUnavailable(
                f"adapter {adapter.name}: not loaded within {deadline - started:.0f} s", 504
            ) from None
        finally:
            self._set_waiting(-1)

    def _raise_if_unavailable(self, adapter: Adapter) -> None:
        if adapter.version.broken:
            raise AdapterUnavailable(adapter.version.broken, 502)
        remaining = adapter.retry_at - self._clock()
        if adapter.failure is not None and remaining > 0:
            raise AdapterUnavailable(
                f"{adapter.failure.message} (next load attempt in {remaining:.1f} s)",
                adapter.failure.status,
            )

    def _set_waiting(self, delta: int) -> None:
        self._waiting += delta
        self._metrics.waiting.set(self._waiting)

    # -- loading and evicting ----------------------------------------------------------

    def _start_load(
        self, adapter: Adapter, *, may_wait: bool
    ) -> asyncio.Task[AdapterUnavailable | None]:
        """The single load task of ``adapter``; every waiter shares it."""
        task = asyncio.create_task(self._guarded_load(adapter, may_wait=may_wait))
        adapter.task = task
        task.add_done_callback(lambda done: _clear_task(adapter, done))
        return task

    async def _guarded_load(self, adapter: Adapter, *, may_wait: bool) -> AdapterUnavailable | None:
        """``_load``, turning a bug into a 500 for the waiters instead of a lost task."""
        try:
            return await self._load(adapter, may_wait=may_wait)
        except Exception as err:
            log.exception("loading %s", adapter.served_name)
            if adapter.state is State.LOADING:
                self._set_state(adapter, State.ABSENT)
            self._publish()
            self._signal()
            return AdapterUnavailable(f"adapter {adapter.name}: internal error {err!r}", 500)

    async def _load(self, adapter: Adapter, *, may_wait: bool) -> AdapterUnavailable | None:
        """Reserve a slot (evicting if needed), then load; returns the failure, if any."""
        try:
            victim = await self._reserve_slot(adapter, may_wait=may_wait)
        except AdapterUnavailable as err:
            # A background reload found no free slot: not an error for anyone; a request
            # sharing this task sees the adapter still absent and starts its own load.
            return err if may_wait else None
        if victim is not None:
            await self._unload(victim, reason=Eviction.CAPACITY)
        await self._align_worker_lru()
        return await self._call_load(adapter)

    async def _reserve_slot(self, adapter: Adapter, *, may_wait: bool) -> Adapter | None:
        """Mark ``adapter`` LOADING once a slot is free or a victim is chosen (returned).

        When the least valuable adapter is busy (a request in flight, or loading), the
        idle ones are all worth more: waiting up to ``eviction_patience_s`` for the busy
        one to finish beats evicting a popular adapter only to reload it moments later.
        With as many concurrent requests as slots this matters: the adapters in flight
        are mostly the rare ones just loaded, the idle ones the popular ones.
        """
        now = self._clock()
        deadline = now + self.config.slot_wait_s
        patient_until = now + (self.config.eviction_patience_s if may_wait else 0.0)
        while True:
            now = self._clock()
            if self._occupied() < self.config.max_resident:
                self._set_state(adapter, State.LOADING)
                return None
            victim, cheaper_busy = self._choose_victim(now)
            if victim is not None and (not cheaper_busy or now >= patient_until):
                self._set_state(victim, State.UNLOADING)
                self._set_state(adapter, State.LOADING)
                return victim
            if victim is None and (not may_wait or now >= deadline):
                raise AdapterUnavailable(
                    f"adapter {adapter.name}: all {self.config.max_resident} adapter slots "
                    f"hold adapters with requests in flight",
                    503,
                )
            until = deadline if victim is None else min(deadline, patient_until)
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), max(0.0, until - now))

    def _choose_victim(self, now: float) -> tuple[Adapter | None, bool]:
        """The least valuable idle adapter (or None), and whether a busy one (request in
        flight, or loading) is worth even less."""
        evictable = [
            a
            for a in self._adapters.values()
            if not a.spec.pinned and a.state in (State.RESIDENT, State.LOADING)
        ]
        idle = {a.name: a for a in evictable if a.state is State.RESIDENT and a.in_flight == 0}
        choice = self._policy.choose_victim((self._candidate(a) for a in idle.values()), now)
        if choice is None:
            return None, False
        floor = self._policy.value(choice, now)
        cheaper = any(
            self._policy.value(self._candidate(a), now) < floor
            for a in evictable
            if a.name not in idle
        )
        return idle[choice.name], cheaper

    @staticmethod
    def _candidate(adapter: Adapter) -> Candidate:
        return Candidate(adapter.name, float(adapter.version.size), adapter.last_used)

    async def _unload(self, victim: Adapter, *, reason: Eviction) -> None:
        """Unload ``victim`` (state UNLOADING); it counts as gone whatever vLLM answers:
        an unreachable vLLM has lost it anyway, and the keeper reconciles the rest."""
        assert self._api is not None
        try:
            await self._api.unload(victim.served_name, UNLOAD_TIMEOUT_S)
        except Exception as err:  # whatever happened, the slot must not stay blocked
            log.warning("unloading %s: %r", victim.served_name, err)
        self._set_state(victim, State.ABSENT)
        self._worker.unloaded(victim)
        self._metrics.evicted(reason)
        self._publish()
        self._signal()

    async def _align_worker_lru(self) -> None:
        """Refresh idle resident adapters that vLLM's worker LRU would evict before the
        adapters the sidecar unloaded (see ``worker_lru``)."""
        assert self._api is not None
        stale = self._worker.to_refresh(self._occupied(), self._adapters.values())
        results = await asyncio.gather(
            *(self._api.touch(a.served_name, TOUCH_TIMEOUT_S) for a in stale),
            return_exceptions=True,
        )
        now = self._clock()
        for adapter, result in zip(stale, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("refreshing %s: %s", adapter.served_name, result)
                continue
            adapter.last_used = max(adapter.last_used, now)
            self._metrics.refreshes.inc()

    async def _call_load(self, adapter: Adapter) -> AdapterUnavailable | None:
        assert self._api is not None
        started = self._clock()
        try:
            await asyncio.wait_for(
                self._api.load(
                    adapter.served_name, adapter.spec.source, self.config.load_timeout_s
                ),
                self.config.load_timeout_s,
            )
        except UpstreamRejectedError as err:
            return self._failed(
                adapter, LoadOutcome.REJECTED, f"vLLM refused to load it: {err}", 502
            )
        except TimeoutError:
            timeout = self.config.load_timeout_s
            return self._failed(
                adapter, LoadOutcome.TIMEOUT, f"load took over {timeout:.0f} s", 504
            )
        except UpstreamUnreachableError as err:
            self._nudge.set()
            return self._failed(adapter, LoadOutcome.UNREACHABLE, f"vLLM unreachable: {err}", 503)
        elapsed = self._clock() - started
        self._set_state(adapter, State.RESIDENT)
        adapter.loads += 1
        adapter.last_used = max(adapter.last_used, self._clock())
        adapter.failure, adapter.backoff_s, adapter.retry_at = None, 0.0, -math.inf
        self._metrics.loads.labels(LoadOutcome.SUCCESS).inc()
        self._metrics.load_seconds.observe(elapsed)
        self._publish()
        log.info("loaded %s from %s in %.3f s", adapter.served_name, adapter.spec.source, elapsed)
        return None

    def _failed(
        self, adapter: Adapter, outcome: LoadOutcome, why: str, status: int
    ) -> AdapterUnavailable:
        """Free the slot; back off unless vLLM was simply not there (not the adapter's
        fault: the next request may find it up, and each try costs one refused connect)."""
        self._set_state(adapter, State.ABSENT)
        failure = AdapterUnavailable(f"adapter {adapter.name}: {why}", status)
        if outcome is not LoadOutcome.UNREACHABLE:
            cfg = self.config
            adapter.backoff_s = min(
                cfg.backoff_max_s, max(cfg.backoff_initial_s, adapter.backoff_s * 2)
            )
            adapter.retry_at = self._clock() + adapter.backoff_s
            adapter.failure = failure
        self._metrics.loads.labels(outcome).inc()
        log.warning("%s", failure.message)
        self._publish()
        self._signal()
        return failure

    # -- vLLM restarts and reconciliation ----------------------------------------------

    async def upstream_restarted(self) -> None:
        """vLLM came back (the sidecar's health probe saw it): re-apply residency now."""
        try:
            await self._reconcile()
        except (UpstreamUnreachableError, UpstreamRejectedError) as err:
            log.warning("after vLLM restart: %s; assuming every adapter lost", err)
            self._forget([a for a in self._adapters.values() if a.state is State.RESIDENT])
            self._nudge.set()

    async def _keep(self) -> None:
        """Reconcile now and then, and whenever nudged; never dies of an upstream error."""
        interval = self.config.reconcile_interval_s
        while True:
            try:
                await self._reconcile()
            except (UpstreamUnreachableError, UpstreamRejectedError) as err:
                log.debug("reconcile: %s", err)
            except Exception:
                log.exception("reconcile failed")
            self._nudge.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._nudge.wait(), interval if interval > 0 else None)

    async def _reconcile(self) -> None:
        """Compare vLLM's adapters with ours: drop what it lost, adopt what it kept,
        unload stale versions of our adapters, and reload pinned and lost adapters."""
        assert self._api is not None
        before = self._sequence
        present = await self._api.adapters()
        settled = [a for a in self._adapters.values() if a.changed_at <= before]
        lost = [a for a in settled if a.state is State.RESIDENT and a.served_name not in present]
        self._forget(lost)
        await self._adopt_or_drop(present, settled)
        now = self._clock()
        for adapter in [*lost, *(a for a in self._adapters.values() if a.spec.pinned)]:
            idle = adapter.state is State.ABSENT and adapter.task is None
            if idle and not adapter.version.broken and adapter.retry_at <= now:
                if adapter in lost:
                    self._metrics.reapplied.inc()
                self._start_load(adapter, may_wait=adapter.spec.pinned)

    def _forget(self, lost: list[Adapter]) -> None:
        """vLLM no longer has these (restart, or someone unloaded them by hand)."""
        if not lost:
            return
        log.warning("vLLM no longer holds %s: reloading", [a.served_name for a in lost])
        for adapter in lost:
            self._set_state(adapter, State.ABSENT)
        if not any(a.state is State.RESIDENT for a in self._adapters.values()):
            self._worker.restarted()
        self._publish()
        self._signal()

    async def _adopt_or_drop(self, present: set[str], settled: list[Adapter]) -> None:
        """Adapters vLLM holds that we did not load (after a sidecar restart): adopt ours
        while slots remain, unload the surplus and older versions of our adapters."""
        assert self._api is not None
        stable = {a.served_name: a for a in settled}
        for served in sorted(present):
            adapter = self._by_served.get(served)
            if adapter is not None:
                if stable.get(served) is not adapter or adapter.state is not State.ABSENT:
                    continue
                if adapter.task is None and self._occupied() < self.config.max_resident:
                    self._set_state(adapter, State.RESIDENT)
                    self._publish()
                    continue
            else:
                parsed = split_versioned(served)
                if parsed is None or parsed[0] not in self._adapters:
                    continue  # not ours (for example --lora-modules): leave it alone
            log.info("unloading %s: an old version, or beyond max_resident", served)
            await self._api.unload(served, UNLOAD_TIMEOUT_S)
            self._metrics.evicted(Eviction.STALE_VERSION if adapter is None else Eviction.CAPACITY)

    # -- introspection -----------------------------------------------------------------

    def describe(self) -> list[dict[str, object]]:
        """Per-adapter state, for the sidecar's admin endpoint."""
        now = self._clock()
        return [
            a.describe(now, self._policy.value(self._candidate(a), now))
            for a in self._adapters.values()
        ]

    def _occupied(self) -> int:
        return sum(1 for a in self._adapters.values() if a.state in OCCUPYING)

    def _set_state(self, adapter: Adapter, state: State) -> None:
        self._sequence += 1
        adapter.state = state
        adapter.changed_at = self._sequence

    def _publish(self) -> None:
        resident = [a for a in self._adapters.values() if a.state is State.RESIDENT]
        self._metrics.set_residency(len(resident), sum(a.version.size for a in resident))

    def _signal(self) -> None:
        """Wake everything waiting for a slot; they re-check under the event loop."""
        self._changed.set()
        self._changed = asyncio.Event()


def _clear_task(adapter: Adapter, done: asyncio.Task[AdapterUnavailable | None]) -> None:
    if adapter.task is done:
        adapter.task = None
