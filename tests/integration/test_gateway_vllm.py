"""The gateway in front of two real vLLM servers (CPU, tiny model), driven by the official
``openai`` client, as users will: completions and streamed chat, the 90/10 split over
2,000 requests, a weight change honoured within a second, sticky sessions.

The model is random: tests check shape, token counts and routing, never text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from openai import AsyncOpenAI

from sits_inference.gateway.app import RunningGateway, start_gateway
from sits_inference.gateway.config import GatewayConfig
from sits_inference.gateway.sources.static import StaticFileSource
from sits_inference_testing.metrics import metric_value, scrape
from sits_vllm import VllmServer
from sits_vllm.pytest_plugin import VllmFactory

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

MODEL = "tiny"
FULL_LENGTH = {"ignore_eos": True}  # random weights may stop at once; fix the token count


@pytest.fixture(scope="module")
def second_server(vllm_factory: VllmFactory) -> VllmServer:
    """v2: a second real vLLM on the same tiny model and served name (module-scoped: ~1 min)."""
    return vllm_factory(served_model_name=MODEL)


def write_routes(path: Path, v1: VllmServer, v2: VllmServer, w1: int, w2: int) -> None:
    path.write_text(
        json.dumps(
            {
                "namespace": "sits-demo",
                "deployment": "chat",
                "model": MODEL,
                "variants": [
                    {"name": "v1", "weight": w1, "endpoints": [v1.url]},
                    {"name": "v2", "weight": w2, "endpoints": [v2.url]},
                ],
            }
        )
    )


class Rig:
    def __init__(self, gateway: RunningGateway, routes: Path, v1: VllmServer, v2: VllmServer):
        self.gateway, self.routes, self.v1, self.v2 = gateway, routes, v1, v2
        self.client = AsyncOpenAI(
            base_url=gateway.url + "/v1", api_key="unused", max_retries=0, timeout=120
        )

    def set_weights(self, w1: int, w2: int) -> None:
        write_routes(self.routes, self.v1, self.v2, w1, w2)

    async def variant_of_completion(self, user: str | None = None, max_tokens: int = 1) -> str:
        raw = await self.client.completions.with_raw_response.create(
            model=MODEL,
            prompt="canary",
            max_tokens=max_tokens,
            temperature=0.0,
            user=user or "",
            extra_body=FULL_LENGTH,
        )
        return raw.headers["x-sits-variant"]


@pytest.fixture
async def rig(
    vllm_server: VllmServer, second_server: VllmServer, tmp_path: Path
) -> AsyncIterator[Rig]:
    assert vllm_server.url.startswith("http://127.0.0.1:")
    assert second_server.url.startswith("http://127.0.0.1:")
    routes = tmp_path / "routes.json"
    write_routes(routes, vllm_server, second_server, 90, 10)
    gateway = await start_gateway(GatewayConfig(port=0), StaticFileSource(routes))
    built = Rig(gateway, routes, vllm_server, second_server)
    try:
        yield built
    finally:
        await built.client.close()
        await gateway.stop()


async def test_completions_and_streamed_chat_pass_through_with_usage(rig: Rig) -> None:
    result = await rig.client.completions.create(
        model=MODEL, prompt="The canary", max_tokens=8, temperature=0.0, extra_body=FULL_LENGTH
    )
    assert result.usage is not None
    assert result.usage.completion_tokens == 8
    assert result.choices[0].text
    stream = await rig.client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Hello there"}],
        stream=True,
        max_tokens=8,
        temperature=0.0,
        extra_body=FULL_LENGTH,
    )
    chunks = [chunk async for chunk in stream]
    assert len(chunks) > 2, "a stream, not one message"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert all(c.usage is None for c in chunks), "the usage event the gateway asked for is hidden"
    async with aiohttp.ClientSession() as http:
        series = await scrape(http, rig.gateway.url)
    assert metric_value(series, "sits_tokens_total", token_type="output") == 16
    assert metric_value(series, "sits_time_to_first_token_seconds_count", operation="chat") == 1
    assert metric_value(series, "sits_requests_total", outcome="success") == 2


async def test_ninety_ten_over_2000_real_requests_lands_within_two_points(rig: Rig) -> None:
    gate = asyncio.Semaphore(32)

    async def one() -> str:
        async with gate:
            return await rig.variant_of_completion()

    async with asyncio.timeout(400):
        counts = Counter(await asyncio.gather(*(one() for _ in range(2000))))
    assert sum(counts.values()) == 2000
    assert counts["v2"] / 2000 == pytest.approx(0.10, abs=0.02)


async def test_a_weight_change_is_honoured_within_a_second(rig: Rig) -> None:
    await rig.variant_of_completion()  # warm both the pool and the servers
    rig.set_weights(0, 100)
    changed = time.monotonic()
    late_old: list[float] = []  # requests sent 1 s or more after the change that got v1
    while time.monotonic() - changed < 2.0:  # bounded: about 2 s of sequential requests
        sent = time.monotonic() - changed
        if await rig.variant_of_completion() != "v2" and sent >= 1.0:
            late_old.append(sent)
    assert late_old == [], "still routing by the old weights 1 s after the change"
    assert {await rig.variant_of_completion() for _ in range(20)} == {"v2"}


async def test_sticky_sessions_stay_put_while_weights_do_not_change(rig: Rig) -> None:
    rig.set_weights(50, 50)
    await asyncio.sleep(0.5)  # the file source polls every 200 ms
    seen: dict[str, set[str]] = {}
    for _ in range(3):
        for session in (f"user-{i}" for i in range(30)):
            seen.setdefault(session, set()).add(await rig.variant_of_completion(user=session))
    assert all(len(variants) == 1 for variants in seen.values())
    assert set().union(*seen.values()) == {"v1", "v2"}, "50/50 should use both variants"
