"""Watching vLLM: up or down, and which model it serves.

Why the sidecar keeps its own view instead of trying each request: while vLLM is down
(restarting, loading weights for minutes) a request that cannot be answered from cache
gets a 503 at once instead of waiting for a connection timeout, and the pod's readiness
(``GET /health``, answered from a live probe) follows vLLM's. Cached entries survive
the outage: the sidecar process keeps running.

Why a fingerprint: the revision is part of every cache partition, but a vLLM that comes
back serving different weights under the same revision (a mutable tag, a hand-edited
deployment) would make every cached answer wrong. The fingerprint is the base models vLLM
lists (``/v1/models`` entries without a parent: id and root, i.e. the weights' path or
repository); adapters loaded at run time have a parent and are left out, since L3 loads
and unloads them all the time. It is taken whenever vLLM comes (back) up and re-read
every few polls, which also catches a restart faster than one poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from .sidecar_metrics import SidecarMetrics

log = logging.getLogger("sits_inference.cache.upstream")

Fingerprint = tuple[tuple[str, str], ...]
# Re-read the fingerprint every this many successful polls while vLLM stays up.
FINGERPRINT_EVERY = 15


@dataclass(frozen=True, slots=True)
class CameUp:
    """What the sidecar needs to know when vLLM answers again."""

    first: bool  # the first time this sidecar process sees vLLM up
    previous: Fingerprint | None
    current: Fingerprint | None

    @property
    def model_changed(self) -> bool:
        return (
            self.previous is not None and self.current is not None and self.previous != self.current
        )


OnUp = Callable[[CameUp], Awaitable[None]]


def fingerprint_of(models: object) -> Fingerprint | None:
    """The base models of a ``/v1/models`` answer; None when it is not one."""
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        return None
    pairs = []
    for card in models["data"]:
        if isinstance(card, dict) and isinstance(card.get("id"), str) and not card.get("parent"):
            root = card.get("root")
            pairs.append((card["id"], root if isinstance(root, str) else ""))
    return tuple(sorted(pairs))


class UpstreamMonitor:
    """Probes ``/health``; on each change of state it updates ``up`` and tells ``on_up``."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        metrics: SidecarMetrics,
        on_up: OnUp,
        interval_s: float = 2.0,
        probe_timeout_s: float = 2.0,
    ) -> None:
        self._session = session
        self._base = base_url
        self._metrics = metrics
        self._on_up = on_up
        self._interval = interval_s
        self._timeout = aiohttp.ClientTimeout(total=probe_timeout_s)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._poke: asyncio.Task[bool] | None = None
        self._polls_since_fingerprint = 0
        self.up = False
        self.ever_up = False
        self.fingerprint: Fingerprint | None = None
        self.detail = "not checked yet"
        self.since = time.time()

    async def check(self) -> bool:
        """Probe now and apply any change of state; returns whether vLLM is up."""
        healthy, detail = await self._probe()
        async with self._lock:
            self.detail = detail
            if healthy and not self.up:
                await self._came_up()
            elif not healthy and self.up:
                self._went_down()
            elif healthy:
                self._polls_since_fingerprint += 1
                if self._polls_since_fingerprint >= FINGERPRINT_EVERY:
                    await self._refresh_fingerprint()
        return self.up

    def poke(self) -> None:
        """A request just failed to reach vLLM: check soon rather than at the next poll."""
        if self._poke is None or self._poke.done():
            self._poke = asyncio.create_task(self.check())

    async def _probe(self) -> tuple[bool, str]:
        try:
            async with self._session.get(f"{self._base}/health", timeout=self._timeout) as resp:
                await resp.read()
                return resp.status == 200, f"/health answered {resp.status}"
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            return False, f"/health failed: {type(err).__name__}: {err}"

    async def _models(self) -> Fingerprint | None:
        try:
            async with self._session.get(f"{self._base}/v1/models", timeout=self._timeout) as resp:
                if resp.status != 200:
                    return None
                return fingerprint_of(await resp.json(content_type=None))
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            return None

    async def _came_up(self) -> None:
        current = await self._models()
        event = CameUp(first=not self.ever_up, previous=self.fingerprint, current=current)
        if current is not None:
            self.fingerprint = current
        self._polls_since_fingerprint = 0
        log.info("vLLM at %s is up (models: %s)", self._base, current)
        await self._on_up(event)  # before `up`: no request sees the new model with old entries
        if not event.first:
            self._metrics.upstream_recoveries.inc()
        self.up, self.ever_up, self.since = True, True, time.time()
        self._metrics.upstream_up.set(1)

    def _went_down(self) -> None:
        log.warning("vLLM at %s is down: %s", self._base, self.detail)
        self.up, self.since = False, time.time()
        self._metrics.upstream_up.set(0)

    async def _refresh_fingerprint(self) -> None:
        """A restart faster than a poll is seen here: same handling as a return."""
        self._polls_since_fingerprint = 0
        current = await self._models()
        if current is None or current == self.fingerprint:
            return
        log.warning("vLLM's models changed without a visible outage: %s", current)
        previous, self.fingerprint = self.fingerprint, current
        await self._on_up(CameUp(first=False, previous=previous, current=current))

    # -- the background poll ----------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="sits-cache-upstream-monitor")

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except Exception:  # a bug in a callback must not end the monitoring
                log.exception("upstream check failed")
            await asyncio.sleep(self._interval)

    async def close(self) -> None:
        for task in (self._task, self._poke):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._poke = None

    def describe(self) -> dict[str, object]:
        return {
            "url": self._base,
            "up": self.up,
            "since": self.since,
            "detail": self.detail,
            "models": [list(pair) for pair in self.fingerprint or ()],
        }
