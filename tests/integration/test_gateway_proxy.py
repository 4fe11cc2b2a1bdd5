"""The gateway over real sockets on 127.0.0.1, in front of two fast stub upstreams.

Every failure mode of the issue is driven for real here: bad input, no endpoint, refused
connections, timeouts, an upstream killed mid-stream, a client that walks away; plus the
split itself (weights, weight 0, sticky sessions) and the relay of streams as they come.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest

from sits_inference.gateway.app import RunningGateway, start_gateway
from sits_inference.gateway.config import GatewayConfig
from sits_inference.gateway.sources import MemorySource
from sits_inference.gateway.table import RoutingTable, StickyPolicy, VariantRoute
from sits_inference_testing.load import bounded_load, eventually, read_until_error
from sits_inference_testing.metrics import metric_value, scrape
from sits_inference_testing.stub import RunningStub, start_stub

CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hello"}]}
MAX_BODY = 4096


@dataclass
class Harness:
    a: RunningStub
    b: RunningStub
    source: MemorySource
    gateway: RunningGateway
    http: aiohttp.ClientSession

    @property
    def url(self) -> str:
        return self.gateway.url

    def weights(self, v1: int, v2: int, **changes: Any) -> None:
        table = RoutingTable(
            namespace="ns",
            deployment="chat",
            variants=(
                VariantRoute("v1", v1, (self.a.url,)),
                VariantRoute("v2", v2, (self.b.url,)),
            ),
            models=frozenset({"stub", "stub-lora"}),
        )
        self.source.set(replace(table, **changes))

    async def post(
        self, path: str, body: Any = None, *, data: Any = None, **kwargs: Any
    ) -> tuple[int, dict[str, str], bytes]:
        payload = {"json": body} if data is None else {"data": data}
        async with self.http.post(self.url + path, **payload, **kwargs) as response:
            return response.status, dict(response.headers), await response.read()

    async def metric(self, name: str, **labels: str) -> float:
        return metric_value(await scrape(self.http, self.url), name, **labels)


async def make_harness(**config: Any) -> Harness:
    a, b = await start_stub("a"), await start_stub("b")
    source = MemorySource()
    settings = GatewayConfig(port=0, max_body_bytes=MAX_BODY, **config)
    gateway = await start_gateway(settings, source, rng=random.Random(2026))
    harness = Harness(a, b, source, gateway, aiohttp.ClientSession())
    harness.weights(90, 10)
    return harness


async def close_harness(h: Harness) -> None:
    await h.http.close()
    await h.gateway.stop()
    await h.a.stop()
    await h.b.stop()


@pytest.fixture
async def gw() -> AsyncIterator[Harness]:
    harness = await make_harness(upstream_timeout_s=0.5)
    yield harness
    await close_harness(harness)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def error_of(body: bytes) -> dict[str, Any]:
    doc = json.loads(body)
    assert set(doc) == {"error"}
    assert set(doc["error"]) == {"message", "type", "param", "code"}
    return dict(doc["error"])


# -- the happy paths ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "kind"),
    [
        ("/v1/chat/completions", CHAT, "chat.completion"),
        ("/v1/completions", {"model": "stub", "prompt": "hi"}, "text_completion"),
        ("/v1/embeddings", {"model": "stub", "input": "hi"}, "list"),
    ],
)
async def test_requests_are_proxied_with_variant_and_server_timing(
    gw: Harness, path: str, body: dict[str, Any], kind: str
) -> None:
    gw.weights(100, 0)
    status, headers, raw = await gw.post(path, body)
    assert status == 200
    assert json.loads(raw)["object"] == kind
    assert headers["x-sits-variant"] == "v1"
    gateway_ms, upstream_ms = (
        float(p.split("dur=")[1]) for p in headers["Server-Timing"].split(",")
    )
    assert 0 <= gateway_ms < 100
    assert 0 <= upstream_ms < 1000


async def test_client_headers_reach_the_upstream_and_hop_by_hop_ones_do_not(gw: Harness) -> None:
    gw.weights(100, 0)
    sent = {"Authorization": "Bearer token", "X-Request-Id": "r1", "Proxy-Authorization": "x"}
    await gw.post("/v1/chat/completions", CHAT, headers=sent)
    seen = {k.lower(): v for k, v in gw.a.stub.stats.last_headers[-1].items()}
    assert seen["authorization"] == "Bearer token"
    assert seen["x-request-id"] == "r1"
    assert seen["x-forwarded-for"] == "127.0.0.1"
    assert "proxy-authorization" not in seen


async def test_models_health_and_unknown_paths(gw: Harness) -> None:
    async with gw.http.get(gw.url + "/v1/models") as response:
        assert sorted(m["id"] for m in (await response.json())["data"]) == ["stub", "stub-lora"]
    async with gw.http.get(gw.url + "/health") as response:
        health = await response.json()
        assert response.status == 200
        assert health["routable"] == ["v1", "v2"]
    async with gw.http.get(gw.url + "/v2/nothing") as response:
        assert response.status == 404
        assert error_of(await response.read())["type"] == "not_found_error"


async def test_a_stopping_gateway_drains_closing_each_connection_after_its_answer(
    gw: Harness,
) -> None:
    """What a terminating gateway pod does: it keeps answering on the connections clients
    hold (a pooled connection outlives the endpoint's removal from the Service), each answer
    closes its connection, /health fails; only after the drain does the listener close."""
    gw.weights(100, 0)
    status, headers, _ = await gw.post("/v1/chat/completions", CHAT)
    assert status == 200
    assert headers.get("Connection", "").lower() != "close"  # kept alive before the drain
    drain = asyncio.create_task(gw.gateway.drain(1.0))
    await asyncio.sleep(0.05)
    status, headers, _ = await gw.post("/v1/chat/completions", CHAT)
    assert (status, headers["Connection"].lower()) == (200, "close")
    async with gw.http.get(gw.url + "/health") as response:
        assert (response.status, (await response.json())["status"]) == (503, "draining")
    assert not drain.done()
    await drain
    await gw.gateway.runner.cleanup()
    with pytest.raises(aiohttp.ClientConnectorError):
        await gw.post("/v1/chat/completions", CHAT)


# -- streams -----------------------------------------------------------------------------


async def test_a_stream_is_relayed_as_it_arrives_not_when_it_ends(gw: Harness) -> None:
    gw.weights(100, 0)
    started = time.monotonic()
    arrivals: list[float] = []
    headers = {"x-stub-chunks": "4", "x-stub-chunk-delay-ms": "150"}
    async with gw.http.post(
        gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
    ) as response:
        assert response.content_type == "text/event-stream"
        async for _ in response.content.iter_any():
            arrivals.append(time.monotonic() - started)
    assert len(arrivals) >= 3, "events arrived in one piece"
    assert arrivals[0] < arrivals[-1] - 0.3


async def test_stream_usage_is_counted_without_showing_it_to_the_client(gw: Harness) -> None:
    gw.weights(100, 0)
    _, _, raw = await gw.post("/v1/chat/completions", {**CHAT, "stream": True})
    assert b'"usage"' not in raw
    assert raw.endswith(b"data: [DONE]\n\n")
    assert gw.a.stub.stats.last_bodies[-1]["stream_options"] == {"include_usage": True}
    assert await gw.metric("sits_tokens_total", variant="v1", token_type="output") == 4
    assert await gw.metric("sits_time_to_first_token_seconds_count", variant="v1") == 1
    asked = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    _, _, raw = await gw.post("/v1/chat/completions", asked)
    assert raw.count(b'"usage"') == 1


async def test_an_upstream_killed_mid_stream_ends_the_stream_loudly(gw: Harness) -> None:
    gw.weights(100, 0)
    headers = {"x-stub-chunks": "10", "x-stub-kill-after": "2"}
    async with gw.http.post(
        gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
    ) as response:
        assert response.status == 200
        received, error = await read_until_error(response)
    assert isinstance(error, aiohttp.ClientPayloadError), "the body must not end cleanly"
    assert received.count(b"t0 ") == 1
    assert received.count(b"t1 ") == 1
    assert b'"error"' in received, "the client must be told why the stream ended"
    assert b"[DONE]" not in received
    assert await gw.metric("sits_requests_total", variant="v1", outcome="error", code="502") == 1


async def test_a_client_that_leaves_cancels_the_upstream_request(gw: Harness) -> None:
    gw.weights(100, 0)
    headers = {"x-stub-chunks": "200", "x-stub-chunk-delay-ms": "20"}
    async with gw.http.post(
        gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
    ) as response:
        await response.content.readany()
        response.close()

    async def upstream_cancelled() -> bool:
        return gw.a.stub.stats.cancelled_streams == 1

    async def counted() -> bool:
        return await gw.metric("sits_requests_total", code="499") == 1

    await eventually(upstream_cancelled, within=3)
    assert gw.a.stub.stats.completed_streams == 0
    await eventually(counted, within=3)
    assert await gw.metric("sits_requests_total", outcome="error") == 0


async def test_a_client_that_gives_up_on_a_slow_answer_is_counted_as_gone(gw: Harness) -> None:
    gw.weights(100, 0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await gw.post("/v1/chat/completions", CHAT, headers={"x-stub-delay-ms": "3000"})

    async def counted() -> bool:
        return await gw.metric("sits_requests_total", variant="v1", code="499") == 1

    took = await eventually(counted, within=2)
    assert took < 1.5, "the handler must be cancelled with the client, not wait for upstream"
    assert await gw.metric("sits_requests_total", outcome="error") == 0


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"", 400, "invalid_json"),
        (b"\xff\xfe\x00", 400, "invalid_json"),
        (b"[" * 3000, 400, "invalid_json"),
        (b'{"messages": []}', 400, "invalid_type"),
        (b'{"model": "stub", "stream": "yes"}', 400, "invalid_type"),
        (b'{"model": "gpt-4"}', 404, "model_not_found"),
        (b'{"model": "stub", "pad": "' + b"x" * MAX_BODY + b'"}', 413, "body_too_large"),
    ],
)
async def test_bad_input_gets_an_openai_error_and_never_reaches_a_variant(
    gw: Harness, data: bytes, status: int, code: str
) -> None:
    got, _, raw = await gw.post("/v1/chat/completions", data=data)
    assert got == status
    assert error_of(raw)["code"] == code
    assert gw.a.stub.stats.requests + gw.b.stub.stats.requests == 0
    assert await gw.metric("sits_gateway_rejected_total", code=str(status), reason=code) == 1
    assert await gw.metric("sits_requests_total") == 0


async def test_a_chunked_body_over_the_limit_is_413(gw: Harness) -> None:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(8):
            yield b" " * 1024

    status, _, raw = await gw.post("/v1/chat/completions", data=body())
    assert status == 413
    assert error_of(raw)["code"] == "body_too_large"


@pytest.mark.parametrize(("v1", "v2", "drop_endpoints"), [(100, 0, True), (0, 0, False)])
async def test_no_ready_endpoint_with_weight_is_503(
    gw: Harness, v1: int, v2: int, drop_endpoints: bool
) -> None:
    gw.weights(v1, v2)
    if drop_endpoints:
        table = gw.source.current()
        gw.source.set(
            replace(table, variants=tuple(replace(v, endpoints=()) for v in table.variants))
        )
    status, _, raw = await gw.post("/v1/chat/completions", CHAT)
    assert status == 503
    assert error_of(raw)["code"] == "no_ready_endpoint"
    assert gw.a.stub.stats.requests + gw.b.stub.stats.requests == 0


async def test_garbage_never_takes_the_gateway_down(gw: Harness) -> None:
    for method, path in [
        ("GET", "/v1/chat/completions"),
        ("PUT", "/v1/completions"),
        ("DELETE", "/metrics"),
        ("POST", "/%2e%2e/etc/passwd"),
    ]:
        async with gw.http.request(method, gw.url + path, data=b"\x00" * 100) as response:
            assert response.status in (404, 405)
    for data in (b"\x00" * 1000, b'{"model": {"$ne": 1}}', b'{"model": "stub", "user": []}'):
        status, _, _ = await gw.post("/v1/completions", data=data)
        assert status == 400
    status, _, _ = await gw.post("/v1/chat/completions", CHAT)
    assert status == 200


# -- upstream failures -------------------------------------------------------------------


async def test_a_refused_connection_is_502_and_an_error_of_that_variant(gw: Harness) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    table = gw.source.current()
    gw.source.set(replace(table, variants=(VariantRoute("v1", 100, (dead,)),)))
    status, headers, raw = await gw.post("/v1/chat/completions", CHAT)
    assert status == 502
    assert headers["x-sits-variant"] == "v1"
    assert error_of(raw)["code"] == "bad_gateway"
    assert await gw.metric("sits_requests_total", variant="v1", outcome="error", code="502") == 1


async def test_an_upstream_timeout_is_504_and_an_error_of_that_variant(gw: Harness) -> None:
    gw.weights(0, 100)
    started = time.monotonic()
    status, _, raw = await gw.post(
        "/v1/chat/completions", CHAT, headers={"x-stub-delay-ms": "3000"}
    )
    assert status == 504
    assert time.monotonic() - started < 2.0
    assert error_of(raw)["code"] == "gateway_timeout"
    assert await gw.metric("sits_requests_total", variant="v2", outcome="error", code="504") == 1


async def test_a_stream_that_stalls_past_the_timeout_is_cut(gw: Harness) -> None:
    gw.weights(100, 0)
    headers = {"x-stub-chunks": "3", "x-stub-chunk-delay-ms": "2000"}
    async with gw.http.post(
        gw.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers=headers
    ) as response:
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    assert await gw.metric("sits_requests_total", variant="v1", outcome="error", code="504") == 1


@pytest.mark.parametrize(
    ("code", "outcome"), [("500", "error"), ("503", "error"), ("429", "error"), ("400", "success")]
)
async def test_upstream_statuses_pass_through_and_count_by_the_contract(
    gw: Harness, code: str, outcome: str
) -> None:
    gw.weights(100, 0)
    status, _, raw = await gw.post("/v1/chat/completions", CHAT, headers={"x-stub-status": code})
    assert str(status) == code
    assert error_of(raw)["message"] == f"stub error {code}"
    assert await gw.metric("sits_requests_total", variant="v1", outcome=outcome, code=code) == 1


# -- the split ---------------------------------------------------------------------------


async def test_weight_zero_never_receives_a_request(gw: Harness) -> None:
    gw.weights(100, 0)
    bodies = [{**CHAT, "user": f"u{i}"} if i % 3 == 0 else CHAT for i in range(300)]
    headers = [{"x-session-id": f"s{i}"} if i % 3 == 1 else {} for i in range(300)]
    counts = await bounded_load(gw.http, gw.url + "/v1/chat/completions", bodies, headers=headers)
    assert counts["v1"] == 300
    assert gw.b.stub.stats.requests == 0
    gw.weights(0, 100)  # and the other way round, at once
    counts = await bounded_load(gw.http, gw.url + "/v1/chat/completions", bodies, headers=headers)
    assert counts["v2"] == 300
    assert gw.a.stub.stats.requests == 300


async def test_ninety_ten_over_2000_requests_lands_within_two_points(gw: Harness) -> None:
    counts = await bounded_load(gw.http, gw.url + "/v1/chat/completions", [CHAT] * 2000)
    assert counts["200"] == 2000
    assert counts["v2"] / 2000 == pytest.approx(0.10, abs=0.02)
    assert gw.b.stub.stats.requests == counts["v2"]


async def test_sessions_stick_by_header_or_user_and_the_table_can_rename_the_header(
    gw: Harness,
) -> None:
    async def variant(body: dict[str, Any], headers: dict[str, str] | None = None) -> str:
        return (await gw.post("/v1/chat/completions", body, headers=headers))[1]["x-sits-variant"]

    gw.weights(50, 50)
    for session in (f"s{i}" for i in range(40)):
        by_header = {await variant(CHAT, {"x-session-id": session}) for _ in range(4)}
        by_user = {await variant({**CHAT, "user": session}) for _ in range(4)}
        assert len(by_header) == 1
        assert by_user == by_header, "the same key must pick the same variant either way"
    gw.weights(50, 50, sticky=StickyPolicy(header="x-conversation", use_openai_user=False))
    picks = {await variant({**CHAT, "user": f"u{i}"}, {"x-conversation": "one"}) for i in range(20)}
    assert len(picks) == 1


async def drop_then_answer(drops: int) -> tuple[asyncio.Server, str, list[int]]:
    """A raw HTTP/1.1 upstream that reads a request and hangs up ``drops`` times, then answers.

    Hanging up after reading the request without a byte of answer is what a request sent on
    a pooled connection the upstream just closed looks like (the keep-alive race)."""
    seen = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen[0] += 1
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        )
        await reader.readexactly(length)
        if seen[0] > drops:
            body = b'{"object":"chat.completion","choices":[]}'
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            writer.write(head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", seen


@pytest.mark.parametrize(("drops", "status", "connections"), [(1, 200, 2), (5, 502, 2)])
async def test_a_hang_up_before_any_answer_is_retried_once_on_a_fresh_connection(
    gw: Harness, drops: int, status: int, connections: int
) -> None:
    server, url, seen = await drop_then_answer(drops)
    try:
        gw.source.set(replace(gw.source.current(), variants=(VariantRoute("v1", 100, (url,)),)))
        got, _, _ = await gw.post("/v1/chat/completions", CHAT)
        assert got == status
        assert seen[0] == connections, "exactly one retry"
        assert await gw.metric("sits_gateway_upstream_retries_total", variant="v1") == 1
        outcome = "success" if status == 200 else "error"
        assert await gw.metric("sits_requests_total", variant="v1", outcome=outcome) == 1
    finally:
        server.close()
        await server.wait_closed()
