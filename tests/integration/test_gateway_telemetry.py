"""What the gateway exports: exact Prometheus names and labels, spans, OTLP, and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sits_inference.gateway.app import RunningGateway, start_gateway
from sits_inference.gateway.cli import make_tracer_provider
from sits_inference.gateway.config import GatewayConfig
from sits_inference.gateway.sources import MemorySource
from sits_inference.gateway.table import RoutingTable, VariantRoute
from sits_inference.gateway.telemetry import Probes
from sits_inference_testing.load import eventually
from sits_inference_testing.stub import RunningStub, start_stub

CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hello"}]}
BASE = {"namespace", "sits_deployment"}
# "source": the gateway's series are told from the sidecars' (the same requests) by it.
SERIES = BASE | {"variant", "operation", "token_bucket", "source"}
GENAI = BASE | {"variant", "gen_ai_operation_name", "gen_ai_request_model"}
# The contract (docs/architecture.md) plus the bounded extras; nothing else may appear.
EXPECTED_FAMILIES = {
    "sits_requests_total": ("counter", SERIES | {"outcome", "code"}),
    "sits_request_duration_seconds": ("histogram", SERIES),
    "sits_time_to_first_token_seconds": ("histogram", SERIES),
    "sits_time_per_output_token_seconds": ("histogram", SERIES),
    "sits_tokens_total": ("counter", BASE | {"variant", "operation", "token_type", "source"}),
    "sits_gateway_rejected_total": ("counter", BASE | {"code", "reason"}),
    "sits_gateway_variant_weight_percent": ("gauge", BASE | {"variant"}),
    "sits_gateway_variant_endpoints": ("gauge", BASE | {"variant"}),
    "gen_ai_server_request_duration_seconds": ("histogram", GENAI | {"error_type"}),
    "gen_ai_server_time_to_first_token_seconds": ("histogram", GENAI),
    "gen_ai_server_time_per_output_token_seconds": ("histogram", GENAI),
}


def table_for(stub: RunningStub) -> RoutingTable:
    return RoutingTable(
        namespace="ns",
        deployment="chat",
        variants=(VariantRoute("v1", 100, (stub.url,)), VariantRoute("v2", 0, ())),
        models=frozenset({"stub"}),
    )


@pytest.fixture
async def stub() -> AsyncIterator[RunningStub]:
    running = await start_stub("a")
    yield running
    await running.stop()


async def gateway_with(
    stub: RunningStub, probes: Probes | None = None, **config: Any
) -> RunningGateway:
    return await start_gateway(
        GatewayConfig(port=0, **config), MemorySource(table_for(stub)), probes=probes
    )


async def traffic(http: aiohttp.ClientSession, url: str) -> None:
    """One of each: plain, streamed, upstream error, rejected."""
    for body, headers in [
        (CHAT, None),
        ({**CHAT, "stream": True}, None),
        (CHAT, {"x-stub-status": "503"}),
        ({"model": "unknown"}, None),
    ]:
        async with http.post(url + "/v1/chat/completions", json=body, headers=headers) as r:
            await r.read()


def families(text: str) -> dict[str, tuple[str, set[str]]]:
    """``# TYPE`` lines and the label names seen on each family's samples (``le`` aside)."""
    found: dict[str, tuple[str, set[str]]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            found[name] = (kind, set())
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        series, labels = line.split("{", 1)
        family = next(n for n in sorted(found, key=len, reverse=True) if series.startswith(n))
        names = {pair.split("=", 1)[0] for pair in labels.rsplit("}", 1)[0].split('",') if pair}
        found[family][1].update(names - {"le"})
    return found


@pytest.mark.parametrize("genai", [True, False])
async def test_exported_names_and_labels_are_exactly_the_contract(
    stub: RunningStub, genai: bool
) -> None:
    gateway = await gateway_with(stub, genai_metrics=genai)
    try:
        async with aiohttp.ClientSession() as http:
            await traffic(http, gateway.url)
            async with http.get(gateway.url + "/metrics") as response:
                text = await response.text()
    finally:
        await gateway.stop()
    expected = {k: v for k, v in EXPECTED_FAMILIES.items() if genai or not k.startswith("gen_ai")}
    assert families(text) == {
        name: (kind, set(labels)) for name, (kind, labels) in expected.items()
    }
    assert "otel_scope" not in text
    assert "target_info" not in text
    assert (
        'outcome="error",sits_deployment="chat",source="gateway",token_bucket="le128",'
        'variant="v1"} 1.0'
    ) in text
    assert 'sits_request_duration_seconds_bucket{le="0.01",namespace="ns"' in text


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


async def test_spans_carry_variant_sits2026_and_gen_ai_attributes(
    stub: RunningStub, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    gateway = await gateway_with(stub, Probes(tracer=provider.get_tracer("test")))
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    try:
        async with aiohttp.ClientSession() as http:
            await traffic(http, gateway.url)
            async with http.post(
                gateway.url + "/v1/completions",
                json={"model": "stub", "prompt": "x"},
                headers={"traceparent": parent},
            ) as response:
                await response.read()
    finally:
        await gateway.stop()
    finished: list[ReadableSpan] = list(exporter.get_finished_spans())
    assert [s.name for s in finished] == ["chat stub"] * 3 + ["text_completion stub"]
    plain, streamed, failed, _ = (dict(s.attributes or {}) for s in finished)
    assert plain["ab.variant"] == "v1"
    assert plain["gen_ai.operation.name"] == "chat"
    assert plain["gen_ai.request.model"] == plain["gen_ai.response.model"] == "stub"
    assert (plain["gen_ai.usage.input_tokens"], plain["gen_ai.usage.output_tokens"]) == (12, 4)
    assert plain["sits2026.success_rate_5m"] == 1.0
    assert 0 < float(plain["sits2026.latency_p95_ms"]) < 1000  # type: ignore[arg-type]
    assert streamed["gen_ai.usage.output_tokens"] == 4
    assert "gen_ai.server.time_to_first_token" in streamed
    assert failed["http.response.status_code"] == 503
    assert failed["sits2026.success_rate_5m"] == pytest.approx(2 / 3)
    assert finished[3].context is not None
    assert f"{finished[3].context.trace_id:032x}" == parent.split("-")[1]
    upstream_traceparent = stub.stub.stats.last_headers[-1]["traceparent"]
    assert upstream_traceparent.split("-")[1] == parent.split("-")[1], "trace context propagated"


async def test_otlp_export_sends_the_spans_to_the_configured_endpoint(stub: RunningStub) -> None:
    received: list[bytes] = []

    async def collect(request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        received.append(await request.read())
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", collect)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    endpoint = f"http://127.0.0.1:{runner.addresses[0][1]}/v1/traces"
    provider = make_tracer_provider(GatewayConfig(otlp_endpoint=endpoint))
    assert provider is not None
    gateway = await gateway_with(stub, Probes(tracer=provider.get_tracer("sits.gateway")))
    try:
        async with aiohttp.ClientSession() as http:
            await traffic(http, gateway.url)
        # The exporter is synchronous: flush from a thread so this loop can answer it.
        assert await asyncio.to_thread(provider.force_flush, 10_000)
    finally:
        await gateway.stop()
        await asyncio.to_thread(provider.shutdown)
        await runner.cleanup()
    request = ExportTraceServiceRequest()
    request.ParseFromString(b"".join(received[:1]))
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    variants = {a.value.string_value for s in spans for a in s.attributes if a.key == "ab.variant"}
    assert len(spans) >= 1
    assert variants == {"v1"}
    assert make_tracer_provider(GatewayConfig()) is None, "no endpoint, no exporter"


def gateway_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sits_inference.gateway", *args]


async def test_the_command_serves_from_a_routes_file_and_stops_on_sigterm(
    stub: RunningStub, tmp_path: Path
) -> None:
    routes = tmp_path / "routes.json"
    routes.write_text(
        json.dumps(
            {
                "namespace": "ns",
                "deployment": "chat",
                "model": "stub",
                "variants": [{"name": "v1", "weight": 100, "endpoints": [stub.url]}],
            }
        )
    )
    port = free_port()
    env = {**os.environ, "SITS_GATEWAY_PORT": str(port)}
    proc = await asyncio.create_subprocess_exec(
        *gateway_command("--routes-file", str(routes), "--log-level", "WARNING"), env=env
    )
    try:
        async with aiohttp.ClientSession() as http:

            async def healthy() -> bool:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/health") as response:
                        return response.status == 200
                except aiohttp.ClientConnectionError:
                    return False

            await eventually(healthy, within=30, step=0.1)
            async with http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=CHAT) as r:
                assert r.status == 200
                assert r.headers["x-sits-variant"] == "v1"
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize(
    "args", [("--source", "kubernetes"), ("--source", "static"), ("--use-openai-user", "maybe")]
)
def test_the_command_refuses_incomplete_settings(args: tuple[str, ...]) -> None:
    result = subprocess.run(gateway_command(*args), capture_output=True, timeout=60, check=False)
    assert result.returncode == 2
    assert b"usage: sits-gateway" in result.stderr


def test_the_command_explains_an_unusable_routes_file(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    routes.write_text("variants: [")
    command = gateway_command("--routes-file", str(routes), "--port", "0")
    result = subprocess.run(command, capture_output=True, timeout=60, check=False)
    assert result.returncode == 1
    assert b"cannot start" in result.stderr
    assert b"Traceback" not in result.stderr


def free_port() -> int:
    """A free loopback port (closed again before use; the OS does not hand it out at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
