"""The sidecar in-process, with the real L1 (MiniLM), in front of a small fake vLLM.

The fake exists only for what a real vLLM cannot do on demand: streams cut off in the
middle, an error event inside a 200 stream, a 500, a generation slow enough to watch a
client disconnect reach it, a generation held open until the test lets it finish. Each
fault test carries its positive control: the same request without the fault is stored
and then hit, so "not stored" is a result, not a given.
Everything else is tested against real vLLM in tests/integration/test_cache_sidecar_vllm.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from sits_inference.cache.app import RunningSidecar, start_sidecar
from sits_inference.cache.embedding import Embedder, Vectors, default_embedder
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.settings import SidecarSettings
from sits_inference.cache.tiers import build_tiers
from sits_inference_testing.metrics import metric_value, parse_metrics

FAULT = "x-fake-fault"
WORDS = ["The ", "answer ", "is ", "forty-two."]


@dataclass
class FakeVllm:
    """Answers like vLLM 0.32 (chat only); misbehaves when the request says so."""

    healthy: bool = True
    root: str = "/models/tiny"
    requests: int = 0
    cancelled: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    # Requests with the fault "hold" answer only once this is set ("step": their stream
    # stops after its first word until then).
    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # a chat request came
    gone: asyncio.Event = field(default_factory=asyncio.Event)  # a held one was dropped

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/version", self.version)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.healthy else 503)

    async def models(self, request: web.Request) -> web.Response:
        lora = {"id": "a1@0123", "root": "/loras/a1", "parent": "tiny"}  # L3's: ignored
        base = {"id": "tiny", "root": self.root, "parent": None}
        return web.json_response({"object": "list", "data": [base, lora]})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": "fake"})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests += 1
        self.bodies.append(body)
        self.arrived.set()
        fault = request.headers.get(FAULT, "")
        if fault == "http-500":
            return web.json_response({"error": {"message": "engine died"}}, status=500)
        if fault == "hold":
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.gone.set()
                raise
        if not body.get("stream"):
            return web.json_response(_whole(body["model"]))
        return await self._stream(request, body, fault)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], fault: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        model = body["model"]
        try:
            await response.write(_event(_delta(model, {"role": "assistant", "content": ""})))
            for i, word in enumerate(WORDS * (50 if fault == "slow" else 1)):
                if fault == "truncate" and i == 2:
                    assert request.transport is not None
                    request.transport.abort()
                    return response
                if fault == "error-event" and i == 2:
                    await response.write(_event({"error": {"message": "oops", "code": 500}}))
                    continue
                await response.write(_event(_delta(model, {"content": word})))
                if fault == "step" and i == 0:
                    await self.release.wait()
                if fault == "slow":
                    await asyncio.sleep(0.1)
            await response.write(_event(_delta(model, {}, finish="stop")))
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}
                await response.write(_event({**_head(model), "choices": [], "usage": usage}))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):
            self.cancelled += 1
            raise
        return response


def _head(model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-f", "object": "chat.completion.chunk", "created": 1, "model": model}


def _delta(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {**_head(model), "choices": [choice]}


def _event(doc: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(doc) + b"\n\n"


def _whole(model: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": "".join(WORDS)}
    return {
        "id": "chatcmpl-f",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9},
    }


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return default_embedder()


@dataclass
class Rig:
    fake: FakeVllm
    sidecar: RunningSidecar
    http: aiohttp.ClientSession

    async def chat(
        self,
        content: str,
        *,
        stream: bool = False,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> tuple[int, dict[str, str], bytes]:
        body = {
            "model": "tiny",
            "messages": [{"role": "user", "content": content}],
            "temperature": 0,
            "stream": stream,
            **extra,
        }
        return await self.post("/v1/chat/completions", body, headers)

    async def post(
        self, path: str, body: Any, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        url = self.sidecar.url + path
        try:
            async with self.http.post(url, data=data, headers=headers) as response:
                return response.status, dict(response.headers), await response.read()
        except aiohttp.ClientPayloadError:
            return -1, {}, b""  # the sidecar aborted a broken stream, as it should

    async def metrics(self) -> list[Any]:
        async with self.http.get(self.sidecar.url + "/metrics") as response:
            return parse_metrics(await response.text())


async def _serve_fake(fake: FakeVllm) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(fake.app(), handler_cancellation=True, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, int(runner.addresses[0][1])


class GatedEmbedder:
    """The real embedder, held while ``open`` is clear: an embedding as slow as a test
    needs, to see what the sidecar does meanwhile."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.open = threading.Event()
        self.open.set()

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        assert self.open.wait(10), "the test never let the embedding finish"
        return self.inner.embed(texts)


@pytest.fixture
async def rig(embedder: Embedder) -> AsyncIterator[Rig]:
    async for started in _rig(embedder):
        yield started


@pytest.fixture
async def gated(embedder: Embedder) -> AsyncIterator[tuple[Rig, GatedEmbedder]]:
    gate = GatedEmbedder(embedder)
    try:
        async for started in _rig(gate):
            yield started, gate
    finally:
        gate.open.set()


async def _rig(embedder: Embedder) -> AsyncIterator[Rig]:
    fake = FakeVllm()
    runner, port = await _serve_fake(fake)
    settings = SidecarSettings(
        port=0,
        upstream=f"http://127.0.0.1:{port}",
        revision="r1",
        max_body_bytes=4096,
        health_interval_s=0.2,
    )
    metrics = CacheMetrics()
    tiers = await asyncio.to_thread(build_tiers, settings, metrics, embedder)
    sidecar = await start_sidecar(settings, tiers, metrics)
    async with aiohttp.ClientSession() as http:
        try:
            yield Rig(fake, sidecar, http)
        finally:
            await sidecar.stop()
            await runner.cleanup()


async def test_a_plain_miss_is_stored_and_then_hit(rig: Rig) -> None:
    status, headers, body = await rig.chat("What is the answer?")
    assert (status, headers["x-sits-cache"]) == (200, "miss")
    status, headers, again = await rig.chat("What is the answer?")
    assert (status, headers["x-sits-cache"]) == (200, "hit")
    assert json.loads(again)["choices"][0]["message"]["content"] == "The answer is forty-two."
    assert json.loads(again)["id"] != json.loads(body)["id"]
    assert rig.fake.requests == 1


@pytest.mark.parametrize("fault", ["truncate", "error-event"])
async def test_broken_streams_are_never_stored(rig: Rig, fault: str) -> None:
    status, headers, _ = await rig.chat("Tell me the answer.", stream=True, headers={FAULT: fault})
    assert status in (200, -1)
    # The control: the same request, unbroken, is a miss (nothing was stored), then a hit.
    _, headers, _ = await rig.chat("Tell me the answer.", stream=True)
    assert headers["x-sits-cache"] == "miss"
    _, headers, replay = await rig.chat("Tell me the answer.", stream=True)
    assert headers["x-sits-cache"] == "hit"
    assert replay.endswith(b"data: [DONE]\n\n")
    series = await rig.metrics()
    assert metric_value(series, "sits_cache_stores_total", result="not_storable") == 1
    assert metric_value(series, "sits_cache_stores_total", result="stored") == 1


async def test_an_upstream_500_passes_through_and_is_not_stored(rig: Rig) -> None:
    status, headers, body = await rig.chat("Answer me.", headers={FAULT: "http-500"})
    assert status == 500
    assert headers["x-sits-cache"] == "miss"
    assert json.loads(body)["error"]["message"] == "engine died"
    _, headers, _ = await rig.chat("Answer me.")
    assert headers["x-sits-cache"] == "miss"
    series = await rig.metrics()
    assert metric_value(series, "sits_cache_requests_total", outcome="error") == 1


async def test_the_sidecar_asks_for_usage_on_stored_streams_and_hides_it(rig: Rig) -> None:
    _, _, streamed = await rig.chat("Usage please?", stream=True)
    assert rig.fake.bodies[-1]["stream_options"] == {"include_usage": True}
    assert b'"usage"' not in streamed, "the client did not ask for usage"
    _, headers, whole = await rig.chat("Usage please?")
    assert headers["x-sits-cache"] == "hit"
    assert json.loads(whole)["usage"]["completion_tokens"] == 4


async def test_a_client_that_leaves_stops_the_upstream_generation(rig: Rig) -> None:
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Long story"}],
        "temperature": 0,
        "stream": True,
    }
    async with rig.http.post(
        rig.sidecar.url + "/v1/chat/completions", json=body, headers={FAULT: "slow"}
    ) as response:
        assert response.status == 200
        await response.content.readany()
    for _ in range(50):  # the fake would stream for 20 s; its cancellation comes at once
        if rig.fake.cancelled:
            break
        await asyncio.sleep(0.1)
    assert rig.fake.cancelled == 1
    _, headers, _ = await rig.chat("Long story", stream=True)
    assert headers["x-sits-cache"] == "miss", "the abandoned stream was not stored"


def _malformed() -> Iterator[Any]:
    chat = "/v1/chat/completions"
    messages = [{"role": "user", "content": "hi"}]
    yield pytest.param(chat, b"{not json", 400, "invalid_json", id="bad-json")
    yield pytest.param(chat, b"", 400, "invalid_json", id="empty")
    yield pytest.param(chat, b"[1, 2]", 400, "invalid_json", id="not-an-object")
    yield pytest.param(
        chat, {"messages": messages}, 400, "missing_required_parameter", id="no-model"
    )
    yield pytest.param(
        chat, {"model": 7, "messages": messages}, 400, "invalid_type", id="model-int"
    )
    yield pytest.param(chat, {"model": "tiny"}, 400, "missing_required_parameter", id="no-messages")
    yield pytest.param(chat, {"model": "tiny", "messages": []}, 400, "invalid_type", id="no-turns")
    yield pytest.param(
        chat, {"model": "tiny", "messages": ["hi"]}, 400, "invalid_type", id="turn-not-object"
    )
    yield pytest.param(
        chat,
        {"model": "tiny", "messages": messages, "stream": "yes"},
        400,
        "invalid_type",
        id="stream-not-bool",
    )
    yield pytest.param(
        "/v1/completions",
        {"model": "tiny", "prompt": {"a": 1}},
        400,
        "invalid_type",
        id="prompt-object",
    )
    yield pytest.param(
        "/v1/completions", {"model": "tiny"}, 400, "missing_required_parameter", id="no-prompt"
    )
    huge = [{"role": "user", "content": "x" * 5000}]
    yield pytest.param(
        chat, {"model": "tiny", "messages": huge}, 413, "body_too_large", id="too-large"
    )


@pytest.mark.parametrize(("path", "body", "status", "code"), list(_malformed()))
async def test_malformed_requests_get_openai_errors_and_never_reach_vllm(
    rig: Rig, path: str, body: Any, status: int, code: str
) -> None:
    got, _, raw = await rig.post(path, body)
    assert got == status
    error = json.loads(raw)["error"]
    assert error["code"] == code
    assert error["type"] == "invalid_request_error"
    assert error["message"]
    assert rig.fake.requests == 0
    series = await rig.metrics()
    assert metric_value(series, "sits_cache_requests_total", outcome="rejected") == 1


async def test_other_paths_pass_through_unchanged(rig: Rig) -> None:
    async with rig.http.get(rig.sidecar.url + "/version") as response:
        assert response.status == 200
        assert await response.json() == {"version": "fake"}
        assert "x-sits-cache" not in response.headers


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"[]", 400),
        (b'{"tenant": "a"}', 400),
        (b'{"model": 3}', 400),
        (b'{"model": "a", "adapter": "b"}', 400),
        (b"{oops", 400),
    ],
)
async def test_bad_invalidation_filters_are_refused(rig: Rig, body: bytes, status: int) -> None:
    got, _, raw = await rig.post("/admin/cache/invalidate", body)
    assert got == status
    assert json.loads(raw)["error"]["message"]


async def test_invalidation_by_model_removes_only_that_models_entries(rig: Rig) -> None:
    await rig.chat("First question?")
    await rig.chat("Second question?")
    _, _, raw = await rig.post("/admin/cache/invalidate", {"model": "other"})
    assert json.loads(raw)["removed"] == 0
    _, _, raw = await rig.post("/admin/cache/invalidate", {"model": "tiny", "revision": "r1"})
    assert json.loads(raw)["removed"] == 2
    async with rig.http.get(rig.sidecar.url + "/admin/cache/stats") as response:
        stats = await response.json()
    assert stats["semantic"]["entries"] == 0
    assert stats["upstream"]["up"] is True
    _, headers, _ = await rig.chat("First question?")
    assert headers["x-sits-cache"] == "miss"


async def test_the_vector_tier_is_mounted_when_enabled(
    embedder: Embedder, tmp_path: Path, rig: Rig
) -> None:
    """L2 wiring: SITS_CACHE_VECTOR_* settings give POST /v1/retrieve on the sidecar."""
    from sits_inference.cache.vector import (
        EMBEDDING_MODEL,
        BuildOptions,
        Document,
        build_index,
    )

    texts = [
        f"{subject} is discussed in chapter {i}"
        for i, subject in enumerate(
            ["rivers", "volcanoes", "bread", "violins", "glaciers", "comets", "bees", "chess"]
        )
    ]
    vectors = await asyncio.to_thread(embedder.embed, texts)
    index = tmp_path / "index"
    options = BuildOptions(kind="hnsw", embedding_model=EMBEDDING_MODEL)
    docs = [Document(str(i), text) for i, text in enumerate(texts)]
    await asyncio.to_thread(build_index, index, vectors, docs, options, lambda _: None)
    settings = SidecarSettings(
        port=0,
        upstream=rig.sidecar.sidecar.settings.upstream,
        vector_enabled=True,
        vector_index=index,
        state_dir=tmp_path / "state",
        semantic_enabled=False,
    )
    metrics = CacheMetrics()
    tiers = await asyncio.to_thread(build_tiers, settings, metrics, embedder)
    assert tiers.semantic is None
    sidecar = await start_sidecar(settings, tiers, metrics)
    try:
        rig.sidecar, previous = sidecar, rig.sidecar
        status, _, raw = await rig.post("/v1/retrieve", {"query": texts[4], "k": 3})
        assert status == 200, raw
        assert json.loads(raw)["data"][0]["id"] == "4"
        _, headers, _ = await rig.chat("L1 is off here")
        assert (headers["x-sits-cache"], headers["x-sits-cache-reason"]) == ("skip", "disabled")
    finally:
        rig.sidecar = previous
        await sidecar.stop()


async def test_other_weights_behind_vllm_drop_every_entry_even_without_an_outage(rig: Rig) -> None:
    """A restart quicker than a health poll (the fake can do it on demand, vLLM cannot):
    the periodic fingerprint sees another model root and L1 is emptied."""
    await rig.chat("Cached before the swap?")
    assert (await rig.chat("Cached before the swap?"))[1]["x-sits-cache"] == "hit"
    rig.fake.root = "/models/tiny-v2"
    for _ in range(100):  # 15 polls of 0.2 s; bounded at 10 s
        series = await rig.metrics()
        if metric_value(series, "sits_cache_invalidated_entries_total", reason="model_changed"):
            break
        await asyncio.sleep(0.1)
    assert metric_value(series, "sits_cache_invalidated_entries_total", reason="model_changed") == 1
    assert (await rig.chat("Cached before the swap?"))[1]["x-sits-cache"] == "miss"


async def test_vllm_down_then_back_keeps_the_cache_and_fails_fast_meanwhile(rig: Rig) -> None:
    await rig.chat("Survives an outage?")
    rig.fake.healthy = False
    async with rig.http.get(rig.sidecar.url + "/health") as response:
        assert response.status == 503
    assert (await rig.chat("Survives an outage?"))[1]["x-sits-cache"] == "hit"
    status, headers, raw = await rig.chat("Never asked before?")
    assert status == 503
    assert headers["Retry-After"] == "1"
    assert json.loads(raw)["error"]["type"] == "service_unavailable_error"
    requests = rig.fake.requests
    rig.fake.healthy = True
    async with rig.http.get(rig.sidecar.url + "/health") as response:
        assert response.status == 200
    assert (await rig.chat("Survives an outage?"))[1]["x-sits-cache"] == "hit"
    assert (await rig.chat("Never asked before?"))[0] == 200
    assert rig.fake.requests == requests + 1
    series = await rig.metrics()
    assert metric_value(series, "sits_cache_upstream_recoveries_total") == 1
    assert metric_value(series, "sits_cache_invalidated_entries_total", reason="model_changed") == 0


async def _until(what: str, check: Any) -> None:
    """Poll `check` for at most 10 s."""
    deadline = asyncio.get_running_loop().time() + 10.0
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_a_streamed_copy_of_a_request_at_vllm_does_not_wait_for_it(rig: Rig) -> None:
    """While an identical non-streamed request is held at vLLM, a streamed one is answered
    by vLLM at once (its client wants the first token now), not after the first's answer."""
    question = "Count slowly from one to a hundred."
    leader = asyncio.create_task(rig.chat(question, headers={FAULT: "hold"}))

    async def at_vllm() -> bool:
        return rig.fake.requests == 1

    await _until("the first request at vLLM", at_vllm)
    status, headers, body = await asyncio.wait_for(rig.chat(question, stream=True), 10)
    assert (status, headers["x-sits-cache"]) == (200, "miss")
    assert body.endswith(b"data: [DONE]\n\n")
    assert not leader.done(), "the first request is still held at vLLM"
    rig.fake.release.set()
    status, headers, _ = await leader
    assert (status, headers["x-sits-cache"]) == (200, "miss")
    assert rig.fake.requests == 2


async def test_non_streamed_copies_wait_for_the_request_at_vllm(rig: Rig) -> None:
    """The control of the test above: non-streamed copies do wait, and get its answer."""
    question = "Count slowly from one to a hundred."
    leader = asyncio.create_task(rig.chat(question, headers={FAULT: "hold"}))

    async def at_vllm() -> bool:
        return rig.fake.requests == 1

    await _until("the first request at vLLM", at_vllm)
    copies = [asyncio.create_task(rig.chat(question)) for _ in range(3)]
    await asyncio.sleep(0.5)  # time to reach vLLM, were they not waiting
    assert rig.fake.requests == 1
    assert not any(copy.done() for copy in copies)
    rig.fake.release.set()
    first = await leader
    answers = await asyncio.gather(*copies)
    assert first[1]["x-sits-cache"] == "miss"
    for status, headers, body in answers:
        assert (status, headers["x-sits-cache"]) == (200, "hit")
        assert headers["x-sits-cache-coalesced"] == "true"
        assert json.loads(body)["choices"][0]["message"]["content"] == "The answer is forty-two."
    assert rig.fake.requests == 1


# -- the miss path (issue 16): nothing of the cache's work between vLLM and the client ----


@pytest.mark.timeout(30)
async def test_a_miss_leaves_for_vllm_before_l1_has_searched(
    gated: tuple[Rig, GatedEmbedder],
) -> None:
    rig, gate = gated
    await rig.chat("What is the answer?")  # its partition exists now: the next one is searched
    gate.open.clear()
    rig.fake.arrived.clear()
    asked = asyncio.create_task(rig.chat("Which river is the longest?"))
    await asyncio.wait_for(rig.fake.arrived.wait(), 10)  # sent while the embedding is held
    assert not asked.done(), "the answer waits for L1's verdict"
    gate.open.set()
    status, headers, body = await asked
    assert (status, headers["x-sits-cache"]) == (200, "miss")
    assert json.loads(body)["choices"][0]["message"]["content"] == "The answer is forty-two."
    assert rig.fake.requests == 2
    assert not rig.fake.gone.is_set()


@pytest.mark.timeout(30)
async def test_a_request_sent_while_l1_searched_is_dropped_when_l1_finds_a_hit(
    gated: tuple[Rig, GatedEmbedder],
) -> None:
    rig, gate = gated
    await rig.chat("What is the answer?")
    gate.open.clear()
    rig.fake.arrived.clear()
    asked = asyncio.create_task(rig.chat("What's the answer?", headers={FAULT: "hold"}))
    await asyncio.wait_for(rig.fake.arrived.wait(), 10)
    gate.open.set()
    status, headers, body = await asked
    assert (status, headers["x-sits-cache"]) == (200, "hit")
    assert float(headers["x-sits-cache-similarity"]) < 1.0, "a semantic hit"
    assert json.loads(body)["choices"][0]["message"]["content"] == "The answer is forty-two."
    await asyncio.wait_for(rig.fake.gone.wait(), 10)  # vLLM saw the connection close
    series = await rig.metrics()
    assert metric_value(series, "sits_cache_upstream_errors_total") == 0
    assert metric_value(series, "sits_cache_requests_total", outcome="hit") == 1


@pytest.mark.timeout(30)
async def test_a_streamed_answer_is_relayed_before_it_is_stored_and_a_repeat_waits_for_it(
    gated: tuple[Rig, GatedEmbedder],
) -> None:
    rig, gate = gated
    gate.open.clear()  # the first question of its partition is embedded only to be stored
    status, headers, body = await rig.chat("Tell me the answer.", stream=True)
    assert (status, headers["x-sits-cache"]) == (200, "miss")
    assert body.endswith(b"data: [DONE]\n\n"), "the whole stream, while the store is held"
    series = await rig.metrics()
    assert metric_value(series, "sits_cache_stores_total", result="stored") == 0
    repeat = asyncio.create_task(rig.chat("Tell me the answer."))
    paraphrase = asyncio.create_task(rig.chat("Tell me the answer, please."))
    done, _ = await asyncio.wait({repeat, paraphrase}, timeout=0.3)
    assert not done, "a repeat or a paraphrase waits for the store it could find"
    gate.open.set()
    status, headers, _ = await repeat
    assert (status, headers["x-sits-cache"]) == (200, "hit")
    status, headers, _ = await paraphrase
    assert (status, headers["x-sits-cache"]) == (200, "hit")
    assert float(headers["x-sits-cache-similarity"]) < 1.0
    series = await rig.metrics()
    assert metric_value(series, "sits_cache_stores_total", result="stored") == 1


@pytest.mark.timeout(30)
async def test_a_missed_stream_is_relayed_event_by_event(rig: Rig) -> None:
    await rig.chat("What is the answer?")  # the next miss pays a search too
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Name a river."}],
        "temperature": 0,
        "stream": True,
    }
    url = rig.sidecar.url + "/v1/chat/completions"
    async with rig.http.post(url, json=body, headers={FAULT: "step"}) as response:
        assert response.headers["x-sits-cache"] == "miss"
        seen = b""
        while b'"content":"The "' not in seen:  # vLLM holds the rest until released
            chunk = await asyncio.wait_for(response.content.readany(), 10)
            assert chunk, f"the stream ended early: {seen!r}"
            seen += chunk
        assert b"[DONE]" not in seen
        rig.fake.release.set()
        rest = await response.read()
    assert (seen + rest).endswith(b"data: [DONE]\n\n")
    _, headers, _ = await rig.chat("Name a river.")
    assert headers["x-sits-cache"] == "hit", "stored once complete"
