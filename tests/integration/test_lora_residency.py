"""L3 LoRA residency against a real vLLM (CPU, tiny model, peft adapters made by the test).

One vLLM for the module, started with runtime LoRA and ``--max-loras 2 --max-cpu-loras 2``;
each test runs its own ``LoraResidency`` (M=2) against it after clearing the adapters a
previous test left. Outputs are compared with references produced by loading each adapter
by hand (plain names, greedy decoding) before any residency runs, so "the response came
from the adapter asked for" is checked on content, not on names. The model is random: the
references are noise, but distinct per adapter and repeatable.

``WeightReads`` counts how often vLLM opens each adapter's weights file (Linux inotify):
vLLM's worker reads it on every load into its CPU cache, so this observes from outside
whether vLLM reloaded an adapter the sidecar believed resident.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from sits_inference.cache.lora import AdapterSpec, LoraConfig, LoraResidency
from sits_inference.cache.lora.spec import split_versioned
from sits_inference.cache.metrics import CacheMetrics
from sits_vllm import VllmServer, make_lora_adapter
from sits_vllm.pytest_plugin import VllmFactory
from sits_vllm.weight_reads import WeightReads

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

BASE = "base"
PROMPT = "The quick brown fox jumps over the lazy dog"
TOKENS = 24
NAMES = ("a1", "a2", "a3", "a4")


@pytest.fixture(scope="module")
def adapter_dirs(tiny_model: Path) -> dict[str, Path]:
    return {name: make_lora_adapter(tiny_model, seed=i + 1) for i, name in enumerate(NAMES)}


@pytest.fixture(scope="module")
def server(vllm_factory: VllmFactory) -> VllmServer:
    """M=2 maps to --max-cpu-loras 2 (vLLM's CPU adapter cache); --max-loras 2 slots."""
    return vllm_factory(
        served_model_name=BASE, enable_lora=True, max_loras=2, extra_args=["--max-cpu-loras", "2"]
    )


def completion_body(model: str) -> dict[str, object]:
    return {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": TOKENS,
        "temperature": 0,
        "ignore_eos": True,
    }


def complete_sync(server: VllmServer, model: str) -> str:
    request = urllib.request.Request(
        f"{server.base_url}/completions",
        data=json.dumps(completion_body(model)).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return str(json.load(response)["choices"][0]["text"])


async def complete(session: aiohttp.ClientSession, server: VllmServer, model: str) -> str:
    body = completion_body(model)
    async with session.post(f"{server.base_url}/completions", json=body) as response:
        payload = await response.json()
        assert response.status == 200, payload
        return str(payload["choices"][0]["text"])


async def registered(session: aiohttp.ClientSession, server: VllmServer) -> set[str]:
    async with session.get(f"{server.base_url}/models") as response:
        return {m["id"] for m in (await response.json())["data"] if m.get("parent")}


@pytest.fixture(scope="module")
def references(server: VllmServer, adapter_dirs: dict[str, Path]) -> dict[str, str]:
    """Greedy output of the base model and of each adapter, loaded by hand by path."""
    outputs = {BASE: complete_sync(server, BASE)}
    for name, path in adapter_dirs.items():
        server.load_lora(f"ref-{name}", path)
        outputs[name] = complete_sync(server, f"ref-{name}")
        server.unload_lora(f"ref-{name}")
    assert len(set(outputs.values())) == len(outputs), "adapters must answer differently"
    return outputs


@pytest.fixture
async def session(server: VllmServer) -> AsyncIterator[aiohttp.ClientSession]:
    """A client session, after unloading whatever adapters earlier tests left in vLLM."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as client:
        for name in await registered(client, server):
            await asyncio.to_thread(server.unload_lora, name)
        yield client


@contextlib.asynccontextmanager
async def residency(
    server: VllmServer,
    adapter_dirs: dict[str, Path],
    pinned: frozenset[str] = frozenset(),
    **options: float,
) -> AsyncIterator[tuple[LoraResidency, CacheMetrics]]:
    options.setdefault("reconcile_interval_s", 0)
    specs = tuple(AdapterSpec(n, str(p), pinned=n in pinned) for n, p in adapter_dirs.items())
    metrics = CacheMetrics()
    manager = LoraResidency(
        LoraConfig(2, specs, **options),  # type: ignore[arg-type]
        upstream=server.url,
        metrics=metrics,
    )
    await manager.start()
    try:
        yield manager, metrics
    finally:
        await manager.close()


async def ask(
    manager: LoraResidency, session: aiohttp.ClientSession, server: VllmServer, name: str
) -> str:
    async with manager.acquire(name) as lease:
        return await complete(session, server, lease.served_name)


def ours(names: set[str]) -> set[str]:
    """Client names of the versioned adapters among ``names``."""
    return {parsed[0] for n in names if (parsed := split_versioned(n))}


def all_resident(manager: LoraResidency, names: tuple[str, ...]) -> bool:
    return all(r["state"] == "resident" for r in manager.describe() if r["name"] in names)


def value(metrics: CacheMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def eventually_registered(
    session: aiohttp.ClientSession, server: VllmServer, expected: set[str], limit_s: float
) -> None:
    async with asyncio.timeout(limit_s):
        while ours(await registered(session, server)) != expected:  # noqa: ASYNC110
            await asyncio.sleep(0.2)


async def test_loads_on_demand_evicts_under_pressure_and_answers_with_the_right_adapter(
    server: VllmServer,
    adapter_dirs: dict[str, Path],
    references: dict[str, str],
    session: aiohttp.ClientSession,
) -> None:
    async with residency(server, adapter_dirs) as (manager, metrics):
        assert ours(await registered(session, server)) == set()
        resident_after: list[set[str]] = []
        for name in ("a1", "a1", "a2", "a3", "a1", "a4", "a2", "a2"):
            assert await ask(manager, session, server, name) == references[name], name
            resident_after.append(ours(await registered(session, server)))
        # a1 (3 requests) outvalues every other adapter, so it is never the one evicted.
        assert resident_after == [
            {"a1"},
            {"a1"},
            {"a1", "a2"},
            {"a1", "a3"},
            {"a1", "a3"},
            {"a1", "a4"},
            {"a1", "a2"},
            {"a1", "a2"},
        ]
        assert value(metrics, "sits_cache_hits_total", tier="lora") == 3
        assert value(metrics, "sits_cache_lora_loads_total", outcome="success") == 5
        assert value(metrics, "sits_cache_evictions_total", tier="lora", reason="capacity") == 3
        assert await complete(session, server, BASE) == references[BASE]


@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "alignment-disabled"])
async def test_vllm_reads_weights_only_when_the_sidecar_loads(
    server: VllmServer,
    adapter_dirs: dict[str, Path],
    references: dict[str, str],
    session: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
    aligned: bool,
) -> None:
    """Loading a3 evicts a2 (fewer requests than a1). vLLM's unload keeps a2's weights in
    its worker LRU, where a1 is older than a2: unaligned, the worker drops a1 and a1's
    next request silently rereads it (the second case checks that vLLM still behaves so;
    should a vLLM release free the weights on unload, the alignment can go)."""
    if not aligned:

        async def skip(self: LoraResidency) -> None:
            return None

        monkeypatch.setattr(LoraResidency, "_align_worker_lru", skip)
    async with residency(server, adapter_dirs) as (manager, metrics):
        reads = WeightReads(adapter_dirs)  # after start(), which reads them to digest them
        try:
            for name in ("a1", "a1", "a2", "a3", "a1", "a1"):
                assert await ask(manager, session, server, name) == references[name]
            await asyncio.sleep(0.3)  # let the reader thread drain the last events
            assert reads.counts() == Counter({"a1": 1 if aligned else 2, "a2": 1, "a3": 1})
            assert value(metrics, "sits_cache_lora_refreshes_total") == (1 if aligned else 0)
            assert value(metrics, "sits_cache_hits_total", tier="lora") == 3
        finally:
            reads.close()


async def test_never_evicts_an_adapter_with_a_request_in_flight(
    server: VllmServer,
    adapter_dirs: dict[str, Path],
    references: dict[str, str],
    session: aiohttp.ClientSession,
) -> None:
    async with residency(server, adapter_dirs, slot_wait_s=60) as (manager, metrics):
        for name in ("a2", "a2", "a2", "a1"):
            await ask(manager, session, server, name)
        body = {
            "model": "",
            "prompt": PROMPT,
            "max_tokens": TOKENS,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
        }
        async with manager.acquire("a1") as lease:
            body["model"] = lease.served_name
            async with session.post(f"{server.base_url}/completions", json=body) as stream:
                first = await stream.content.readline()
                assert first.startswith(b"data: ")
                # Pressure while a1's stream is open: a1 (2 requests) is worth less than
                # a2 (3), but in flight: after the eviction patience, a2 must go.
                assert await ask(manager, session, server, "a3") == references["a3"]
                assert ours(await registered(session, server)) == {"a1", "a3"}
                events = (first + await stream.read()).decode().splitlines()
        payloads = [e.removeprefix("data: ") for e in events if e.startswith("data: ")]
        chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
        assert "".join(c["choices"][0]["text"] for c in chunks) == references["a1"]

        async with manager.acquire("a1"), manager.acquire("a3"):
            waiter = asyncio.create_task(ask(manager, session, server, "a4"))
            async with asyncio.timeout(10):
                while value(metrics, "sits_cache_lora_waiting_requests") < 1:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            assert not waiter.done()
            assert ours(await registered(session, server)) == {"a1", "a3"}
        assert await waiter == references["a4"]
        assert len(ours(await registered(session, server)) & {"a1", "a3"}) == 1


async def test_pinned_adapter_stays(
    server: VllmServer,
    adapter_dirs: dict[str, Path],
    references: dict[str, str],
    session: aiohttp.ClientSession,
) -> None:
    async with residency(server, adapter_dirs, pinned=frozenset({"a4"})) as (manager, metrics):
        await eventually_registered(session, server, {"a4"}, limit_s=30)
        for name in ("a1", "a2", "a1", "a3", "a2", "a4"):
            assert await ask(manager, session, server, name) == references[name]
            assert "a4" in ours(await registered(session, server))
        # One slot left for the rest: every other request loads (a4 once, at start).
        assert value(metrics, "sits_cache_lora_loads_total", outcome="success") == 6
        assert value(metrics, "sits_cache_hits_total", tier="lora") == 1
        assert [r["loads"] for r in manager.describe() if r["name"] == "a4"] == [1]


async def test_concurrent_requests_cause_one_load(
    server: VllmServer,
    adapter_dirs: dict[str, Path],
    references: dict[str, str],
    session: aiohttp.ClientSession,
) -> None:
    log = server.log_path
    assert log is not None
    async with residency(server, adapter_dirs) as (manager, metrics):
        served = next(r["served_name"] for r in manager.describe() if r["name"] == "a3")
        line = f"Loaded new LoRA adapter: name '{served}'"
        before = log.read_text(errors="replace").count(line)
        answers = await asyncio.gather(*(ask(manager, session, server, "a3") for _ in range(8)))
        assert answers == [references["a3"]] * 8
        assert value(metrics, "sits_cache_lora_loads_total", outcome="success") == 1
        await asyncio.sleep(0.5)  # vLLM's log line may trail its HTTP answer
        assert log.read_text(errors="replace").count(line) - before == 1


async def test_adapters_come_back_after_vllm_restarts(
    server: VllmServer,
    adapter_dirs: dict[str, Path],
    references: dict[str, str],
    session: aiohttp.ClientSession,
) -> None:
    """Last in the module: restarts the shared server (same port). The keeper notices on
    its own (no ``upstream_restarted()`` call) and loads the pinned and the resident."""
    async with residency(
        server, adapter_dirs, pinned=frozenset({"a4"}), reconcile_interval_s=0.5
    ) as (manager, metrics):
        await eventually_registered(session, server, {"a4"}, limit_s=30)
        assert await ask(manager, session, server, "a2") == references["a2"]
        await asyncio.to_thread(server.restart)
        await eventually_registered(session, server, {"a2", "a4"}, limit_s=60)
        async with asyncio.timeout(10):  # vLLM lists them before the sidecar hears back
            while not all_resident(manager, ("a2", "a4")):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert value(metrics, "sits_cache_lora_reapplied_total") == 2
        assert await ask(manager, session, server, "a2") == references["a2"]
        assert await ask(manager, session, server, "a4") == references["a4"]
        assert value(metrics, "sits_cache_hits_total", tier="lora") == 2
