"""Sending requests to vLLM and relaying its answers, storing complete misses on the way.

One pooled aiohttp session serves every request (keep-alive below uvicorn's 5 s, as in
the gateway). Streams are relayed event by event as they arrive; a client that goes away
cancels the handler, which closes the upstream connection, which is how vLLM learns to
abort the generation. Failure mapping: vLLM known down or refusing connections is 503
(the pod's vLLM is restarting: retry), a timeout is 504, a connection that breaks is 502.
Once a stream has started its status is sent: a failure then ends it with vLLM's own
error event and an aborted connection, so the client never sees a clean end.

A miss costs the client nothing for the cache (issue 16): the request can be sent while
L1 still searches (`speculate`; dropped, connection closed, when the search finds a hit),
events are relayed as they arrive, and the complete answer is handed to L1 without
waiting for the store, which runs in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from ..openai.errors import JSON_ERRORS, ApiError, ErrorType, sse_error_event
from ..openai.headers import relayed_headers, upstream_headers
from ..openai.metrics import CLIENT_CLOSED, RequestRecord, apply_usage
from ..openai.replies import error_reply
from ..openai.sse import (
    DONE_EVENT,
    SseSplitter,
    data_event,
    event_data,
    is_done,
    is_usage_only,
    parse_event_json,
)
from ..openai.usage import usage_from_body, usage_from_document
from .assembler import StreamAssembler
from .completions import CachedCompletion, Kind, from_response
from .sidecar_metrics import SidecarMetrics, StoreResult, UpstreamFailure
from .upstream import UpstreamMonitor

log = logging.getLogger("sits_inference.cache.relay")

CACHE_HEADER = "x-sits-cache"
# Passthrough bodies up to this size are read whole (so a closed pooled connection can be
# retried); larger ones are streamed to vLLM as they arrive.
_READ_WHOLE = 1 << 20
# A 503 of the sidecar means vLLM is restarting: worth another try a second later.
RETRY_AFTER_S = 1

# Hands a complete answer to L1 and returns at once (the store runs in the background).
Store = Callable[[CachedCompletion], None]


def unavailable(detail: str) -> ApiError:
    return ApiError(
        503,
        f"The model server is not available ({detail}); retry shortly.",
        type=ErrorType.UNAVAILABLE,
        code="upstream_unavailable",
    )


def reply(err: ApiError, headers: Mapping[str, str] | None = None) -> web.Response:
    """The sidecar's own error answer (a 503 with ``Retry-After``)."""
    return error_reply(err, headers, retry_after_s=RETRY_AFTER_S)


@dataclass(frozen=True, slots=True)
class Forward:
    """How one inference request goes to vLLM and comes back."""

    path: str
    body: bytes
    kind: Kind
    client_model: str
    served_model: str
    # The sidecar added stream_options.include_usage: drop the usage-only event again.
    strip_usage: bool = False
    store: Store | None = None
    cache_headers: Mapping[str, str] = field(default_factory=dict)
    # The request-metric contract's record, and when the request was received: the relay
    # adds what only it sees (time to the first chunk, usage, the code of a stream that
    # broke after its status was sent).
    record: RequestRecord | None = None
    started: float = 0.0

    @property
    def rewrite(self) -> bool:
        return self.served_model != self.client_model


class Relay:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        monitor: UpstreamMonitor,
        metrics: SidecarMetrics,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
    ) -> None:
        self._session = session
        self._base = base_url
        self._monitor = monitor
        self._metrics = metrics
        self._read_timeout_s = read_timeout_s
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s
        )

    # -- inference ----------------------------------------------------------------------

    def speculate(self, request: web.Request, fwd: Forward) -> Speculation:
        """Send the request now; `inference` relays its answer, or `abandon` drops it."""
        send = self._send("POST", fwd.path, fwd.body, _inference_headers(request))
        return Speculation(asyncio.create_task(send, name="sits-cache-speculative"))

    async def inference(
        self, request: web.Request, fwd: Forward, sent: Speculation | None = None
    ) -> web.StreamResponse:
        try:
            if sent is None:
                sending = self._send("POST", fwd.path, fwd.body, _inference_headers(request))
            else:
                sending = sent.response()
            upstream = await self._counting(sending)
            async with upstream:
                if upstream.content_type == "text/event-stream":
                    return await _StreamRelay(request, upstream, fwd, self._metrics).run()
                return await self._whole(upstream, fwd)
        except ApiError as err:
            return reply(err, fwd.cache_headers)

    async def _whole(self, upstream: aiohttp.ClientResponse, fwd: Forward) -> web.Response:
        try:
            body = await upstream.read()
        except TimeoutError:
            raise self._timed_out() from None
        except aiohttp.ClientError as exc:
            raise self._broken(exc) from None
        ok = upstream.status == 200 and upstream.content_type == "application/json"
        if ok and (fwd.store is not None or fwd.rewrite):
            body = self._inspect(body, fwd)
        elif fwd.store is not None:
            self._metrics.stores.labels(StoreResult.NOT_STORABLE).inc()
        rec = fwd.record
        if ok and rec is not None and not rec.usage_known:  # not parsed by _inspect
            apply_usage(rec, usage_from_body(body))
        headers = relayed_headers(upstream.headers, fwd.cache_headers)
        return web.Response(body=body, status=upstream.status, headers=headers)

    def _inspect(self, body: bytes, fwd: Forward) -> bytes:
        """Hand the complete answer to L1; give it the client's model name back."""
        try:
            doc = orjson.loads(body)
        except JSON_ERRORS:
            if fwd.store is not None:
                self._metrics.stores.labels(StoreResult.NOT_STORABLE).inc()
            return body
        if fwd.record is not None:
            apply_usage(fwd.record, usage_from_document(doc))
        if fwd.store is not None:
            cached = from_response(fwd.kind, doc)
            if cached is None:
                self._metrics.stores.labels(StoreResult.NOT_STORABLE).inc()
            else:
                fwd.store(cached)
        if fwd.rewrite and isinstance(doc, dict) and doc.get("model") == fwd.served_model:
            doc["model"] = fwd.client_model
            return orjson.dumps(doc)
        return body

    # -- anything else ------------------------------------------------------------------

    async def passthrough(self, request: web.Request) -> web.StreamResponse:
        """Any other path and method, unchanged both ways (streamed both ways)."""
        if not self._monitor.up:
            self._metrics.upstream_errors.labels(UpstreamFailure.UNAVAILABLE).inc()
            return reply(unavailable(self._monitor.detail))
        headers = upstream_headers(request.headers, request.remote)
        body: bytes | aiohttp.StreamReader | None = None
        if request.body_exists:
            length = request.content_length
            small = length is not None and length <= _READ_WHOLE
            body = await request.read() if small else request.content
        try:
            upstream = await self._counting(
                self._send(request.method, request.raw_path, body, headers)
            )
            async with upstream:
                return await self._pump(request, upstream)
        except ApiError as err:
            return reply(err)

    async def rewrite_json(
        self, request: web.Request, rewrite: Callable[[Any], Any]
    ) -> web.StreamResponse:
        """A small JSON GET whose answer the sidecar edits (e.g. model names)."""
        if not self._monitor.up:
            self._metrics.upstream_errors.labels(UpstreamFailure.UNAVAILABLE).inc()
            return reply(unavailable(self._monitor.detail))
        headers = upstream_headers(request.headers, request.remote)
        try:
            upstream = await self._counting(
                self._send(request.method, request.raw_path, None, headers)
            )
            async with upstream:
                body = await upstream.read()
                ok = upstream.status == 200 and upstream.content_type == "application/json"
                if ok:
                    with contextlib.suppress(*JSON_ERRORS):
                        body = orjson.dumps(rewrite(orjson.loads(body)))
                return web.Response(
                    body=body, status=upstream.status, headers=relayed_headers(upstream.headers, {})
                )
        except ApiError as err:
            return reply(err)
        except (TimeoutError, aiohttp.ClientError) as exc:
            return reply(self._broken(exc))

    async def _pump(
        self, request: web.Request, upstream: aiohttp.ClientResponse
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=upstream.status, headers=relayed_headers(upstream.headers, {})
        )
        if upstream.content_length is not None:
            response.content_length = upstream.content_length
        try:
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        except (TimeoutError, aiohttp.ClientError) as exc:
            self._metrics.upstream_errors.labels(UpstreamFailure.STREAM_BROKEN).inc()
            log.warning("passthrough %s broke: %s", request.path, type(exc).__name__)
            _abort(request)
        except ConnectionError:
            upstream.close()  # the client left
        return response

    # -- sending ------------------------------------------------------------------------

    async def _counting(self, sending: Awaitable[aiohttp.ClientResponse]) -> aiohttp.ClientResponse:
        """vLLM's response headers; a failure counted, as the OpenAI error to answer."""
        try:
            return await sending
        except SendError as failed:
            raise self._counted(failed) from None

    async def _send(
        self,
        method: str,
        path: str,
        body: bytes | aiohttp.StreamReader | None,
        headers: CIMultiDict[str],
    ) -> aiohttp.ClientResponse:
        """Send and wait for the response headers; a failure is raised as `SendError`,
        not counted yet (a dropped speculative request's failure never reached anyone).

        One retry on a pooled connection that vLLM closed just as it was handed out (it
        never read that request), only when the body is in memory and can be resent.
        """
        url = URL(self._base + path, encoded=True)
        attempts = 2 if not isinstance(body, aiohttp.StreamReader) else 1
        for attempt in range(attempts):
            try:
                return await self._session.request(
                    method, url, data=body, headers=headers, timeout=self._timeout
                )
            except aiohttp.ServerDisconnectedError as exc:
                if attempt + 1 == attempts:
                    raise self._broken_failure(exc) from None
            except aiohttp.ClientConnectorError as exc:
                error = unavailable(f"connection refused: {exc.os_error}")
                raise SendError(UpstreamFailure.UNAVAILABLE, error) from None
            except TimeoutError:
                raise self._timeout_failure() from None
            except aiohttp.ClientError as exc:
                raise self._broken_failure(exc) from None
        raise AssertionError("unreachable")

    def _counted(self, failed: SendError) -> ApiError:
        self._metrics.upstream_errors.labels(failed.kind).inc()
        if failed.kind is not UpstreamFailure.TIMEOUT:
            self._monitor.poke()
        return failed.error

    def _timeout_failure(self) -> SendError:
        error = ApiError(
            504,
            f"The model server did not answer within {self._read_timeout_s:g} s.",
            type=ErrorType.TIMEOUT,
            code="upstream_timeout",
        )
        return SendError(UpstreamFailure.TIMEOUT, error)

    def _broken_failure(self, exc: BaseException) -> SendError:
        error = ApiError(
            502,
            f"The connection to the model server broke ({type(exc).__name__}).",
            type=ErrorType.UPSTREAM,
            code="bad_gateway",
        )
        return SendError(UpstreamFailure.CONNECTION, error)

    def _timed_out(self) -> ApiError:
        return self._counted(self._timeout_failure())

    def _broken(self, exc: BaseException) -> ApiError:
        return self._counted(self._broken_failure(exc))


class SendError(Exception):
    """vLLM could not take a request: the sidecar's error for it, and why."""

    def __init__(self, kind: UpstreamFailure, error: ApiError) -> None:
        super().__init__(error.message)
        self.kind, self.error = kind, error


class Speculation:
    """An inference request sent before L1 decided it is a miss."""

    def __init__(self, task: asyncio.Task[aiohttp.ClientResponse]) -> None:
        self._task = task

    async def response(self) -> aiohttp.ClientResponse:
        """vLLM's response headers (raises `SendError`); the caller owns the response.
        Shielded: a caller cancelled meanwhile must `abandon`, which closes what came."""
        return await asyncio.shield(self._task)

    def abandon(self) -> None:
        """L1 answered after all: stop the request (a response already there is closed,
        which ends the generation in vLLM). Returns at once; safe to call twice."""
        self._task.cancel()
        self._task.add_done_callback(_drop)


def _drop(task: asyncio.Task[aiohttp.ClientResponse]) -> None:
    if task.cancelled():
        return
    if task.exception() is None:  # retrieved either way: no "never retrieved" warning
        task.result().close()


def _inference_headers(request: web.Request) -> CIMultiDict[str]:
    headers = upstream_headers(request.headers, request.remote)
    headers["Content-Type"] = "application/json"
    return headers


def _abort(request: web.Request) -> None:
    """No terminating chunk: the client must not mistake a broken stream for a whole one."""
    transport = request.transport
    if transport is not None:
        transport.abort()


class _StreamRelay:
    """One SSE stream from vLLM to the client, assembled for the cache on the way."""

    def __init__(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        fwd: Forward,
        metrics: SidecarMetrics,
    ) -> None:
        self._request, self._upstream, self._fwd = request, upstream, fwd
        self._metrics = metrics
        self._splitter = SseSplitter()
        storing = fwd.store is not None and upstream.status == 200
        self._assembler = StreamAssembler(fwd.kind) if storing else None
        self._parse = storing or fwd.strip_usage or fwd.rewrite
        self._offered = False  # the answer went to the store, or was judged not storable
        self._record = fwd.record
        self._response = web.StreamResponse(
            status=upstream.status, headers=relayed_headers(upstream.headers, fwd.cache_headers)
        )

    async def run(self) -> web.StreamResponse:
        try:
            await self._response.prepare(self._request)
            async for chunk in self._upstream.content.iter_any():
                if self._record is not None and self._record.ttft_s is None:
                    self._record.ttft_s = time.perf_counter() - self._fwd.started
                await self._forward(self._splitter.feed(chunk))
            tail = self._splitter.flush()
            if tail:
                self._not_whole("stream ended inside an event")
                await self._response.write(tail)
            await self._response.write_eof()
        except TimeoutError:
            await self._fail(UpstreamFailure.TIMEOUT, 504, "the model server stopped sending")
        except aiohttp.ClientError:
            await self._fail(UpstreamFailure.STREAM_BROKEN, 502, "the model server's stream broke")
        except ConnectionError:
            self._upstream.close()  # the client left: vLLM stops generating
            if self._record is not None:
                self._record.code = CLIENT_CLOSED
        finally:
            if self._fwd.store is not None and not self._offered:
                self._metrics.stores.labels(StoreResult.NOT_STORABLE).inc()
        return self._response

    def _not_whole(self, reason: str) -> None:
        if self._assembler is not None:
            self._assembler.fail(reason)

    async def _forward(self, events: list[bytes]) -> None:
        out: list[bytes] = []
        for event in events:
            if self._splitter.framing_lost:
                self._not_whole("not a server-sent event stream")
            if not self._parse:
                out.append(event)
                continue
            data = event_data(event)
            if is_done(data):
                await self._finish(out)
                out = [DONE_EVENT]
                continue
            kept = self._event(event, data)
            if kept:
                out.append(kept)
        if out:
            await self._response.write(b"".join(out))

    def _event(self, event: bytes, data: str | None) -> bytes:
        if data is None:
            return event  # a comment or keep-alive
        doc = parse_event_json(data)
        if doc is None:
            self._not_whole("unparseable event")
            return event
        if self._assembler is not None:
            self._assembler.feed(doc)
        if self._record is not None and "usage" in doc:
            apply_usage(self._record, usage_from_document(doc))
        if self._fwd.strip_usage and is_usage_only(doc):
            return b""
        if self._fwd.rewrite and doc.get("model") == self._fwd.served_model:
            doc["model"] = self._fwd.client_model
            return data_event(doc)
        return event

    async def _finish(self, pending: list[bytes]) -> None:
        """At [DONE]: send what precedes it and hand the answer to L1 (stored in the
        background; the sidecar makes a repeat of the question wait for that store)."""
        if pending:
            await self._response.write(b"".join(pending))
        if self._assembler is None or self._fwd.store is None:
            return
        self._offered = True
        self._assembler.feed_done()
        cached = self._assembler.result()
        if cached is None:
            self._metrics.stores.labels(StoreResult.NOT_STORABLE).inc()
            log.debug("streamed answer not stored: %s", self._assembler.failed or "incomplete")
        else:
            self._fwd.store(cached)
        self._assembler = None  # stored or refused: once

    async def _fail(self, kind: UpstreamFailure, code: int, message: str) -> None:
        self._metrics.upstream_errors.labels(kind).inc()
        if self._record is not None:
            self._record.code = code  # the status sent was 200; the client got this error
        self._upstream.close()
        with contextlib.suppress(ConnectionError):
            await self._response.write(sse_error_event(message, ErrorType.UPSTREAM, code))
        _abort(self._request)
