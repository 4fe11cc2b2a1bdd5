"""The join with the analysis: real Prometheus scrapes the gateway, and the SITS2026 SLIs
come out of the design's PromQL, and out of the operator's own policy and provider.

Two gateways are scraped: the one under test (deployment ``chat``) and a decoy
(deployment ``other``) whose variants must not leak into the answers, so the
``namespace``/``sits_deployment`` filters are exercised too. Variant ``v2`` is slow
(150 ms) and fails every 5th request; ``v1`` is fast and never fails.
"""

from __future__ import annotations

import asyncio
import json
import math
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import yaml

from sits_inference.gateway.app import RunningGateway, start_gateway
from sits_inference.gateway.config import GatewayConfig
from sits_inference.gateway.sources import MemorySource
from sits_inference.gateway.table import RoutingTable, VariantRoute
from sits_inference_testing.load import eventually
from sits_inference_testing.stub import RunningStub, StubBehaviour, start_stub
from sits_localcluster.prometheus import LocalPrometheus
from sits_operator.adapters.prometheus import PrometheusProvider, Target
from sits_operator.model.policy import parse_policy

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]
CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hello"}]}
SLOW_MS = 150
SUCCESS_RATE = (
    'sum by (variant) (rate(sits_requests_total{{namespace="{ns}",sits_deployment="{dep}",'
    'outcome="success"}}[5m])) / sum by (variant) (rate(sits_requests_total{{namespace="{ns}",'
    'sits_deployment="{dep}"}}[5m]))'
)
LATENCY_P95 = (
    "1000 * histogram_quantile(0.95, sum by (variant, le) (rate("
    'sits_request_duration_seconds_bucket{{namespace="{ns}",sits_deployment="{dep}"}}[1m])))'
)


@dataclass
class Stack:
    fast: RunningStub
    slow: RunningStub
    gateway: RunningGateway
    decoy: RunningGateway
    prometheus: LocalPrometheus


def table(deployment: str, fast: RunningStub, slow: RunningStub) -> RoutingTable:
    variants: tuple[VariantRoute, ...] = (
        VariantRoute("v1", 50, (fast.url,)),
        VariantRoute("v2", 50, (slow.url,)),
    )
    if deployment != "chat":
        variants = (VariantRoute("decoy", 100, (fast.url,)),)
    return RoutingTable("sits-demo", deployment, variants, frozenset({"chat"}))


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    fast = await start_stub("fast")
    slow = await start_stub("slow", StubBehaviour(delay_s=SLOW_MS / 1000, fail_every=5))
    config = GatewayConfig(port=0)
    gateway = await start_gateway(config, MemorySource(table("chat", fast, slow)))
    decoy = await start_gateway(config, MemorySource(table("other", fast, slow)))
    targets = [g.url.removeprefix("http://") for g in (gateway, decoy)]
    prometheus = LocalPrometheus(tmp_path / "prometheus", targets=targets)
    await asyncio.to_thread(prometheus.start)
    try:
        stack = Stack(fast, slow, gateway, decoy, prometheus)
        await warm_up(stack)
        yield stack
    finally:
        await asyncio.to_thread(prometheus.stop)
        for running in (gateway, decoy, fast, slow):
            await running.stop()


async def warm_up(stack: Stack) -> None:
    """Wait until Prometheus scrapes both gateways (its discovery applies targets only after
    ~5 s), with one request per variant first, so every series has a scrape before load."""
    async with aiohttp.ClientSession() as http:
        for url in (stack.gateway.url, stack.decoy.url):
            for session in ("a", "b", "c", "d"):
                headers = {"x-session-id": session}
                async with http.post(url + "/v1/chat/completions", json=CHAT, headers=headers):
                    pass

        async def scraped_twice() -> bool:
            found = await query(http, stack.prometheus, "count_over_time(up[1m])")
            return len(found) == 2 and min(found.values()) >= 2

        await eventually(scraped_twice, within=30, step=0.5)


async def drive_traffic(http: aiohttp.ClientSession, stack: Stack, rounds: int = 16) -> None:
    """About 40 requests every half second for ``rounds`` rounds: bounded in count and time."""

    async def one(url: str, index: int) -> None:
        headers = {"x-session-id": f"s{index}"}
        async with http.post(url + "/v1/chat/completions", json=CHAT, headers=headers) as r:
            await r.read()

    async with asyncio.timeout(60):
        for round_ in range(rounds):
            batch = [one(stack.gateway.url, round_ * 40 + i) for i in range(40)]
            await asyncio.gather(*batch, one(stack.decoy.url, round_), asyncio.sleep(0.5))


async def query(
    http: aiohttp.ClientSession, prometheus: LocalPrometheus, promql: str
) -> dict[str, float]:
    url = f"{prometheus.url}/api/v1/query?query={urllib.parse.quote(promql)}"
    async with http.get(url) as response:
        doc = await response.json()
    assert doc["status"] == "success", doc
    return {
        r["metric"].get("variant", r["metric"].get("instance", "")): float(r["value"][1])
        for r in doc["data"]["result"]
    }


async def test_the_design_promql_gives_the_sits2026_slis_per_variant(stack: Stack) -> None:
    async with aiohttp.ClientSession() as http:
        await drive_traffic(http, stack)
        success_q = SUCCESS_RATE.format(ns="sits-demo", dep="chat")
        latency_q = LATENCY_P95.format(ns="sits-demo", dep="chat")

        async def both_variants_scraped() -> bool:
            found = await query(http, stack.prometheus, success_q)
            return set(found) == {"v1", "v2"} and not any(map(math.isnan, found.values()))

        await eventually(both_variants_scraped, within=30, step=0.5)
        success = await query(http, stack.prometheus, success_q)
        latency = await query(http, stack.prometheus, latency_q)
        median = await query(http, stack.prometheus, latency_q.replace("0.95", "0.5", 1))
    assert set(success) == set(latency) == {"v1", "v2"}, "the decoy deployment must not leak in"
    assert success["v1"] == pytest.approx(1.0)
    assert success["v2"] == pytest.approx(0.8, abs=0.04)
    # The slow variant's delay bounds its p95 from below; a loaded machine may add to both.
    assert SLOW_MS * 0.9 <= latency["v2"] < 2000
    # The labels are not swapped: the fast variant's typical request beats the slow one's
    # floor. Medians, since a stall of the shared event loop can push any tail past it.
    assert median["v1"] < SLOW_MS * 0.9 <= median["v2"]


async def test_the_operators_policy_and_provider_read_the_same_slis(stack: Stack) -> None:
    doc = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
    policy = parse_policy(doc["metadata"]["name"], doc["spec"])
    provider = PrometheusProvider(stack.prometheus.url)
    target = Target(namespace="sits-demo", deployment="chat", variants=("v1", "v2"))
    async with aiohttp.ClientSession() as http:
        await drive_traffic(http, stack)

    async def sampled() -> bool:
        results = [await provider.samples(rule, target) for rule in policy.rules]
        return all(set(r.by_variant) == {"v1", "v2"} for r in results) and all(
            s.is_number for r in results for s in r.by_variant.values()
        )

    await eventually(sampled, within=30, step=0.5)
    by_sli = {rule.sli: await provider.samples(rule, target) for rule in policy.rules}
    success, latency = by_sli["success_rate_5m"], by_sli["latency_p95_ms"]
    assert success.error is None
    assert latency.error is None
    assert success.by_variant["v2"].value == pytest.approx(0.8, abs=0.04)
    assert success.by_variant["v1"].value == pytest.approx(1.0)
    requests = success.by_variant["v2"].requests
    assert requests is not None
    assert requests >= policy.min_requests, json.dumps({"requests": requests})
    assert latency.by_variant["v2"].value is not None
    assert latency.by_variant["v2"].value >= SLOW_MS * 0.9
