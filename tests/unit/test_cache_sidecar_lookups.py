"""L1 lookups as the sidecar makes them (``cache/lookup.py``): the exact-match probe on the
event loop, and concurrent semantic searches sharing one embedding pass. A fake embedder
that can be held shows what is embedded together; no real model, no sockets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import pytest
from prometheus_client import CollectorRegistry

from sits_inference.cache.embedding import Vectors
from sits_inference.cache.lookup import Lookups
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.semantic import Admission, Hit, Probe, SemanticCache, SemanticConfig
from tests.unit.test_semantic_cache import DIM, BagOfWords, request

pytestmark = pytest.mark.timeout(30)
T = TypeVar("T")


class HeldEmbedder(BagOfWords):
    """BagOfWords that records each pass's texts and can be held inside a pass."""

    dimension = DIM

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.open = threading.Event()
        self.open.set()
        self.inside = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        self.inside.set()
        assert self.open.wait(10), "the test never let the embedding finish"
        return super().embed(texts)


def make() -> tuple[SemanticCache, HeldEmbedder, CacheMetrics]:
    embedder = HeldEmbedder()
    metrics = CacheMetrics(CollectorRegistry())
    cache = SemanticCache(SemanticConfig(threshold=0.8), metrics=metrics, embedder=embedder)
    return cache, embedder, metrics


async def in_thread(fn: Callable[[list[Admission]], T], admissions: list[Admission]) -> T:
    return await asyncio.to_thread(fn, admissions)


def counted(metrics: CacheMetrics, which: str) -> float:
    value = metrics.registry.get_sample_value(f"sits_cache_{which}_total", {"tier": "semantic"})
    return value or 0.0


async def test_the_probe_decides_exact_hits_and_certain_misses_without_embedding() -> None:
    cache, embedder, metrics = make()
    lookups = Lookups(cache, in_thread)
    first = cache.admit(request("How do tides work?"))
    probe = await lookups.probe(first)
    assert probe == Probe(None, search=False), "an empty partition: a certain miss"
    cache.store(first, b"moon")
    embedder.batches.clear()
    probe = await lookups.probe(cache.admit(request("how do TIDES work?")))
    assert probe is not None
    assert probe.hit is not None
    assert probe.hit.payload == b"moon"
    probe = await lookups.probe(cache.admit(request("Why is the sky blue?")))
    assert probe == Probe(None, search=True)
    assert embedder.batches == [], "the probe never embeds"
    # Counted once per decided lookup: the hit and the certain miss; not the undecided one.
    assert (counted(metrics, "hits"), counted(metrics, "misses")) == (1, 1)


async def test_the_probe_does_not_wait_for_a_busy_cache() -> None:
    cache, _, _ = make()
    admission = cache.admit(request("How do tides work?"))
    held, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with cache._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        assert held.wait(10)
        assert await Lookups(cache, in_thread).probe(admission) is None
    finally:
        release.set()
        holder.join(10)
    assert await Lookups(cache, in_thread).probe(admission) is not None


async def held_search(
    cache: SemanticCache, embedder: HeldEmbedder, lookups: Lookups, text: str
) -> asyncio.Task[Hit | None]:
    """A stored question, then a search of ``text`` held inside its embedding pass."""
    cache.store(cache.admit(request("How do tides work?")), b"moon")
    embedder.batches.clear()
    embedder.open.clear()
    embedder.inside.clear()
    search = asyncio.create_task(lookups.search(cache.admit(request(text))))
    assert await asyncio.to_thread(embedder.inside.wait, 10)  # the pass is running
    return search


async def test_concurrent_searches_share_one_embedding_pass() -> None:
    cache, embedder, metrics = make()
    lookups = Lookups(cache, in_thread)
    first = await held_search(cache, embedder, lookups, "How do the tides work?")
    texts = [f"Question number {n} about volcanoes?" for n in range(5)]
    others = [asyncio.create_task(lookups.search(cache.admit(request(t)))) for t in texts]
    await asyncio.sleep(0)  # let them queue behind the running pass
    embedder.open.set()
    assert (await first) is not None, "a paraphrase of a stored question: a hit"
    assert await asyncio.gather(*others) == [None] * 5
    assert embedder.batches == [["How do the tides work?"], texts]
    assert (counted(metrics, "hits"), counted(metrics, "misses")) == (1, 5)
    await lookups.close()


async def test_a_search_whose_client_left_does_not_disturb_the_others() -> None:
    cache, embedder, _ = make()
    lookups = Lookups(cache, in_thread)
    running = await held_search(cache, embedder, lookups, "Why is ice slippery?")
    left = asyncio.create_task(lookups.search(cache.admit(request("Why do cats purr?"))))
    stays = asyncio.create_task(lookups.search(cache.admit(request("How do the tides work?"))))
    await asyncio.sleep(0)
    left.cancel()
    embedder.open.set()
    assert await running is None
    assert (await stays) is not None
    assert left.cancelled()
    assert embedder.batches[-1] == ["How do the tides work?"], "the cancelled one not embedded"


async def test_an_embedder_failure_is_a_miss_for_each_search() -> None:
    cache, embedder, _ = make()
    cache.store(cache.admit(request("How do tides work?")), b"moon")

    def broken(texts: Sequence[str]) -> Vectors:
        raise RuntimeError("out of memory")

    embedder.embed = broken  # type: ignore[method-assign]
    lookups = Lookups(cache, in_thread)
    found = await asyncio.gather(
        lookups.search(cache.admit(request("How do the tides work?"))),
        lookups.search(cache.admit(request("Why is ice slippery?"))),
    )
    assert list(found) == [None, None]
