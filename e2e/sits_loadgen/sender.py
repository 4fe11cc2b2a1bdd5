"""Sending one planned request through the official ``openai`` client, and what it saw.

Why the official client: the gateway and the sidecar must be exercised the way real
applications call them (its headers, its SSE parsing, its error mapping), not by a
hand-rolled HTTP call that might be more forgiving. Responses are read through
``with_raw_response`` / ``with_streaming_response`` for the headers the data plane adds:
``x-sits-variant`` (gateway: which variant served) and ``x-sits-cache`` (sidecar: hit,
miss, skip, bypass).

The client is built for measuring, not for resilience: no retries unless asked for
(``max_retries``; by default each failure is a data point), no redirects and no proxy
settings from the environment (the checked base URL is the only place load goes), a
connection pool as large as the concurrency cap. (``httpx2``
is the HTTP library of the installed ``openai``, whose ``http_client`` it must be.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import httpx2
import openai
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from openai.types.chat import ChatCompletionChunk

from .clock import Clock
from .config import LoadConfig
from .plan import PlannedRequest
from .records import SendResult
from .safety import check_target

VARIANT_HEADER = "x-sits-variant"  # sits_inference.gateway.proxy.VARIANT_HEADER
CACHE_HEADER = "x-sits-cache"  # sits_inference.cache.relay.CACHE_HEADER
# Below the 5 s idle timeout of uvicorn (vLLM) and aiohttp servers: a pooled connection is
# never reused just as the server closes it (with no retries, that would be an error).
KEEPALIVE_EXPIRY_S = 4.0


class Sender(Protocol):
    """Sends one request and reports what happened; never raises for a failed request."""

    async def send(self, request: PlannedRequest) -> SendResult: ...


def build_client(
    config: LoadConfig, *, transport: httpx2.AsyncBaseTransport | None = None
) -> AsyncOpenAI:
    """An ``AsyncOpenAI`` for measuring (see the module docstring); ``transport`` lets
    tests answer without a server."""
    check_target(config.base_url)
    size = config.concurrency
    http = DefaultAsyncHttpxClient(
        follow_redirects=False,
        trust_env=False,
        limits=httpx2.Limits(
            max_connections=size,
            max_keepalive_connections=size,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        ),
        timeout=httpx2.Timeout(config.request_timeout_s),
        transport=transport,
    )
    return AsyncOpenAI(
        base_url=config.base_url,
        api_key=config.api_key,
        max_retries=config.max_retries,
        timeout=config.request_timeout_s,
        http_client=http,
    )


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    return None if headers is None else headers.get(name)


def _has_content(chunk: ChatCompletionChunk) -> bool:
    """A chunk carrying generated text (the first one is the role, with empty content)."""
    return any(choice.delta.content for choice in chunk.choices)


class OpenAISender:
    """The default sender: chat completions, streamed or not, through ``AsyncOpenAI``."""

    def __init__(
        self, config: LoadConfig, clock: Clock, *, client: AsyncOpenAI | None = None
    ) -> None:
        self._config = config
        self._clock = clock
        self._client = client or build_client(config)
        check_target(str(self._client.base_url))

    async def aclose(self) -> None:
        await self._client.close()

    def arguments(self, request: PlannedRequest) -> dict[str, Any]:
        """The ``create(...)`` keyword arguments for ``request``."""
        args: dict[str, Any] = {
            "model": self._config.model,
            "messages": [dict(message) for message in request.messages],
            "max_tokens": self._config.max_tokens,
            "extra_headers": dict(request.headers),
        }
        if request.temperature is not None:
            args["temperature"] = request.temperature
        if self._config.extra_body:
            args["extra_body"] = dict(self._config.extra_body)
        if request.stream:
            args |= {"stream": True, "stream_options": {"include_usage": True}}
        return args

    async def send(self, request: PlannedRequest) -> SendResult:
        """Send ``request``; any failure becomes a ``SendResult`` with its class and status."""
        started = self._clock.monotonic()
        args = self.arguments(request)
        try:
            if request.stream:
                return await self._streamed(args, started)
            return await self._plain(args, started)
        except openai.APIStatusError as err:
            return self._failed(err, started, err.status_code, err.response.headers)
        except Exception as err:  # transport errors, timeouts, broken streams: data points
            return self._failed(err, started, None, None)

    def _elapsed(self, started: float) -> float:
        return self._clock.monotonic() - started

    def _failed(
        self,
        err: Exception,
        started: float,
        status: int | None,
        headers: Mapping[str, str] | None,
    ) -> SendResult:
        return SendResult(
            ok=False,
            latency_s=self._elapsed(started),
            status=status,
            error=type(err).__name__,
            variant=_header(headers, VARIANT_HEADER),
            cache=_header(headers, CACHE_HEADER),
        )

    async def _plain(self, args: dict[str, Any], started: float) -> SendResult:
        raw = await self._client.chat.completions.with_raw_response.create(**args)
        completion = raw.parse()
        usage = completion.usage
        return SendResult(
            ok=True,
            latency_s=self._elapsed(started),
            status=raw.status_code,
            variant=raw.headers.get(VARIANT_HEADER),
            cache=raw.headers.get(CACHE_HEADER),
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
        )

    async def _streamed(self, args: dict[str, Any], started: float) -> SendResult:
        """A stream succeeds when it ends cleanly: a cut connection raises (the transport
        sees the missing end), and so does an error event (the gateway's mid-stream
        failure); an empty stream is counted as an error too."""
        ttft: float | None = None
        chunks = 0
        usage = None
        streaming = self._client.chat.completions.with_streaming_response.create(**args)
        async with streaming as response:
            stream = await response.parse()
            async for chunk in stream:
                chunks += 1
                if ttft is None and _has_content(chunk):
                    ttft = self._elapsed(started)
                usage = chunk.usage or usage
        return SendResult(
            ok=chunks > 0,
            latency_s=self._elapsed(started),
            status=response.status_code,
            error=None if chunks else "EmptyStream",
            ttft_s=ttft,
            variant=response.headers.get(VARIANT_HEADER),
            cache=response.headers.get(CACHE_HEADER),
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
        )
