"""L1 with the real all-MiniLM-L6-v2 (loaded once for the module, offline): paraphrases
hit, near misses that score above the threshold are refused by the guard and counted."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from sits_inference.cache.embedding import DIMENSION, Embedder, default_embedder
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.semantic import CacheRequest, SemanticCache, SemanticConfig


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return default_embedder()


def request(text: str, model: str = "m") -> CacheRequest:
    body = {"messages": [{"role": "user", "content": text}], "temperature": 0}
    return CacheRequest(kind="chat", body=body, model=model, revision="r1")


def test_embeddings_are_unit_rows_of_384(embedder: Embedder) -> None:
    vectors = embedder.embed(["hello world", "what is the capital of France?"])
    assert vectors.shape == (2, DIMENSION)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert default_embedder() is embedder  # one model per process


STORED = [
    "How do I reset my password?",
    "Convert Celsius to Fahrenheit",
    "How do I enable two-factor authentication on Gmail?",
    "Who won the World Cup in 2018?",
    "What were the best laptops of 2023?",
    "How long should I boil an egg?",
]
PARAPHRASES = [
    ("I forgot my password, how can I reset it?", "How do I reset my password?"),
    (
        "How can I turn on two-factor authentication for my Gmail account?",
        "How do I enable two-factor authentication on Gmail?",
    ),
    ("Which team won the 2018 World Cup?", "Who won the World Cup in 2018?"),
    ("What is the boiling time for an egg?", "How long should I boil an egg?"),
]
NEAR_MISSES = [
    ("Convert Fahrenheit to Celsius", "order"),
    ("How do I disable two-factor authentication on Gmail?", "antonym"),
    ("What were the best laptops of 2024?", "year"),
]


@pytest.fixture(scope="module")
def filled(embedder: Embedder) -> tuple[SemanticCache, CacheMetrics]:
    metrics = CacheMetrics(CollectorRegistry())
    cache = SemanticCache(SemanticConfig(), metrics=metrics, embedder=embedder)
    for text in STORED:
        cache.store(cache.admit(request(text)), text.encode())
    return cache, metrics


@pytest.mark.parametrize(("query", "stored"), PARAPHRASES)
def test_paraphrases_hit(
    filled: tuple[SemanticCache, CacheMetrics], query: str, stored: str
) -> None:
    cache, _ = filled
    hit = cache.lookup(cache.admit(request(query)))
    assert hit is not None
    assert hit.payload == stored.encode()
    assert hit.matched_text == stored
    assert cache.config.threshold <= hit.similarity < 1.0


@pytest.mark.parametrize(("query", "reason"), NEAR_MISSES)
def test_near_misses_above_the_threshold_are_refused_and_counted(
    filled: tuple[SemanticCache, CacheMetrics], query: str, reason: str
) -> None:
    cache, metrics = filled
    admission = cache.admit(request(query))
    nearest_text, similarity = cache.candidates(admission)[0]
    assert similarity >= cache.config.threshold  # the threshold alone would have hit
    labels = {"reason": reason}
    before = metrics.registry.get_sample_value("sits_cache_near_miss_rejections_total", labels)
    assert cache.lookup(admission) is None
    after = metrics.registry.get_sample_value("sits_cache_near_miss_rejections_total", labels)
    assert after == (before or 0) + 1
    assert nearest_text in STORED


def test_unrelated_questions_miss_below_the_threshold(
    filled: tuple[SemanticCache, CacheMetrics],
) -> None:
    cache, _ = filled
    admission = cache.admit(request("How long should I boil a potato?"))
    assert cache.candidates(admission)[0][1] < cache.config.threshold
    assert cache.lookup(admission) is None


def test_another_model_does_not_see_the_entry(
    filled: tuple[SemanticCache, CacheMetrics],
) -> None:
    cache, _ = filled
    assert cache.lookup(cache.admit(request("How do I reset my password?", "adapter"))) is None
