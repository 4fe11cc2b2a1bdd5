"""LoraResidency's edge cases against a fake of vLLM's runtime-LoRA endpoints.

The fake (a real aiohttp server on 127.0.0.1) exists for what real vLLM cannot do on
demand: fail or stall a load, forget its adapters instantly, count touches. Everything
else about vLLM is tested against the real server in tests/integration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from sits_inference.cache.lora import (
    AdapterSpec,
    AdapterUnavailable,
    LoraConfig,
    LoraResidency,
)
from sits_inference.cache.lora.spec import directory_digest, versioned_name
from sits_inference.cache.metrics import CacheMetrics


@dataclass
class FakeVllm:
    """vLLM's load/unload/models/completions endpoints, with programmable trouble."""

    registered: dict[str, str] = field(default_factory=dict)
    loads: list[str] = field(default_factory=list)
    unloads: list[str] = field(default_factory=list)
    touches: list[str] = field(default_factory=list)
    load_delay: float = 0.0
    unload_delay: float = 0.0
    failures: dict[str, tuple[int, str]] = field(default_factory=dict)
    on_load: Callable[[str], None] | None = None
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/load_lora_adapter", self._load)
        app.router.add_post("/v1/unload_lora_adapter", self._unload)
        app.router.add_post("/v1/completions", self._complete)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def restart(self) -> None:
        """What a vLLM restart looks like from outside: every adapter gone."""
        self.registered.clear()

    async def _load(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = body["lora_name"]
        self.loads.append(name)
        if self.on_load is not None:
            self.on_load(name)
        await asyncio.sleep(self.load_delay)
        for prefix, (status, message) in self.failures.items():
            if name.startswith(prefix):
                return error(status, message)
        if name in self.registered:
            return error(400, f"The lora adapter '{name}' has already been loaded.")
        self.registered[name] = body["lora_path"]
        return web.Response(text="Success")

    async def _unload(self, request: web.Request) -> web.Response:
        name = (await request.json())["lora_name"]
        self.unloads.append(name)
        await asyncio.sleep(self.unload_delay)
        if self.registered.pop(name, None) is None:
            return error(404, f"The lora adapter '{name}' cannot be found.")
        return web.Response(text="Success")

    async def _complete(self, request: web.Request) -> web.Response:
        name = (await request.json())["model"]
        if name not in self.registered:
            return error(404, f"The model `{name}` does not exist.")
        self.touches.append(name)
        return web.json_response({"choices": [{"text": "x"}]})

    async def _models(self, request: web.Request) -> web.Response:
        cards = [{"id": "base", "parent": None}]
        cards += [{"id": name, "parent": "base"} for name in self.registered]
        return web.json_response({"object": "list", "data": cards})


def error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "Error", "code": status}}
    return web.json_response(body, status=status)


class Clock:
    """A manual clock: backoff and policy decisions without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def fake() -> AsyncIterator[FakeVllm]:
    server = FakeVllm()
    await server.start()
    yield server
    await server.stop()


def make_adapter(root: Path, name: str) -> AdapterSpec:
    path = root / name
    path.mkdir()
    (path / "adapter_config.json").write_text(json.dumps({"r": 8, "name": name}))
    (path / "adapter_model.safetensors").write_bytes(name.encode() * 64)
    return AdapterSpec(name, str(path))


def served(spec: AdapterSpec) -> str:
    return versioned_name(spec.name, directory_digest(Path(spec.source)))


@contextlib.asynccontextmanager
async def residency(
    upstream: str,
    adapters: tuple[AdapterSpec, ...],
    max_resident: int = 2,
    clock: Callable[[], float] | None = None,
    **options: float,
) -> AsyncIterator[tuple[LoraResidency, CacheMetrics]]:
    options.setdefault("reconcile_interval_s", 0)
    config = LoraConfig(max_resident, adapters, **options)  # type: ignore[arg-type]
    metrics = CacheMetrics()
    kwargs = {"clock": clock} if clock else {}
    manager = LoraResidency(config, upstream=upstream, metrics=metrics, **kwargs)
    await manager.start()
    try:
        yield manager, metrics
    finally:
        await manager.close()


def sample(metrics: CacheMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def use(manager: LoraResidency, model: str) -> str:
    async with manager.acquire(model) as lease:
        return lease.served_name


async def eventually(check: Callable[[], bool], limit_s: float = 5.0) -> None:
    """Poll a condition that background tasks make true (bounded)."""
    async with asyncio.timeout(limit_s):
        while not check():  # noqa: ASYNC110 (the state lives in the code under test)
            await asyncio.sleep(0.01)


async def test_concurrent_requests_for_a_missing_adapter_load_it_once(
    fake: FakeVllm, tmp_path: Path
) -> None:
    spec = make_adapter(tmp_path, "a")
    waiting_at_load: list[float] = []
    fake.load_delay = 0.3
    async with residency(fake.url, (spec,)) as (manager, metrics):
        fake.on_load = lambda _: waiting_at_load.append(
            sample(metrics, "sits_cache_lora_waiting_requests")
        )
        names = await asyncio.gather(*(use(manager, "a") for _ in range(10)))
        assert fake.loads == [served(spec)]
        assert set(names) == {served(spec)}
        assert waiting_at_load == [10.0]
        assert sample(metrics, "sits_cache_lora_waiting_requests") == 0
        assert sample(metrics, "sits_cache_lora_loads_total", outcome="success") == 1
        assert sample(metrics, "sits_cache_misses_total", tier="lora") == 10
        assert await use(manager, "a") == served(spec)
        assert sample(metrics, "sits_cache_hits_total", tier="lora") == 1
        assert fake.loads == [served(spec)]
        assert sample(metrics, "sits_cache_lora_resident_adapters") == 1
        assert sample(metrics, "sits_cache_entries", tier="lora") == 1
        size = sum(f.stat().st_size for f in Path(spec.source).iterdir())  # noqa: ASYNC240
        assert sample(metrics, "sits_cache_bytes", tier="lora") == size


async def test_failed_load_reaches_every_waiter_then_backs_off(
    fake: FakeVllm, tmp_path: Path
) -> None:
    spec = make_adapter(tmp_path, "a")
    clock = Clock()
    fake.failures["a@"] = (404, "No adapter found for /x")
    async with residency(fake.url, (spec,), clock=clock, backoff_initial_s=1.0) as (
        manager,
        metrics,
    ):
        results = await asyncio.gather(
            *(use(manager, "a") for _ in range(5)), return_exceptions=True
        )
        assert all(isinstance(r, AdapterUnavailable) for r in results)
        first = results[0]
        assert isinstance(first, AdapterUnavailable)
        assert first.status == 502
        assert "No adapter found for /x" in first.message
        assert len(fake.loads) == 1

        with pytest.raises(AdapterUnavailable, match=r"next load attempt in 1\.0 s") as info:
            await use(manager, "a")
        assert info.value.status == 502
        assert len(fake.loads) == 1  # no tight retry loop

        clock.now += 1.01
        with pytest.raises(AdapterUnavailable):
            await use(manager, "a")
        assert len(fake.loads) == 2
        assert manager.describe()[0]["retry_in_s"] == 2.0  # doubled

        fake.failures.clear()
        clock.now += 2.01
        assert await use(manager, "a") == served(spec)
        assert manager.describe()[0]["last_error"] is None
        assert sample(metrics, "sits_cache_lora_loads_total", outcome="rejected") == 2
        assert sample(metrics, "sits_cache_lora_loads_total", outcome="success") == 1


async def test_slow_load_times_out_with_504(fake: FakeVllm, tmp_path: Path) -> None:
    spec = make_adapter(tmp_path, "a")
    fake.load_delay = 2.0
    async with residency(fake.url, (spec,), load_timeout_s=0.2) as (manager, metrics):
        with pytest.raises(AdapterUnavailable, match="load took over") as info:
            await use(manager, "a")
        assert info.value.status == 504
        assert sample(metrics, "sits_cache_lora_loads_total", outcome="timeout") == 1


async def test_unreachable_vllm_is_503_without_backoff(tmp_path: Path) -> None:
    spec = make_adapter(tmp_path, "a")
    closed = FakeVllm()
    await closed.start()
    await closed.stop()  # nothing listens on that port any more
    async with residency(closed.url, (spec,)) as (manager, metrics):
        for _ in range(2):
            with pytest.raises(AdapterUnavailable, match="unreachable") as info:
                await use(manager, "a")
            assert info.value.status == 503
        assert sample(metrics, "sits_cache_lora_loads_total", outcome="unreachable") == 2
        assert manager.describe()[0]["retry_in_s"] == 0


async def test_waits_for_a_slot_rather_than_evicting_an_adapter_in_use(
    fake: FakeVllm, tmp_path: Path
) -> None:
    a, b = make_adapter(tmp_path, "a"), make_adapter(tmp_path, "b")
    async with residency(fake.url, (a, b), max_resident=1, slot_wait_s=10) as (manager, metrics):
        async with manager.acquire("a"):
            waiter = asyncio.create_task(use(manager, "b"))
            await eventually(lambda: sample(metrics, "sits_cache_lora_waiting_requests") == 1)
            await asyncio.sleep(0.2)
            assert not waiter.done()
            assert fake.unloads == []
            assert set(fake.registered) == {served(a)}
        assert await waiter == served(b)
        assert fake.unloads == [served(a)]
        assert set(fake.registered) == {served(b)}
        assert sample(metrics, "sits_cache_evictions_total", tier="lora", reason="capacity") == 1


async def test_slot_wait_is_bounded(fake: FakeVllm, tmp_path: Path) -> None:
    a, b = make_adapter(tmp_path, "a"), make_adapter(tmp_path, "b")
    async with residency(fake.url, (a, b), max_resident=1, slot_wait_s=0.2) as (manager, _):
        async with manager.acquire("a"):
            with pytest.raises(AdapterUnavailable, match="all 1 adapter slots") as info:
                await use(manager, "b")
            assert info.value.status == 503
        assert await use(manager, "b") == served(b)  # a slot, once free, is used


async def test_request_for_an_adapter_being_unloaded_waits_for_the_unload(
    fake: FakeVllm, tmp_path: Path
) -> None:
    a, b = make_adapter(tmp_path, "a"), make_adapter(tmp_path, "b")
    async with residency(fake.url, (a, b), max_resident=1, slot_wait_s=10) as (manager, _):
        await use(manager, "a")
        fake.unload_delay = 0.3
        evicting = asyncio.create_task(use(manager, "b"))  # unloads a (slowly)
        await eventually(lambda: fake.unloads == [served(a)])
        async with manager.acquire("a") as lease:
            assert lease.served_name in fake.registered  # vLLM knows the name it is given
        assert await evicting == served(b)
        assert fake.loads == [served(a), served(b), served(a)]
        assert set(fake.registered) == {served(a)}


@pytest.mark.parametrize(("patience", "evicted"), [(10.0, "b"), (0.1, "a")])
async def test_a_load_waits_a_while_for_a_less_valuable_busy_adapter(
    fake: FakeVllm, tmp_path: Path, patience: float, evicted: str
) -> None:
    """b is worth less than a but has a request in flight: within the patience, c's load
    waits for b rather than evict a; past it, a goes (never b, which is in flight)."""
    specs = {n: make_adapter(tmp_path, n) for n in "abc"}
    async with residency(fake.url, tuple(specs.values()), eviction_patience_s=patience) as (
        manager,
        _,
    ):
        for name in "aaa":
            await use(manager, name)
        async with manager.acquire("b"):
            loading = asyncio.create_task(use(manager, "c"))
            await asyncio.sleep(0.5)
            assert loading.done() == (evicted == "a")
        assert await loading == served(specs["c"])
        assert fake.unloads == [served(specs[evicted])]


async def test_least_valuable_adapter_is_evicted(fake: FakeVllm, tmp_path: Path) -> None:
    clock = Clock()
    a, b, c = (make_adapter(tmp_path, n) for n in "abc")
    async with residency(fake.url, (a, b, c), clock=clock) as (manager, _):
        for name in "aaab":
            clock.now += 1
            await use(manager, name)
        clock.now += 1
        await use(manager, "c")  # b is the most recent of a and b, but the least requested
        assert fake.unloads == [served(b)]
        assert set(fake.registered) == {served(a), served(c)}


async def test_pinned_adapter_loads_at_start_and_stays(fake: FakeVllm, tmp_path: Path) -> None:
    pinned = AdapterSpec("p", make_adapter(tmp_path, "p").source, pinned=True)
    others = tuple(make_adapter(tmp_path, n) for n in "abc")
    async with residency(fake.url, (pinned, *others)) as (manager, _):
        await eventually(lambda: served(pinned) in fake.registered)
        for name in "abcabc":
            await use(manager, name)
        assert served(pinned) in fake.registered
        assert served(pinned) not in fake.unloads
        assert len(fake.unloads) == 5
        assert fake.loads.count(served(pinned)) == 1


@pytest.mark.parametrize("self_detected", [False, True])
async def test_adapters_come_back_after_a_vllm_restart(
    fake: FakeVllm, tmp_path: Path, self_detected: bool
) -> None:
    pinned = AdapterSpec("p", make_adapter(tmp_path, "p").source, pinned=True)
    a, b = make_adapter(tmp_path, "a"), make_adapter(tmp_path, "b")
    interval = 0.05 if self_detected else 0
    async with residency(
        fake.url, (pinned, a, b), max_resident=3, reconcile_interval_s=interval
    ) as (manager, metrics):
        await eventually(lambda: served(pinned) in fake.registered)
        await use(manager, "a")
        expected = {served(pinned), served(a)}
        assert set(fake.registered) == expected
        fake.restart()
        if not self_detected:
            await manager.upstream_restarted()
        await eventually(
            lambda: (
                set(fake.registered) == expected
                and {r["state"] for r in manager.describe()[:2]} == {"resident"}
            )
        )
        assert sample(metrics, "sits_cache_lora_reapplied_total") == 2
        assert await use(manager, "a") == served(a)
        assert fake.loads.count(served(a)) == 2
        assert sample(metrics, "sits_cache_hits_total", tier="lora") == 1


async def test_adopts_its_adapters_and_drops_stale_versions(fake: FakeVllm, tmp_path: Path) -> None:
    a = make_adapter(tmp_path, "a")
    fake.registered = {served(a): a.source, "a@000000000000": "/old", "foreign": "/x"}
    async with residency(fake.url, (a,)) as (manager, metrics):
        await eventually(lambda: "a@000000000000" not in fake.registered)
        assert await use(manager, "a") == served(a)
        assert fake.loads == []
        assert set(fake.registered) == {served(a), "foreign"}
        assert sample(metrics, "sits_cache_evictions_total", tier="lora", reason="stale_version")


async def test_digest_mismatch_never_loads(fake: FakeVllm, tmp_path: Path) -> None:
    source = make_adapter(tmp_path, "a").source
    spec = AdapterSpec("a", source, digest="sha256:" + "0" * 64)
    async with residency(fake.url, (spec,)) as (manager, _):
        with pytest.raises(AdapterUnavailable, match="the configuration expects") as info:
            await use(manager, "a")
        assert info.value.status == 502
        assert fake.loads == []


async def test_names(fake: FakeVllm, tmp_path: Path) -> None:
    a = make_adapter(tmp_path, "a")
    async with residency(fake.url, (a,)) as (manager, _):
        assert manager.is_adapter("a")
        assert manager.is_adapter(served(a))
        assert not manager.is_adapter("base")
        assert manager.client_name(served(a)) == "a"
        assert manager.client_name("a@000000000000") is None
        identity = manager.identity("a")
        assert identity is not None
        assert identity.served_name == served(a)
        assert identity.digest == directory_digest(Path(a.source))
        assert manager.identity("base") is None
        assert await use(manager, served(a)) == served(a)
        with pytest.raises(AdapterUnavailable) as info:
            manager.acquire("base")
        assert info.value.status == 404
        (row,) = manager.describe()
        assert row["state"] == "resident"
        assert row["served_name"] == served(a)
        assert row["loads"] == 1


async def test_worker_lru_is_kept_in_line_with_the_sidecar(fake: FakeVllm, tmp_path: Path) -> None:
    """vLLM keeps unloaded weights in its worker LRU; before a load that makes the worker
    evict, resident adapters idle since before the unloaded one get a one-token touch."""
    clock = Clock()
    specs = tuple(make_adapter(tmp_path, n) for n in "abcd")
    async with residency(fake.url, specs, clock=clock) as (manager, metrics):
        touched: list[list[str]] = []
        for name in "aabcd":
            clock.now += 1
            before = len(fake.touches)
            await use(manager, name)
            touched.append(fake.touches[before:])
        # c evicts b (1 request; a has 2), but a (last used t=2) is older than b (t=3) in
        # the worker's LRU: touched. d evicts c (used at t=4, as was a's touch: ties are
        # touched, as the order within one tick is unknown).
        assert touched == [[], [], [], [served(specs[0])], [served(specs[0])]]
        assert sample(metrics, "sits_cache_lora_refreshes_total") == 2
        assert fake.unloads == [served(specs[1]), served(specs[2])]


async def test_no_touch_while_the_worker_has_room(fake: FakeVllm, tmp_path: Path) -> None:
    clock = Clock()
    specs = tuple(make_adapter(tmp_path, n) for n in "abc")
    async with residency(fake.url, specs, clock=clock, upstream_cpu_loras=3) as (manager, _):
        for name in "aabc":
            clock.now += 1
            await use(manager, name)
        assert fake.touches == []  # worker holds a, b (unloaded) and c: no eviction yet
