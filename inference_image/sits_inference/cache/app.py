"""The sidecar's HTTP front: chat and completions through L1, everything else to vLLM.

Per chat or completion request, in order: read and check the body (4xx, never a tier);
take the L3 lease when the model is an adapter (its digest joins the cache partition, its
versioned name goes upstream); then one of

- ``bypass``: the client sent ``x-sits-cache: bypass``: no lookup, no store;
- ``skip``: L1 does not admit the request (sampled, n > 1, disabled...), reason in
  ``x-sits-cache-reason``;
- ``hit``: L1 found an answer above its threshold that its near-miss guard accepts;
  served as JSON or replayed as SSE, with ``x-sits-cache-similarity``;
- ``miss``: sent to vLLM, and the complete answer stored (a stream once ``[DONE]``);
  a non-streamed request identical to one already at vLLM waits for that one's answer
  instead (``coalesce.py``) and is then a ``hit`` with ``x-sits-cache-coalesced: true``.

L1 lookups and stores run on a small thread pool: embedding is CPU-bound and must never
block the event loop that relays other requests' streams.

A miss must cost the client next to nothing (issue 16; ``benchmarks/cache_miss_path.py``).
L1's exact-match part runs on the loop (``lookup.py``); when only the semantic search can
still find a hit, the request is sent to vLLM at once, while concurrent searches share one
embedding pass, and dropped (its connection closed) if the search finds a hit. The answer
is relayed as it arrives and stored in the background; a request for the same question
waits for that store (milliseconds), so asking again right after an answer is a hit.

Every chat or completion request also feeds the request-metric contract
(``sits_inference.openai.metrics``, ``source="sidecar"``) on the same ``/metrics``: the
sidecar sees every request its pod serves whatever routes traffic to it, so the analysis
has SLIs with any router. A hit counts as a request of the variant (it is what the client
got), with the usage it reports.

While vLLM is down, cache hits are still served (same revision, same answers; the pod is
out of its Service by then anyway, since ``/health`` follows vLLM) and everything else
gets a 503 at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import orjson
from aiohttp import web

from ..openai.errors import ApiError, ErrorType
from ..openai.metrics import (
    CLIENT_CLOSED,
    RequestMetrics,
    RequestRecord,
    Source,
    apply_usage,
    estimated_prompt_tokens,
    prometheus_meter_provider,
)
from ..openai.replies import metrics_reply
from ..openai.requests import Operation
from ..openai.serving import start_site
from ..openai.usage import Usage
from . import admin
from .coalesce import MissCoalescer
from .completions import CachedCompletion, Kind, response_document, stream_events
from .lookup import Lookups
from .lora import AdapterLease, AdapterUnavailable, LoraResidency
from .metrics import CacheMetrics
from .relay import CACHE_HEADER, Forward, Relay, Store, reply, unavailable
from .request import InferenceCall, read_call
from .semantic import Admission, CacheRequest, Hit, Probe, SkipReason
from .settings import SidecarSettings
from .sidecar_metrics import (
    CacheOutcome,
    CoalesceResult,
    Invalidation,
    SidecarMetrics,
    StoreResult,
    UpstreamFailure,
)
from .tiers import Tiers, lease_for
from .upstream import CameUp, UpstreamMonitor

log = logging.getLogger("sits_inference.cache")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
T = TypeVar("T")
SIMILARITY_HEADER = "x-sits-cache-similarity"
AGE_HEADER = "x-sits-cache-age"
REASON_HEADER = "x-sits-cache-reason"
COALESCED_HEADER = "x-sits-cache-coalesced"
OPERATIONS: dict[Kind, Operation] = {"chat": Operation.CHAT, "completion": Operation.COMPLETION}


@dataclass(frozen=True, slots=True)
class CachePlan:
    """What L1 does with a request, settled before any lookup: bypass it, skip it (and
    why), or look it up with its admission (a miss unless a lookup finds a hit)."""

    outcome: CacheOutcome
    admission: Admission | None = None
    reason: SkipReason | None = None


class Sidecar:
    """Owns the upstream session, the monitor and the lookup threads; not the tiers'
    construction (``build_tiers``), but their start and close."""

    def __init__(self, settings: SidecarSettings, metrics: CacheMetrics, tiers: Tiers) -> None:
        self.settings = settings
        self.cache_metrics = metrics
        self.metrics = SidecarMetrics(metrics.registry)
        # The contract's series go to the same registry, so one /metrics serves both.
        self._provider, _ = prometheus_meter_provider("sits-cache", metrics.registry)
        self.requests = RequestMetrics(
            self._provider.get_meter("sits.cache"), source=Source.SIDECAR
        )
        self.tiers = tiers
        self._executor = ThreadPoolExecutor(settings.lookup_workers, thread_name_prefix="sits-l1")
        self._session: aiohttp.ClientSession | None = None
        self._monitor: UpstreamMonitor | None = None
        self._relay: Relay | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._coalescer = MissCoalescer(settings.coalesce_wait_s)
        self.metrics.leading.set_function(lambda: len(self._coalescer))
        self._lookups = (
            Lookups(tiers.semantic, self.in_thread) if tiers.semantic is not None else None
        )

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=4.0),
            auto_decompress=False,  # bytes pass through exactly as vLLM sent them
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
        )
        self._monitor = UpstreamMonitor(
            self._session,
            self.settings.upstream,
            metrics=self.metrics,
            on_up=self._upstream_came_up,
            interval_s=self.settings.health_interval_s,
        )
        self._relay = Relay(
            self._session,
            self.settings.upstream,
            self._monitor,
            self.metrics,
            connect_timeout_s=self.settings.connect_timeout_s,
            read_timeout_s=self.settings.upstream_timeout_s,
        )
        if self.tiers.vector is not None:
            await self.tiers.vector.start()
        if self.tiers.lora is not None:
            await self.tiers.lora.start()  # before the first check may call it
        await self._monitor.check()
        self._monitor.start()

    async def close(self) -> None:
        if self._monitor is not None:
            await self._monitor.close()
        if self._lookups is not None:
            await self._lookups.close()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.tiers.lora is not None:
            await self.tiers.lora.close()
        if self.tiers.vector is not None:
            await self.tiers.vector.close()
        if self._session is not None:
            await self._session.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._provider.shutdown()

    @property
    def monitor(self) -> UpstreamMonitor:
        assert self._monitor is not None, "Sidecar.open() was not awaited"
        return self._monitor

    @property
    def relay(self) -> Relay:
        assert self._relay is not None, "Sidecar.open() was not awaited"
        return self._relay

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.settings.max_body_bytes)
        app.router.add_post("/v1/chat/completions", self._inference("chat"))
        app.router.add_post("/v1/completions", self._inference("completion"))
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics_page)
        app.router.add_routes(admin.routes(self))
        if self.tiers.vector is not None:
            app.router.add_routes(self.tiers.vector.routes())
        app.router.add_route("*", "/{tail:.*}", self.passthrough)
        return app

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking tier work (embedding, index search) off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def spawn(self, coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._finished)
        return task

    async def settle_stores(self) -> None:
        """Wait for the answers being stored now (before an invalidation or stats)."""
        if self._lookups is not None:
            await self._lookups.settled()

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed", task.get_name(), exc_info=task.exception())

    async def _upstream_came_up(self, event: CameUp) -> None:
        """Invalidate when vLLM serves other weights; re-apply L3 (its reconciliation is
        idempotent, so also at the first sight of vLLM: pinned adapters load at once)."""
        if event.model_changed and self.tiers.semantic is not None:
            await self.settle_stores()
            removed = await self.in_thread(self.tiers.semantic.invalidate)
            self.metrics.invalidations.labels(Invalidation.MODEL_CHANGED).inc(removed)
            log.warning(
                "vLLM now serves %s (was %s): %d cached answers dropped",
                event.current,
                event.previous,
                removed,
            )
        lora = self.tiers.lora
        if lora is not None:
            self.spawn(lora.upstream_restarted(), "sits-cache-lora-reapply")

    # -- plain endpoints -------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        """200 only while vLLM's /health answers: the pod's readiness follows vLLM's."""
        up = await self.monitor.check()
        body = {"status": "ok" if up else "upstream_unavailable", "upstream": self.monitor.detail}
        return web.json_response(body, status=200 if up else 503)

    async def metrics_page(self, request: web.Request) -> web.Response:
        return metrics_reply(self.cache_metrics.registry)

    async def passthrough(self, request: web.Request) -> web.StreamResponse:
        return await self.relay.passthrough(request)

    async def models(self, request: web.Request) -> web.StreamResponse:
        """vLLM's list, with L3's versioned adapter names shown as clients use them."""
        lora = self.tiers.lora
        if lora is None:
            return await self.relay.passthrough(request)
        return await self.relay.rewrite_json(request, lambda doc: rename_models(doc, lora))

    # -- chat and completions --------------------------------------------------------------

    def _inference(self, kind: Kind) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            started = time.perf_counter()
            outcome = CacheOutcome.CANCELLED  # unless decided: the client left (aiohttp cancels)
            # code 0 until known; left at 0 (cancelled before an answer) it becomes 499
            rec = RequestRecord(self.settings.variant, OPERATIONS[kind], "", 0, 0.0, 0)
            try:
                try:
                    call = await read_call(request, kind, self.settings.max_body_bytes)
                except ApiError as err:
                    outcome, rec.code = CacheOutcome.REJECTED, err.status
                    return reply(err)
                rec.model, rec.prompt_tokens = call.model, estimated_prompt_tokens(call.raw)
                response, outcome = await self._serve(request, call, rec, started)
                rec.code = rec.code or response.status
                if outcome is CacheOutcome.HIT and call.stream:  # replayed in one write
                    rec.ttft_s = time.perf_counter() - started
                return response
            except Exception:
                outcome, rec.code = CacheOutcome.ERROR, rec.code or 500
                raise
            finally:
                duration = time.perf_counter() - started
                self.metrics.requests.labels(outcome).inc()
                self.metrics.duration.labels(outcome).observe(duration)
                self._record(rec, duration)

        return handle

    def _record(self, rec: RequestRecord, duration: float) -> None:
        """The contract's sample (code 499 when the client left before an answer)."""
        rec.code, rec.duration_s = rec.code or CLIENT_CLOSED, duration
        self.requests.record(rec, self.settings.namespace, self.settings.deployment)

    async def _serve(
        self, request: web.Request, call: InferenceCall, rec: RequestRecord, started: float
    ) -> tuple[web.StreamResponse, CacheOutcome]:
        bypass = request.headers.get(CACHE_HEADER, "").strip().lower() == "bypass"
        try:
            async with lease_for(self.tiers.lora, call.model) as lease:
                return await self._with_lease(request, call, lease, bypass, rec, started)
        except AdapterUnavailable as err:
            if err.status != 404:
                self.metrics.upstream_errors.labels(UpstreamFailure.UNAVAILABLE).inc()
            code = "model_not_found" if err.status == 404 else "adapter_unavailable"
            type_ = ErrorType.NOT_FOUND if err.status == 404 else ErrorType.UNAVAILABLE
            error = ApiError(err.status, err.message, type=type_, code=code)
            return reply(error), CacheOutcome.ERROR

    async def _with_lease(
        self,
        request: web.Request,
        call: InferenceCall,
        lease: AdapterLease | None,
        bypass: bool,
        rec: RequestRecord,
        started: float,
    ) -> tuple[web.StreamResponse, CacheOutcome]:
        plan = self._plan(call, lease, bypass)
        headers: dict[str, str] = {CACHE_HEADER: plan.outcome}
        if plan.reason:
            headers[REASON_HEADER] = plan.reason
        admission = plan.admission
        search = False  # only L1's semantic search can still find a hit
        if admission is not None and (self.monitor.up or self.settings.serve_hits_when_down):
            probe = await self.lookups.probe(admission)
            if probe is None or (probe.search and not self.monitor.up):  # decide first
                probe = Probe(await self.lookups.search(admission), search=False)
            search = probe.search
            hit = probe.hit
            served = await self._from_hit(request, call, hit, rec) if hit is not None else None
            if served is not None:
                return served, CacheOutcome.HIT
        if not self.monitor.up:
            self.metrics.upstream_errors.labels(UpstreamFailure.UNAVAILABLE).inc()
            return reply(unavailable(self.monitor.detail), headers), CacheOutcome.ERROR
        key = None if admission is None else (admission.partition, admission.exact)
        if admission is not None and not call.stream:
            followed = await self._follow(request, call, admission, rec)
            if followed is not None:
                return followed, CacheOutcome.HIT
        fwd = self._forward(request, call, lease, admission, headers, rec, started)
        async with self._coalescer.lead(key):
            # Sent while L1 searches: vLLM's time to the first token hides the embedding.
            sent = self.relay.speculate(request, fwd) if admission is not None and search else None
            try:
                if sent is not None and admission is not None:
                    hit = await self.lookups.search(admission)
                    served = await self._from_hit(request, call, hit, rec) if hit else None
                    if served is not None:
                        sent.abandon()
                        return served, CacheOutcome.HIT
                response = await self.relay.inference(request, fwd, sent)
            except BaseException:  # the client left while L1 searched, or a bug
                if sent is not None:
                    sent.abandon()
                raise
        return response, plan.outcome if response.status < 500 else CacheOutcome.ERROR

    def _forward(
        self,
        request: web.Request,
        call: InferenceCall,
        lease: AdapterLease | None,
        admission: Admission | None,
        headers: dict[str, str],
        rec: RequestRecord,
        started: float,
    ) -> Forward:
        storing = admission is not None
        add_usage = storing and call.stream and not call.include_usage
        served_model = lease.served_name if lease is not None else call.model
        return Forward(
            path=request.raw_path,
            body=call.upstream_body(model=served_model, add_usage=add_usage),
            kind=call.kind,
            client_model=call.model,
            served_model=served_model,
            strip_usage=add_usage,
            cache_headers=headers,
            store=self._storer(admission) if admission is not None else None,
            record=rec,
            started=started,
        )

    async def _follow(
        self, request: web.Request, call: InferenceCall, admission: Admission, rec: RequestRecord
    ) -> web.StreamResponse | None:
        """Wait for an identical request already at vLLM, then serve its stored answer."""
        key = (admission.partition, admission.exact)
        if not self._coalescer.leading(key):
            return None
        if not await self._coalescer.follow(key):
            self.metrics.coalesced.labels(CoalesceResult.TIMEOUT).inc()
            return None
        hit = await self.lookups.lookup(admission)
        served = await self._from_hit(request, call, hit, rec) if hit is not None else None
        found = CoalesceResult.HIT if served is not None else CoalesceResult.MISS
        self.metrics.coalesced.labels(found).inc()
        if served is not None:
            served.headers[COALESCED_HEADER] = "true"
        return served

    def _plan(self, call: InferenceCall, lease: AdapterLease | None, bypass: bool) -> CachePlan:
        semantic = self.tiers.semantic
        if bypass:
            return CachePlan(CacheOutcome.BYPASS)
        if semantic is None:
            return self._skip(SkipReason.DISABLED)
        request = CacheRequest(
            kind=call.kind,
            body=call.doc,
            model=call.model,
            revision=self.settings.revision,
            adapter_digest=lease.digest if lease is not None else None,
        )
        try:
            admission = semantic.admit(request)
        except Exception:  # L1 must never turn a valid request into a crash
            log.exception("L1 admit failed; request not cached")
            return self._skip(SkipReason.ADMIT_ERROR)
        if admission.reason is not None:  # not cacheable, and why
            return self._skip(admission.reason)
        return CachePlan(CacheOutcome.MISS, admission)

    def _skip(self, reason: SkipReason) -> CachePlan:
        self.metrics.skipped.labels(reason).inc()
        return CachePlan(CacheOutcome.SKIP, reason=reason)

    @property
    def lookups(self) -> Lookups:
        assert self._lookups is not None, "L1 is disabled"
        return self._lookups

    def _storer(self, admission: Admission) -> Store:
        """Hands a complete answer to L1: stored in the background, off the response."""
        semantic = self.tiers.semantic
        assert semantic is not None

        async def store(cached: CachedCompletion) -> None:
            try:
                await self.in_thread(lambda: semantic.store(admission, cached.to_payload()))
            except Exception:
                self.metrics.stores.labels(StoreResult.FAILED).inc()
                log.exception("L1 store failed")
            else:
                self.metrics.stores.labels(StoreResult.STORED).inc()

        def hand_over(cached: CachedCompletion) -> None:
            self.lookups.storing(admission, self.spawn(store(cached), "sits-cache-store"))

        return hand_over

    # -- hits ------------------------------------------------------------------------------

    async def _from_hit(
        self, request: web.Request, call: InferenceCall, hit: Hit, rec: RequestRecord
    ) -> web.StreamResponse | None:
        try:
            cached = CachedCompletion.from_payload(hit.payload)
        except ValueError:
            log.exception("unreadable cached entry; treated as a miss")
            return None
        if cached.kind != call.kind:
            return None
        if cached.usage is not None:  # what the answer cost when generated, as the client sees
            apply_usage(rec, usage_of(cached.usage))
        headers = {
            CACHE_HEADER: CacheOutcome.HIT,
            SIMILARITY_HEADER: f"{hit.similarity:.4f}",
            AGE_HEADER: f"{hit.age_seconds:.1f}",
        }
        if call.stream:
            return await self._replay(request, call, cached, headers)
        body = orjson.dumps(response_document(cached, model=call.model))
        return web.Response(body=body, content_type="application/json", headers=headers)

    async def _replay(
        self,
        request: web.Request,
        call: InferenceCall,
        cached: CachedCompletion,
        headers: dict[str, str],
    ) -> web.StreamResponse:
        events = stream_events(cached, model=call.model, include_usage=call.include_usage)
        response = web.StreamResponse(
            headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await response.prepare(request)
            await response.write(b"".join(events))
            await response.write_eof()
        except ConnectionError:
            return response  # the client left; nothing upstream to cancel
        self.metrics.replayed_streams.inc()
        return response


def usage_of(counts: Mapping[str, int]) -> Usage:
    return Usage(counts.get("prompt_tokens"), counts.get("completion_tokens"))


def rename_models(doc: Any, lora: LoraResidency) -> Any:
    """``a1@3f2a9c`` -> ``a1`` in a ``/v1/models`` answer (ids only; roots keep paths)."""
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        for card in doc["data"]:
            if isinstance(card, dict) and isinstance(card.get("id"), str):
                card["id"] = lora.client_name(card["id"]) or card["id"]
    return doc


@dataclass
class RunningSidecar:
    """A started sidecar (for the CLI, tests and benchmarks): its URL, and how to stop it."""

    sidecar: Sidecar
    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.sidecar.close()


async def start_sidecar(
    settings: SidecarSettings, tiers: Tiers, metrics: CacheMetrics
) -> RunningSidecar:
    """Open the sidecar and serve it on ``settings.host:settings.port`` (0: any free port)."""
    sidecar = Sidecar(settings, metrics, tiers)
    await sidecar.open()
    runner, url = await start_site(sidecar.app(), settings.host, settings.port)
    return RunningSidecar(sidecar, runner, url)
