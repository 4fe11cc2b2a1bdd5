"""SemanticCache bookkeeping with a fake embedder: TTL, eviction, invalidation, metrics,
clusters and representatives, thread safety. Behaviour that depends on meaning is in
test_semantic_minilm.py, with the real model."""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from sits_inference.cache.embedding import Vectors
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.semantic import CacheRequest, SemanticCache, SemanticConfig
from sits_inference.cache.semantic.clusters import OnlineKMeans, Representatives
from sits_inference.cache.semantic.store import ENTRY_OVERHEAD, pack

DIM = 32


class BagOfWords:
    """Deterministic stand-in: sum of a fixed random vector per word, normalised.

    Texts sharing most words are close; this is enough for bookkeeping tests and says
    nothing about meaning. Counts calls, to check that a miss is embedded once."""

    dimension = DIM

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
                out[row] += np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[row] /= max(1e-9, float(np.linalg.norm(out[row])))
        return out


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def request(text: str, **fields: Any) -> CacheRequest:
    body = {"messages": [{"role": "user", "content": text}], "temperature": 0}
    args: dict[str, Any] = {"kind": "chat", "model": "m", "revision": "r1"}
    args.update(fields)
    return CacheRequest(body=body, **args)


def make(clock: Clock | None = None, **config: Any) -> tuple[SemanticCache, CacheMetrics]:
    metrics = CacheMetrics(CollectorRegistry())
    cache = SemanticCache(
        SemanticConfig(**config), metrics=metrics, embedder=BagOfWords(), clock=clock or Clock()
    )
    return cache, metrics


def put(cache: SemanticCache, text: str, payload: bytes = b"answer", **fields: Any) -> None:
    cache.store(cache.admit(request(text, **fields)), payload)


def get(cache: SemanticCache, text: str, **fields: Any) -> bytes | None:
    hit = cache.lookup(cache.admit(request(text, **fields)))
    return hit.payload if hit else None


def sample(metrics: CacheMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_miss_then_exact_hit_then_similar_hit() -> None:
    cache, metrics = make(threshold=0.7)
    assert get(cache, "how do I reset my router") is None
    put(cache, "how do I reset my router", b"unplug it")
    assert get(cache, "How do I reset my router?") == b"unplug it"  # exact after normalising
    assert get(cache, "how do I reset my router please") == b"unplug it"  # similar words
    assert sample(metrics, "sits_cache_hits_total", tier="semantic") == 2
    assert sample(metrics, "sits_cache_misses_total", tier="semantic") == 1
    assert sample(metrics, "sits_cache_lookup_duration_seconds_count", tier="semantic") == 3


def test_a_miss_is_embedded_once_for_lookup_and_store() -> None:
    cache, _ = make()
    embedder = cache._embedder
    assert isinstance(embedder, BagOfWords)
    put(cache, "seed entry so the partition exists")
    before = embedder.calls
    admission = cache.admit(request("a brand new question"))
    assert cache.lookup(admission) is None
    cache.store(admission, b"x")
    assert embedder.calls == before + 1


def test_partitions_never_share_answers() -> None:
    cache, _ = make()
    put(cache, "what is the capital of France", b"base", model="base")
    assert get(cache, "what is the capital of France", model="adapter") is None
    assert get(cache, "what is the capital of France", revision="r2") is None
    assert get(cache, "what is the capital of France", model="base") == b"base"


def test_ttl_counts_from_generation_and_hits_do_not_extend_it() -> None:
    clock = Clock()
    cache, metrics = make(clock, ttl_seconds=60)
    put(cache, "question one")
    clock.now += 59
    assert get(cache, "question one") == b"answer"
    hit = cache.lookup(cache.admit(request("question one")))
    assert hit is not None
    assert hit.age_seconds == pytest.approx(59)
    clock.now += 1
    assert get(cache, "question one") is None
    assert cache.stats().entries == 0
    assert sample(metrics, "sits_cache_semantic_expired_total") == 1
    assert sample(metrics, "sits_cache_entries", tier="semantic") == 0
    assert sample(metrics, "sits_cache_evictions_total", tier="semantic", reason="max_entries") == 0


def test_entry_cap_evicts_the_least_asked_first() -> None:
    cache, metrics = make(max_entries=3)
    for text in ("question aaaa", "question bbbb", "question cccc"):  # same sizes
        put(cache, text)
    for _ in range(3):  # a and c become popular
        assert get(cache, "question aaaa")
        assert get(cache, "question cccc")
    put(cache, "question dddd")
    assert get(cache, "question bbbb") is None  # never asked: the first to go
    assert get(cache, "question aaaa") == b"answer"
    assert get(cache, "question cccc") == b"answer"
    assert get(cache, "question dddd") == b"answer"
    assert cache.stats().entries == 3
    assert sample(metrics, "sits_cache_evictions_total", tier="semantic", reason="max_entries") == 1


def noise(length: int, seed: int = 0) -> bytes:
    """Bytes zlib cannot shrink: entries of exactly known stored size."""
    return random.Random(seed).randbytes(length)


def test_byte_cap_and_exact_accounting() -> None:
    size = ENTRY_OVERHEAD + 1000 + 2 * len("entry number 0")
    cache, metrics = make(max_bytes=3 * size)
    for n in range(5):
        put(cache, f"entry number {n}", noise(1000, n))
        stats = cache.stats()
        assert stats.bytes <= 3 * size
        assert sample(metrics, "sits_cache_bytes", tier="semantic") == stats.bytes
        assert sample(metrics, "sits_cache_entries", tier="semantic") == stats.entries
    assert cache.stats().entries == 3
    assert sample(metrics, "sits_cache_evictions_total", tier="semantic", reason="max_bytes") == 2
    put(cache, "too big for the whole cache", noise(4 * size))
    assert get(cache, "too big for the whole cache") is None
    assert cache.stats().entries == 3


ANSWER = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Open the settings, choose the account tab and press the reset "
                    "button; the reset link is sent to the address on the account. " * 6,
                },
                "finish_reason": "stop",
            }
        ],
    }
).encode()


@pytest.mark.parametrize(
    ("payload", "compressed"),
    [
        (ANSWER, True),  # text in a JSON envelope: kept compressed
        (noise(2000), False),  # incompressible: kept as it is
        (b'{"choices":[]}', False),  # too small to be worth a zlib stream
        (b"", False),
    ],
)
def test_payloads_are_kept_compressed_when_that_saves_space(
    payload: bytes, compressed: bool
) -> None:
    stored, was_compressed = pack(payload)
    assert was_compressed is compressed
    if compressed:
        assert len(stored) * 10 <= len(payload) * 9
    else:
        assert stored == payload
    cache, _ = make()
    put(cache, "how do I reset my password", payload)
    assert get(cache, "how do I reset my password") == payload  # byte for byte
    expected = ENTRY_OVERHEAD + len(stored) + 2 * len("how do I reset my password")
    assert cache.stats().bytes == expected


def test_storing_the_same_question_again_replaces_it() -> None:
    cache, _ = make()
    put(cache, "same question", b"old")
    put(cache, "Same question?", b"new")
    assert cache.stats().entries == 1
    assert get(cache, "same question") == b"new"


@pytest.mark.parametrize(
    ("filters", "removed"),
    [
        ({}, 4),
        ({"model": "a"}, 2),
        ({"revision": "r1"}, 2),
        ({"adapter_digest": "d1"}, 1),
        ({"model": "a", "revision": "r2"}, 1),
        ({"model": "nobody"}, 0),
    ],
)
def test_invalidate_by_filters(filters: dict[str, str], removed: int) -> None:
    cache, metrics = make()
    put(cache, "one", model="a", revision="r1", adapter_digest="d1")
    put(cache, "two", model="a", revision="r2")
    put(cache, "three", model="b", revision="r1")
    put(cache, "four", model="b", revision="r2")
    assert cache.invalidate(**filters) == removed
    assert cache.stats().entries == 4 - removed
    assert sample(metrics, "sits_cache_semantic_invalidated_total") == removed
    assert sample(metrics, "sits_cache_entries", tier="semantic") == 4 - removed


def test_uncacheable_admissions_are_ignored() -> None:
    cache, metrics = make()
    admission = cache.admit(
        CacheRequest(kind="chat", body={"messages": [], "n": 2}, model="m", revision="r")
    )
    assert not admission.cacheable
    cache.store(admission, b"x")
    assert cache.lookup(admission) is None
    assert cache.stats().entries == 0
    assert sample(metrics, "sits_cache_misses_total", tier="semantic") == 0


def test_two_caches_can_share_one_registry() -> None:
    metrics = CacheMetrics(CollectorRegistry())
    for _ in range(2):
        SemanticCache(SemanticConfig(), metrics=metrics, embedder=BagOfWords())


def test_kmeans_spawns_then_moves_centroids_by_minibatch() -> None:
    km = OnlineKMeans(2, max_clusters=2, batch_size=2, spawn_below=0.5)
    east, north = np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)
    assert km.observe(east) == 0
    assert km.observe(north) == 1  # far from the first centroid: a new cluster
    assert km.k == 2
    tilted = np.array([0.8, 0.6], np.float32)
    assert km.observe(tilted) == 0  # buffered, no move yet
    np.testing.assert_allclose(km.centroids[0], east)
    km.observe(tilted)  # the batch is full: centroid 0 moves toward (0.8, 0.6)
    assert km.centroids[0][1] > 0.1
    assert np.linalg.norm(km.centroids[0]) == pytest.approx(1.0, abs=1e-5)
    assert km.counts[0] == 3  # learning rate 1/count decays


def test_representatives_keep_the_top_three_by_hits() -> None:
    hits = {1: 0, 2: 5, 3: 1, 4: 9, 5: 2}
    reps = Representatives(lambda e: hits[e])
    for entry in hits:
        reps.add(0, entry)
    assert reps.top[0] == [4, 2, 5]
    hits[3] = 20
    reps.hit(0, 3)
    assert reps.top[0] == [3, 4, 2]
    reps.remove(0, 4)
    assert reps.top[0] == [3, 2, 5]
    for entry in (1, 2, 3, 5):
        reps.remove(0, entry)
    assert reps.clusters() == 0
    assert reps.keys() == 0


def test_stats_and_representatives_summarise_the_key_space() -> None:
    cache, _ = make(threshold=0.99)
    for n in range(30):
        put(cache, f"question about topic {n % 3} variant {n}")
    for _ in range(4):
        assert get(cache, "question about topic 1 variant 7") is not None
    stats = cache.stats()
    assert stats.entries == 30
    assert stats.partitions == 1
    assert 1 <= stats.clusters <= 30
    assert stats.representative_keys <= 3 * stats.clusters
    listed = cache.representatives(limit=50)
    assert sum(c["entries"] for c in listed) == 30
    popular = [k for c in listed for k in c["keys"] if k["hits"] == 4]
    assert [k["text"] for k in popular] == ["question about topic 1 variant 7"]


def test_concurrent_store_lookup_invalidate_keep_the_books_straight() -> None:
    cache, metrics = make(max_entries=200)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(150):
                text = f"worker {n} question {i % 60}"
                if get(cache, text) is None:
                    put(cache, text, f"{n}:{i}".encode())
                if i % 50 == 49:
                    cache.invalidate(model="m")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    stats = cache.stats()
    assert stats.entries <= 200
    assert sample(metrics, "sits_cache_entries", tier="semantic") == stats.entries
    assert sample(metrics, "sits_cache_bytes", tier="semantic") == stats.bytes
    assert stats.bytes == sum(e.nbytes for e in cache._store.entries.values())
    assert cache._index.ntotal == stats.entries
