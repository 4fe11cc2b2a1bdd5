"""L1 with the real all-MiniLM-L6-v2 (loaded once for the module, offline): paraphrases
hit, near misses that score above the threshold are refused by the guard and counted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from sits_inference.cache.embedding import (
    DIMENSION,
    Embedder,
    check_layout,
    default_embedder,
    model_path,
)
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


REFERENCE_TEXTS = [
    "How do I reset my password?",
    "convert celsius to fahrenheit",
    "",
    "Überweisung stornieren: wie geht das? 🚀",
    "word " * 400,  # beyond the model's 256-token window: truncated the same way
    "What were the best laptops of 2023, and which ones had the longest battery life?",
]


def test_vectors_match_the_sentence_transformers_reference(embedder: Embedder) -> None:
    """The embedder re-implements the model's pipeline (encoder, mean pooling, normalise);
    sentence-transformers runs the model as published. Same texts, batched and one by one,
    must give the same vectors, or cached similarities would drift from the benchmark's."""
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(model_path()), device="cpu", local_files_only=True)
    expected = reference.encode(REFERENCE_TEXTS, normalize_embeddings=True)
    np.testing.assert_allclose(embedder.embed(REFERENCE_TEXTS), expected, atol=1e-5)
    singles = np.concatenate([embedder.embed([text]) for text in REFERENCE_TEXTS])
    np.testing.assert_allclose(singles, expected, atol=1e-5)


def test_a_model_with_another_pooling_is_refused(tmp_path: Path) -> None:
    shutil.copytree(model_path(), tmp_path / "model")
    pooling = tmp_path / "model" / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="mean Pooling"):
        check_layout(tmp_path / "model")
    check_layout(model_path())  # the shipped model passes


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
