"""POST /v1/retrieve served by VectorService's routes on 127.0.0.1: errors, a missing
index, hot-list preloading across a restart, and HNSW warm-up, seen through the metrics."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.vector import (
    BuildOptions,
    Document,
    VectorConfig,
    VectorService,
    build_index,
)
from sits_inference_testing.vectors import TopicModel, serving

MODEL = TopicModel(dimension=64, topics=120, seed=4)


def quiet(message: str) -> None:
    pass


def build(directory: Path, count: int, kind: Any) -> npt.NDArray[np.float32]:
    vectors, topics = MODEL.corpus(count, seed=9)
    docs = [Document(f"d{i}", f"text {i}", {"topic": int(t)}) for i, t in enumerate(topics)]
    build_index(directory, vectors, docs, BuildOptions(kind=kind), quiet)
    return vectors


@pytest.fixture(scope="module")
def ivf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("ivf")
    build(directory, 25_000, "ivfpq")
    return directory


@pytest.fixture(scope="module")
def hnsw_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("hnsw")
    build(directory, 4_000, "hnsw")
    return directory


def sample(metrics: CacheMetrics) -> Callable[..., float]:
    def value(name: str, **labels: str) -> float:
        found = metrics.registry.get_sample_value(name, labels)
        return 0.0 if found is None else found

    return value


def vector_of(topic: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in MODEL.vectors(np.array([topic]), rng)[0]]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{oops", 400, "invalid_json"),
        (b'{"k": 3}', 400, "missing_query"),
        (b'{"vector": [1, 2, 3]}', 400, "wrong_dimension"),
        (b'{"vector": [1], "k": 0}', 400, "k_out_of_range"),
        (b'{"vector": [1], "k": 1000}', 400, "k_out_of_range"),
        (b'{"query": "what is this?"}', 400, "text_not_supported"),  # built from vectors
        (
            b'{"vector": ' + str([0.1] * 64).encode() + b', "filter": {"colour": "red"}}',
            400,
            "invalid_filter",
        ),
    ],
)
async def test_bad_requests_get_openai_style_4xx(
    ivf_dir: Path, body: bytes, status: int, code: str
) -> None:
    metrics = CacheMetrics()
    service = VectorService(VectorConfig(ivf_dir), metrics=metrics)
    async with serving(service) as client:
        response = await client.post("/v1/retrieve", data=body)
        assert response.status == status
        error = (await response.json())["error"]
        assert error["code"] == code
        assert error["type"] == "invalid_request_error"
        assert error["message"]
    assert sample(metrics)("sits_cache_vector_requests_total", code=str(status)) == 1


async def test_missing_index_is_503_until_the_directory_is_filled(
    ivf_dir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "volume"
    target.mkdir()
    metrics = CacheMetrics()
    service = VectorService(VectorConfig(target), metrics=metrics)
    value = sample(metrics)
    async with serving(service) as client:
        response = await client.post("/v1/retrieve", json={"vector": vector_of(1, 0)})
        assert response.status == 503
        assert response.headers["Retry-After"]
        error = (await response.json())["error"]
        assert (error["code"], error["type"]) == ("index_unavailable", "service_unavailable_error")
        assert "manifest.json" in error["message"]
        assert value("sits_cache_vector_index_available") == 0
        assert (await (await client.get("/v1/vector/index")).json())["available"] is False

        shutil.copytree(ivf_dir, target, dirs_exist_ok=True)
        await service.refresh()  # what the background task does every refresh_seconds
        response = await client.post("/v1/retrieve", json={"vector": vector_of(1, 0), "k": 4})
        assert response.status == 200
        body = await response.json()
        assert len(body["data"]) == 4
        assert [r["index"] for r in body["data"]] == [0, 1, 2, 3]
        assert body["index"]["kind"] == "ivfpq"
        assert value("sits_cache_vector_index_available") == 1


async def test_hot_lists_are_preloaded_after_a_restart(ivf_dir: Path, tmp_path: Path) -> None:
    config = VectorConfig(ivf_dir, hot_min_hits=5, stats_path=tmp_path / "state" / "stats.json")
    hot_topics = [7, 8]
    first = CacheMetrics()
    async with serving(VectorService(config, metrics=first)) as client:
        value = sample(first)
        assert value("sits_cache_vector_preloaded_lists") == 0  # no statistics yet
        for i in range(30):  # six distinct queries, five times each: their lists get 5+ hits
            response = await client.post(
                "/v1/retrieve", json={"vector": vector_of(hot_topics[i % 2], i % 6), "k": 5}
            )
            assert response.status == 200
            assert (await response.json())["cache"]["hit"] is False  # nothing resident yet
        assert value("sits_cache_misses_total", tier="vector") == 30
        assert value("sits_cache_vector_resident_lists") == 0
        assert value("sits_cache_vector_list_accesses_total", residency="cold") > 0
    assert config.stats_path is not None
    assert config.stats_path.exists()

    second = CacheMetrics()
    async with serving(VectorService(config, metrics=second)) as client:
        value = sample(second)
        # Right after start, before any query: lists preloaded from the saved statistics.
        preloaded = value("sits_cache_vector_preloaded_lists")
        assert preloaded > 0
        assert value("sits_cache_vector_resident_lists") == preloaded
        assert value("sits_cache_vector_resident_bytes") > 0
        assert value("sits_cache_bytes", tier="vector") == value("sits_cache_vector_resident_bytes")
        assert value("sits_cache_vector_warmup_duration_seconds", phase="preload") > 0
        response = await client.post("/v1/retrieve", json={"vector": vector_of(7, 2)})
        assert (await response.json())["cache"]["hit"] is True
        assert value("sits_cache_hits_total", tier="vector") == 1
        # A topic nobody asked about probes lists that are not resident.
        response = await client.post("/v1/retrieve", json={"vector": vector_of(90, 1001)})
        assert (await response.json())["cache"]["hit"] is False
        assert value("sits_cache_misses_total", tier="vector") == 1
        described = await (await client.get("/v1/vector/index")).json()
        assert described["resident_lists"] == preloaded


async def test_lists_become_resident_while_running_and_cool_down(ivf_dir: Path) -> None:
    clock = [1_000_000.0]
    config = VectorConfig(ivf_dir, hot_min_hits=4, hot_window_seconds=600.0)
    metrics = CacheMetrics()
    service = VectorService(config, metrics=metrics, clock=lambda: clock[0])
    value = sample(metrics)
    async with serving(service) as client:
        for i in range(12):
            await client.post("/v1/retrieve", json={"vector": vector_of(3, i % 3)})
        await service.refresh()
        resident = value("sits_cache_vector_resident_lists")
        assert resident > 0
        assert value("sits_cache_vector_list_promotions_total") == resident
        response = await client.post("/v1/retrieve", json={"vector": vector_of(3, 1)})
        assert (await response.json())["cache"]["hit"] is True
        clock[0] += 700.0  # the accesses leave the window
        await service.refresh()
        assert value("sits_cache_vector_resident_lists") == 0
        assert value("sits_cache_evictions_total", tier="vector", reason="cold") == resident


async def test_hnsw_is_warmed_up_at_start(hnsw_dir: Path) -> None:
    metrics = CacheMetrics()
    value = sample(metrics)
    async with serving(VectorService(VectorConfig(hnsw_dir), metrics=metrics)) as client:
        assert value("sits_cache_vector_warmup_duration_seconds", phase="hnsw") > 0
        index_size = (hnsw_dir / "index.faiss").stat().st_size
        assert value("sits_cache_vector_resident_bytes") >= index_size
        assert value("sits_cache_entries", tier="vector") == 4_000
        response = await client.post(
            "/v1/retrieve", json={"vector": vector_of(5, 3), "k": 3, "filter": {"topic": 5}}
        )
        body = await response.json()
        assert response.status == 200
        assert [r["metadata"]["topic"] for r in body["data"]] == [5, 5, 5]
        assert body["cache"] == {"hit": True, "lists": 0}
        assert value("sits_cache_hits_total", tier="vector") == 1
        assert value("sits_cache_vector_retrieval_duration_seconds_count", input="vector") == 1
