"""The sidecar exports the request-metric contract with ``source="sidecar"``.

Whatever routes traffic to a variant's pods (the SITS gateway, a Gateway API
implementation, a plain Service), the sidecar sees every request its pod serves, so its
series are the SLIs when there is no gateway. The exposition is asserted exactly, like the
gateway's (tests/integration/test_gateway_telemetry.py): the analysis' queries depend on
these names and labels. A cache hit counts as a request of the variant: it is what the
client got.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from sits_inference.cache.app import start_sidecar
from sits_inference.cache.embedding import Embedder, default_embedder
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.settings import SidecarSettings
from sits_inference.cache.tiers import build_tiers
from sits_inference_testing.metrics import Series, metric_value, parse_metrics
from tests.unit.test_cache_sidecar_app import FAULT, FakeVllm, Rig, _serve_fake

pytestmark = pytest.mark.timeout(120)

SERIES = {"namespace", "sits_deployment", "variant", "operation", "token_bucket", "source"}
CONTRACT = {
    "sits_requests_total": SERIES | {"outcome", "code"},
    "sits_request_duration_seconds": SERIES,
    "sits_time_to_first_token_seconds": SERIES,
    "sits_time_per_output_token_seconds": SERIES,
    "sits_tokens_total": SERIES - {"token_bucket"} | {"token_type"},
}
LABELS = {"namespace": "prod", "sits_deployment": "chat", "variant": "canary"}


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return default_embedder()


@pytest.fixture
async def rig(embedder: Embedder) -> AsyncIterator[Rig]:
    fake = FakeVllm()
    runner, port = await _serve_fake(fake)
    settings = SidecarSettings(
        port=0,
        upstream=f"http://127.0.0.1:{port}",
        revision="r1",
        variant="canary",
        namespace="prod",
        deployment="chat",
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


def contract_series(series: list[Series]) -> list[Series]:
    families = tuple(CONTRACT)
    return [s for s in series if s.name.startswith(families)]


def family_of(name: str) -> str:
    return next(f for f in sorted(CONTRACT, key=len, reverse=True) if name.startswith(f))


async def test_the_exposition_is_exactly_the_contract_with_source_sidecar(rig: Rig) -> None:
    assert (await rig.chat("What is the answer?"))[0] == 200  # miss
    assert (await rig.chat("What is the answer?"))[0] == 200  # hit
    assert (await rig.chat("Tell me a story", stream=True))[0] == 200  # streamed miss
    assert (await rig.chat("Boom", headers={FAULT: "http-500"}))[0] == 500
    async with rig.http.get(rig.sidecar.url + "/metrics") as response:
        text = await response.text()
    assert "otel_scope" not in text
    assert "target_info" not in text
    found = contract_series(parse_metrics(text))
    assert {family_of(s.name) for s in found} == set(CONTRACT)
    for s in found:
        assert set(s.labels) - {"le"} == CONTRACT[family_of(s.name)], s
        assert s.labels["source"] == "sidecar"
        assert {k: s.labels[k] for k in LABELS} == LABELS
        assert s.labels.get("operation", "chat") == "chat"
    ok = metric_value(found, "sits_requests_total", outcome="success", code="200")
    assert ok == 3  # the hit is one of them: the client got an answer
    assert metric_value(found, "sits_requests_total", outcome="error", code="500") == 1
    assert metric_value(found, "sits_request_duration_seconds_count") == 4
    assert metric_value(found, "sits_time_to_first_token_seconds_count") == 1
    # usage: the miss, the hit (the cost of its answer) and the stream (usage added to store)
    assert metric_value(found, "sits_tokens_total", token_type="output") == 3 * 4


async def test_a_replayed_stream_hit_has_a_time_to_first_token(rig: Rig) -> None:
    for _ in range(2):
        status, headers, _body = await rig.chat("Stream it twice", stream=True)
        assert status == 200
    assert headers["x-sits-cache"] == "hit"
    series = await rig.metrics()
    assert metric_value(series, "sits_time_to_first_token_seconds_count", source="sidecar") == 2


async def test_errors_the_sidecar_answers_itself_count_against_the_variant(rig: Rig) -> None:
    rig.fake.healthy = False
    await rig.sidecar.sidecar.monitor.check()
    status, _, _ = await rig.chat("Anyone there?")
    assert status == 503
    status, _, _ = await rig.post("/v1/chat/completions", {"model": "tiny"})  # no messages
    assert status == 400
    series = await rig.metrics()
    assert metric_value(series, "sits_requests_total", outcome="error", code="503") == 1
    assert metric_value(series, "sits_requests_total", outcome="success", code="400") == 1


async def test_a_stream_cut_by_vllm_counts_as_the_error_the_client_got(rig: Rig) -> None:
    status, _, _ = await rig.chat("Cut me off", stream=True, headers={FAULT: "truncate"})
    assert status == -1  # the sidecar aborted the broken stream
    series = await rig.metrics()
    assert metric_value(series, "sits_requests_total", outcome="error", code="502") == 1
    assert metric_value(series, "sits_requests_total", outcome="success", code="200") == 0
