"""Forwarding one admitted request to the chosen endpoint, and relaying the answer.

One shared aiohttp ``ClientSession`` (keep-alive pool per upstream) serves every request:
a client per request would pay a TCP handshake and allocations each time. Responses
that are server-sent events are relayed chunk by chunk as they arrive (no buffering
beyond one event); other responses are small JSON documents, read whole so their
``usage`` can be counted.

Failure mapping, all counted as errors of the chosen variant: a refused or reset
connection is 502, a connect or read timeout is 504. Once a stream has started, the
status is already sent: a failed upstream then ends the stream with vLLM's own error
event and an aborted connection (the client sees an incomplete body, never a clean end),
and the request is counted with the code it would have had. A client that goes away
closes the upstream connection, which is how vLLM learns to abort the generation; it is
counted as 499, which is not an error of the variant.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from opentelemetry import propagate, trace
from yarl import URL

from ..openai.errors import ApiError, ErrorType, sse_error_event
from ..openai.headers import relayed_headers, upstream_headers
from ..openai.metrics import CLIENT_CLOSED, RequestRecord, apply_usage
from ..openai.replies import error_reply
from ..openai.usage import SseUsageFilter, usage_from_body
from . import errors
from .balance import Pick
from .request import InferenceRequest
from .telemetry import Probes

_MAX_USAGE_BODY = 4 << 20  # parse usage of bodies up to 4 MiB (embeddings can be large)
VARIANT_HEADER = "x-sits-variant"


@dataclass(frozen=True, slots=True)
class UpstreamSettings:
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 300.0
    # Idle pooled connections are dropped after this; keep it below the upstream's own
    # keep-alive timeout (uvicorn, hence vLLM: 5 s) so the pool rarely hands out one the
    # upstream is closing.
    keepalive_s: float = 4.0


def server_timing(gateway_s: float, upstream_s: float) -> str:
    """``Server-Timing``: the gateway's share of the latency beside the upstream's (ms)."""
    return f"gateway;dur={gateway_s * 1000:.3f}, upstream;dur={upstream_s * 1000:.3f}"


def response_headers(
    upstream: CIMultiDictProxy[str], variant: str, timing: str
) -> CIMultiDict[str]:
    return relayed_headers(upstream, {VARIANT_HEADER: variant, "Server-Timing": timing})


def error_response(err: ApiError, variant: str | None = None) -> web.Response:
    """The gateway's own answer; naming the variant when one was chosen."""
    return error_reply(err, {VARIANT_HEADER: variant} if variant else None)


class Forwarder:
    """Sends requests upstream through one pooled session and records each one."""

    def __init__(
        self, session: aiohttp.ClientSession, probes: Probes, settings: UpstreamSettings
    ) -> None:
        self._session = session
        self._probes = probes
        self._settings = settings
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=settings.connect_timeout_s,
            sock_read=settings.read_timeout_s,
        )
        self._urls: dict[tuple[str, str], URL] = {}
        self.tracing = not isinstance(probes.tracer, trace.NoOpTracer)

    def _url(self, endpoint: str, path: str) -> URL:
        key = (endpoint, path)
        url = self._urls.get(key)
        if url is None:
            if len(self._urls) > 1024:  # paths carry query strings: keep the memo bounded
                self._urls.clear()
            url = self._urls[key] = URL(endpoint + path)
        return url

    async def forward(
        self, request: web.Request, inference: InferenceRequest, pick: Pick, started: float
    ) -> web.StreamResponse:
        """Proxy one request; record it whatever happens (cancellation included)."""
        rec = RequestRecord(
            variant=pick.variant,
            operation=inference.operation,
            model=inference.model,
            code=0,
            duration_s=0.0,
            prompt_tokens=inference.estimated_prompt_tokens,
            endpoint=pick.endpoint,
        )
        span = self._start_span(request, inference) if self.tracing else None
        headers = upstream_headers(request.headers, request.remote)
        if span is not None:
            propagate.inject(headers, context=trace.set_span_in_context(span))
        try:
            return await self._exchange(request, inference, pick, rec, headers, started)
        except asyncio.CancelledError:
            rec.code, rec.error_type = CLIENT_CLOSED, "client_closed"
            raise
        finally:
            rec.duration_s = time.perf_counter() - started
            self._probes.record(rec, span)
            if span is not None:
                span.end()

    def _start_span(self, request: web.Request, inference: InferenceRequest) -> trace.Span:
        return self._probes.tracer.start_span(
            f"{inference.operation} {inference.model}",
            context=propagate.extract(request.headers),
            kind=trace.SpanKind.SERVER,
        )

    async def _exchange(
        self,
        request: web.Request,
        inference: InferenceRequest,
        pick: Pick,
        rec: RequestRecord,
        headers: CIMultiDict[str],
        started: float,
    ) -> web.StreamResponse:
        sent = time.perf_counter()
        url = self._url(pick.endpoint, request.raw_path)
        try:
            upstream = await self._send(url, inference.body, headers, rec.variant)
            async with upstream:
                if upstream.content_type == "text/event-stream":
                    relay = _StreamRelay(request, upstream, inference, rec, started)
                    return await relay.run(sent)
                return await self._relay_body(upstream, rec, started, sent)
        except TimeoutError:
            err = errors.upstream_timeout(pick.variant, self._settings.read_timeout_s)
            rec.error_type = "timeout"
        except aiohttp.ClientError as exc:
            err = errors.upstream_refused(pick.variant, type(exc).__name__)
            rec.error_type = type(exc).__name__
        rec.code = err.status
        return error_response(err, pick.variant)

    async def _send(
        self, url: URL, body: bytes, headers: CIMultiDict[str], variant: str
    ) -> aiohttp.ClientResponse:
        """POST and wait for the response headers, retrying once on a closed pooled connection.

        The keep-alive race: the upstream (uvicorn in vLLM: 5 s idle timeout) closes an idle
        connection just as the pool hands it out, and the request fails before any answer.
        The upstream never read that request, so one retry (same variant, same endpoint, a
        fresh connection) is safe; a dead upstream then refuses the new connection and the
        request still counts as that variant's error.
        """
        try:
            return await self._session.post(url, data=body, headers=headers, timeout=self._timeout)
        except aiohttp.ServerDisconnectedError:
            self._probes.retried(variant)
        return await self._session.post(url, data=body, headers=headers, timeout=self._timeout)

    async def _relay_body(
        self, upstream: aiohttp.ClientResponse, rec: RequestRecord, started: float, sent: float
    ) -> web.Response:
        body = await upstream.read()
        upstream_s = time.perf_counter() - sent
        rec.code = upstream.status
        if rec.code >= 500:
            rec.error_type = str(rec.code)
        if len(body) <= _MAX_USAGE_BODY and upstream.content_type == "application/json":
            apply_usage(rec, usage_from_body(body))
        gateway_s = time.perf_counter() - started - upstream_s
        timing = server_timing(gateway_s, upstream_s)
        headers = response_headers(upstream.headers, rec.variant, timing)
        return web.Response(body=body, status=upstream.status, headers=headers)


class _StreamRelay:
    """Moves one SSE stream from upstream to the client, ending it cleanly or loudly."""

    def __init__(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        inference: InferenceRequest,
        rec: RequestRecord,
        started: float,
    ) -> None:
        self._request, self._upstream = request, upstream
        self._rec, self._started = rec, started
        self._filter = SseUsageFilter(strip=inference.strip_usage_event)
        self._response = web.StreamResponse(status=upstream.status)

    async def run(self, sent: float) -> web.StreamResponse:
        """Send the headers at once (their Server-Timing: upstream = time to its headers)."""
        self._rec.code = self._upstream.status
        if self._rec.code >= 500:
            self._rec.error_type = str(self._rec.code)
        upstream_s = time.perf_counter() - sent
        timing = server_timing(time.perf_counter() - self._started - upstream_s, upstream_s)
        self._response.headers.extend(
            response_headers(self._upstream.headers, self._rec.variant, timing)
        )
        try:
            await self._prepare()
            await self._pump()
        except _ClientGoneError:
            pass
        except TimeoutError:
            await self._fail(504, "timeout", "the upstream stopped sending")
        except (aiohttp.ClientError, OSError) as exc:
            await self._fail(502, type(exc).__name__, "the upstream connection broke")
        finally:
            apply_usage(self._rec, self._filter.usage)
        return self._response

    async def _prepare(self) -> None:
        try:
            await self._response.prepare(self._request)
        except ConnectionError as exc:
            self._client_left()
            raise _ClientGoneError() from exc

    async def _pump(self) -> None:
        first = True
        async for chunk in self._upstream.content.iter_any():
            if first:
                self._rec.ttft_s, first = time.perf_counter() - self._started, False
            out = self._filter.feed(chunk)
            if out:
                await self._write(out)
        tail = self._filter.flush()
        if tail:
            await self._write(tail)
        try:
            await self._response.write_eof()
        except ConnectionError as exc:
            self._client_left()
            raise _ClientGoneError() from exc

    async def _write(self, data: bytes) -> None:
        try:
            await self._response.write(data)
        except ConnectionError as exc:
            self._client_left()
            raise _ClientGoneError() from exc

    def _client_left(self) -> None:
        """Closing the upstream response is what tells vLLM to stop generating."""
        self._rec.code, self._rec.error_type = CLIENT_CLOSED, "client_closed"
        self._upstream.close()

    async def _fail(self, code: int, error_type: str, message: str) -> None:
        self._rec.code, self._rec.error_type = code, error_type
        self._upstream.close()
        if self._response.prepared:
            with contextlib.suppress(ConnectionError):
                await self._response.write(sse_error_event(message, ErrorType.UPSTREAM, code))
        transport = self._request.transport
        if transport is not None:
            transport.abort()  # no terminating chunk: the client must not see a clean end


class _ClientGoneError(Exception):
    """The client's side of a stream closed; nothing more is owed to it."""
