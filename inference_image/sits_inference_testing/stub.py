"""A fast fake OpenAI upstream on 127.0.0.1, for the data plane's tests and benchmarks.

It answers like vLLM's OpenAI server (chat, completions with SSE streams and ``usage``,
embeddings, models) and can misbehave on request, so failure handling is tested against
real sockets: per instance (``StubBehaviour``) or per request through headers that the
gateway forwards untouched:

- ``x-stub-status: 503``: answer with that status and an OpenAI error body;
- ``x-stub-delay-ms: 50``: wait before the headers;
- ``x-stub-chunks: 8`` / ``x-stub-chunk-delay-ms: 5``: stream shape;
- ``x-stub-kill-after: 2``: abort the TCP connection after that many stream chunks;
- ``StubBehaviour.fail_every``: every n-th request fails with 500 (a known error rate).

``python -m sits_inference_testing.stub --port 9001`` runs one from a shell.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from sits_inference.openai.serving import run_loop

_CANNED_USAGE = {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}


@dataclass
class StubBehaviour:
    """Defaults for every request; headers override them per request."""

    status: int = 200
    delay_s: float = 0.0
    chunks: int = 4
    chunk_delay_s: float = 0.0
    kill_after: int | None = None
    # Every n-th request (1-based) answers 500: a deterministic error rate of 1/n.
    fail_every: int | None = None


@dataclass
class StubStats:
    """What the stub saw, for assertions (bounded: the last 100 requests)."""

    requests: int = 0
    cancelled_streams: int = 0
    completed_streams: int = 0
    last_headers: list[dict[str, str]] = field(default_factory=list)
    last_bodies: list[dict[str, Any]] = field(default_factory=list)


class StubUpstream:
    """The aiohttp application and its state."""

    def __init__(self, name: str = "stub", behaviour: StubBehaviour | None = None) -> None:
        self.name = name
        self.behaviour = behaviour or StubBehaviour()
        self.stats = StubStats()
        self._fast_body = self._completion_body("chat.completion", "stub", "ok")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        return app

    # -- plumbing ------------------------------------------------------------------------

    def _setting(self, request: web.Request, header: str, default: float | None) -> float | None:
        raw = request.headers.get(f"x-stub-{header}")
        return float(raw) if raw is not None else default

    async def _admit(self, request: web.Request) -> tuple[dict[str, Any], web.Response | None]:
        body = await request.json()
        self.stats.requests += 1
        index = self.stats.requests  # before any await: concurrent requests move the count
        self.stats.last_headers = [*self.stats.last_headers[-99:], dict(request.headers)]
        self.stats.last_bodies = [*self.stats.last_bodies[-99:], body]
        delay = self._setting(request, "delay-ms", self.behaviour.delay_s * 1000) or 0.0
        if delay:
            await asyncio.sleep(delay / 1000)
        status = int(self._setting(request, "status", self.behaviour.status) or 200)
        every = self.behaviour.fail_every
        if every and index % every == 0:
            status = 500
        if status != 200:
            error = {"message": f"stub error {status}", "type": "stub", "param": None, "code": None}
            return body, web.json_response({"error": error}, status=status)
        return body, None

    def _completion_body(self, kind: str, model: str, text: str) -> bytes:
        if kind == "chat.completion":
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            choice = {"index": 0, "text": text}
        choice["finish_reason"] = "stop"
        doc = {
            "id": "cmpl-stub",
            "object": kind,
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": _CANNED_USAGE,
            "served_by": self.name,
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    # -- endpoints -----------------------------------------------------------------------

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat.completion")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "text_completion")

    async def _generate(self, request: web.Request, kind: str) -> web.StreamResponse:
        body, refusal = await self._admit(request)
        if refusal is not None:
            return refusal
        model = str(body.get("model") or "stub")
        if body.get("stream"):
            return await self._stream(request, body, kind, model)
        if kind == "chat.completion" and model == "stub":
            payload = self._fast_body
        else:
            payload = self._completion_body(kind, model, "ok")
        return web.Response(body=payload, content_type="application/json")

    async def _stream(
        self, request: web.Request, body: dict[str, Any], kind: str, model: str
    ) -> web.StreamResponse:
        chunks = int(self._setting(request, "chunks", self.behaviour.chunks) or 0)
        pause = (
            self._setting(request, "chunk-delay-ms", self.behaviour.chunk_delay_s * 1000) or 0.0
        ) / 1000
        kill = self._setting(request, "kill-after", self.behaviour.kill_after)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            for index in range(chunks):
                if kill is not None and index >= kill:
                    assert request.transport is not None
                    request.transport.abort()
                    return response
                await response.write(_event(_chunk(kind, model, f"t{index} ")))
                if pause:
                    await asyncio.sleep(pause)
            await self._finish_stream(response, body, kind, model, chunks)
        except (ConnectionError, asyncio.CancelledError):
            self.stats.cancelled_streams += 1
            raise
        return response

    async def _finish_stream(
        self, response: web.StreamResponse, body: dict[str, Any], kind: str, model: str, n: int
    ) -> None:
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            usage = {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n}
            last = {
                "id": "cmpl-stub",
                "object": _chunk_kind(kind),
                "created": 0,
                "model": model,
                "choices": [],
                "usage": usage,
            }
            await response.write(_event(last))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        self.stats.completed_streams += 1

    async def embeddings(self, request: web.Request) -> web.Response:
        body, refusal = await self._admit(request)
        if refusal is not None:
            return refusal
        doc = {
            "object": "list",
            "model": body.get("model"),
            "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}],
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        }
        return web.json_response(doc)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "stub", "object": "model"}]})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")


def _chunk_kind(kind: str) -> str:
    return "chat.completion.chunk" if kind == "chat.completion" else "text_completion"


def _chunk(kind: str, model: str, text: str) -> dict[str, Any]:
    if kind == "chat.completion":
        choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    else:
        choice = {"index": 0, "text": text, "finish_reason": None}
    return {
        "id": "cmpl-stub",
        "object": _chunk_kind(kind),
        "created": 0,
        "model": model,
        "choices": [choice],
    }


def _event(doc: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


@dataclass
class RunningStub:
    stub: StubUpstream
    runner: web.AppRunner
    url: str
    port: int

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_stub(
    name: str = "stub",
    behaviour: StubBehaviour | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
) -> RunningStub:
    """Serve a stub on loopback (port 0: any free port)."""
    stub = StubUpstream(name, behaviour)
    runner = web.AppRunner(stub.app(), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=1024).start()
    bound = int(runner.addresses[0][1])
    return RunningStub(stub, runner, f"http://{host}:{bound}", bound)


def main() -> None:
    parser = argparse.ArgumentParser(description="fake OpenAI upstream for gateway tests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--name", default="stub")
    args = parser.parse_args()

    async def run() -> None:
        await start_stub(args.name, host=args.host, port=args.port)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()

    run_loop(run())


if __name__ == "__main__":
    main()
