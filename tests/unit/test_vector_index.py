"""Index building and searching on synthetic clustered vectors, checked against exact search."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt
import pytest

from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.vector import BuildOptions, Document, build_index
from sits_inference.cache.vector.base import exact_neighbours
from sits_inference.cache.vector.build import choose_kind, ivf_params
from sits_inference.cache.vector.ivfpq import IvfPqIndex
from sits_inference.cache.vector.loaded import LoadedIndex, Options
from sits_inference.cache.vector.manifest import INDEX_FILE, VECTORS_FILE, read_manifest
from sits_inference.cache.vector.pages import MappedFile, evict
from sits_inference.cache.vector.telemetry import VectorMetrics
from sits_inference.cache.vector.window import AccessWindow
from sits_inference_testing.vectors import TopicModel

MODEL = TopicModel(dimension=64, topics=150, seed=11)
Matrix = npt.NDArray[np.float32]


def documents(topics: npt.NDArray[np.int64]) -> list[Document]:
    return [
        Document(f"doc-{i}", f"text {i}", {"topic": int(t), "shard": i % 3})
        for i, t in enumerate(topics)
    ]


def quiet(message: str) -> None:
    pass


class Built:
    def __init__(self, directory: Path, vectors: Matrix, topics: npt.NDArray[np.int64]) -> None:
        self.directory = directory
        self.vectors = vectors
        self.topics = topics


@pytest.fixture(scope="module")
def ivf(tmp_path_factory: pytest.TempPathFactory) -> Built:
    vectors, topics = MODEL.corpus(30_000, seed=5)
    out = tmp_path_factory.mktemp("ivf")
    build_index(out, vectors, documents(topics), BuildOptions(kind="ivfpq"), quiet)
    return Built(out, vectors, topics)


@pytest.fixture(scope="module")
def hnsw(tmp_path_factory: pytest.TempPathFactory) -> Built:
    vectors, topics = MODEL.corpus(6_000, seed=6)
    out = tmp_path_factory.mktemp("hnsw")
    build_index(out, vectors, documents(topics), BuildOptions(), quiet)  # auto: small -> hnsw
    return Built(out, vectors, topics)


def options(**overrides: Any) -> Options:
    values: dict[str, Any] = {
        "hot_min_hits": 3,
        "hot_window_seconds": 3600.0,
        "lock_memory": False,
        "max_resident_bytes": None,
        "warmup_queries": 4,
    }
    return Options(**{**values, **overrides})


@pytest.fixture
def opened(request: pytest.FixtureRequest) -> Iterator[LoadedIndex]:
    built: Built = request.getfixturevalue(request.param)
    loaded = LoadedIndex(built.directory, options(), VectorMetrics(CacheMetrics()))
    loaded.warm_up(None)
    yield loaded
    loaded.close()


def doc_rows(loaded: LoadedIndex, query: Matrix, k: int, **conditions: Any) -> list[int]:
    return [int(d.id.split("-")[1]) for d in loaded.query(query, k, conditions).documents]


def recall(found: list[list[int]], truth: npt.NDArray[np.int64]) -> float:
    k = truth.shape[1]
    return float(
        np.mean([len(set(f) & set(t.tolist())) / k for f, t in zip(found, truth, strict=True)])
    )


@pytest.mark.parametrize(
    ("opened", "threshold"), [("ivf", 0.9), ("hnsw", 0.95)], indirect=["opened"]
)
def test_recall_at_10_against_exact_search(
    opened: LoadedIndex, threshold: float, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(opened.manifest.kind.replace("ivfpq", "ivf"))
    queries = MODEL.queries(300, exponent=1.1, seed=21)
    truth = exact_neighbours(built.vectors, queries, 10)
    found = [doc_rows(opened, q, 10) for q in queries]
    assert recall(found, truth) >= threshold
    # Scores are cosine similarities, best first, matching the exact ones.
    result = opened.query(queries[0], 10, {})
    exact = built.vectors[truth[0]] @ queries[0]
    assert result.scores == sorted(result.scores, reverse=True)
    assert result.scores[0] == pytest.approx(float(exact[0]), abs=2e-3)


@pytest.mark.parametrize("opened", ["ivf", "hnsw"], indirect=True)
def test_filters_return_only_matching_documents(
    opened: LoadedIndex, request: pytest.FixtureRequest
) -> None:
    built: Built = request.getfixturevalue(opened.manifest.kind.replace("ivfpq", "ivf"))
    queries = MODEL.queries(20, exponent=1.1, seed=22)
    rows = np.arange(len(built.vectors))
    for query in queries:
        topic = int(built.topics[int(rows[np.argmax(built.vectors @ query)])])
        # Small match set (one topic, one shard): answered exactly.
        small = (built.topics == topic) & (rows % 3 == 1)
        got = doc_rows(opened, query, 5, topic=topic, shard=1)
        exact = rows[small][np.argsort(-(built.vectors[small] @ query))[:5]]
        assert got == exact.tolist()
        # Large match set (a whole shard, > 4096 documents): ANN with a selector.
        got = doc_rows(opened, query, 10, shard=2)
        assert len(got) == 10
        assert all(r % 3 == 2 for r in got)
    assert doc_rows(opened, queries[0], 5, topic=-1) == []


def test_ivf_lists_are_served_from_the_mapped_file(ivf: Built) -> None:
    manifest = read_manifest(ivf.directory)
    loaded = LoadedIndex(ivf.directory, options(), VectorMetrics(CacheMetrics()))
    try:
        index = loaded.index
        assert isinstance(index, IvfPqIndex)
        raw: Any = index._ivf
        lists = faiss.downcast_InvertedLists(raw.invlists)
        assert isinstance(lists, faiss.OnDiskInvertedLists)
        maps = Path("/proc/self/maps").read_text()
        assert str(ivf.directory / INDEX_FILE) in maps
        # Internal ids of a list are consecutive, and the list's extent in index.faiss is
        # exactly its codes followed by its ids.
        start = 0
        data = (ivf.directory / INDEX_FILE).read_bytes()
        for list_no in range(index.nlist):
            size = lists.list_size(list_no)
            ids = faiss.rev_swig_ptr(lists.get_ids(list_no), size).copy()
            assert ids.tolist() == list(range(start, start + size))
            if size:
                codes_extent, vectors_extent, _ = index.extents(list_no)
                codes = faiss.rev_swig_ptr(lists.get_codes(list_no), size * lists.code_size)
                head = data[codes_extent.start : codes_extent.start + codes.size]
                assert head == codes.tobytes()
                row = manifest.dimension * 2
                assert (vectors_extent.start, vectors_extent.end) == (
                    start * row,
                    (start + size) * row,
                )
            start += size
        assert start == manifest.count
    finally:
        loaded.close()


def filesystem_type(path: Path) -> str:
    """The type of the filesystem holding `path` (longest matching mount point)."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mount, fstype, *_ = line.split()
        if str(path.resolve()).startswith(mount) and len(mount) > len(best):
            best, kind = mount, fstype
    return kind


@pytest.fixture
def disk_index(ivf: Built) -> Iterator[Path]:
    """The IVF index on a disk-backed filesystem: tmpfs pages cannot leave memory, so where
    the temporary directory is tmpfs the files are copied under the checkout (.pytest_cache)."""
    if filesystem_type(ivf.directory) != "tmpfs":
        yield ivf.directory
        return
    copy = Path(__file__).resolve().parents[2] / ".pytest_cache" / f"disk-index-{os.getpid()}"
    shutil.copytree(ivf.directory, copy, dirs_exist_ok=True)
    assert filesystem_type(copy) != "tmpfs", "no disk-backed directory for the eviction test"
    try:
        yield copy
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def test_preloading_reads_exactly_the_hot_lists_into_memory(
    disk_index: Path, tmp_path: Path
) -> None:
    """After the files are evicted from the page cache, opening with saved statistics brings
    the hot lists' pages back (mincore), and not the whole vector file."""
    manifest = read_manifest(disk_index)
    nlist = int(manifest.params["nlist"])
    hot = [3, 17, 40]
    window = AccessWindow(nlist, 3600.0)
    window.record(hot * 5 + [60])  # list 60 is below the threshold of 3
    stats = tmp_path / "stats.json"
    window.save(stats, manifest.digest)
    for name in manifest.files:
        evict(disk_index / name)
    metrics = VectorMetrics(CacheMetrics())
    loaded = LoadedIndex(disk_index, options(), metrics)
    try:
        vector_file = next(f for f in loaded.index.files() if f.path.name == VECTORS_FILE)
        assert vector_file.resident_bytes() < vector_file.size // 4, "eviction did not work"
        loaded.warm_up(stats)
        assert loaded.hot is not None
        assert sorted(np.flatnonzero(loaded.hot.resident).tolist()) == hot
        for list_no in hot:
            for extent in loaded.index.extents(list_no):
                assert extent.file.resident_bytes(extent.start, extent.end) >= extent.size
        assert vector_file.resident_bytes() < vector_file.size // 2
        assert metrics.preloaded_lists._value.get() == 3
        assert metrics.resident_lists._value.get() == 3
    finally:
        loaded.close()


@pytest.mark.parametrize(
    ("count", "kind", "expected"),
    [
        (100_000, "auto", "hnsw"),
        (100_001, "auto", "ivfpq"),
        (50, "ivfpq", "ivfpq"),
        (10**6, "hnsw", "hnsw"),
    ],
)
def test_kind_is_chosen_by_size_unless_given(count: int, kind: Any, expected: str) -> None:
    assert choose_kind(count, BuildOptions(kind=kind)) == expected


@pytest.mark.parametrize(
    ("count", "dimension", "nlist", "m", "nbits"),
    [
        (1_000_000, 384, 2048, 48, 8),
        (30_000, 64, 256, 8, 8),
        (2_000, 100, 51, 10, 5),  # few vectors: fewer lists, smaller codebooks
    ],
)
def test_default_ivf_parameters(count: int, dimension: int, nlist: int, m: int, nbits: int) -> None:
    assert ivf_params(count, dimension, BuildOptions()) == {"nlist": nlist, "m": m, "nbits": nbits}


def test_building_over_an_existing_index_needs_overwrite(hnsw: Built) -> None:
    with pytest.raises(FileExistsError):
        build_index(hnsw.directory, hnsw.vectors[:10], documents(hnsw.topics[:10]), progress=quiet)


@pytest.mark.parametrize(
    ("vectors", "message"),
    [
        (np.zeros((3, 4)), "all zeros"),
        (np.full((3, 4), np.nan), "NaN"),
        (np.ones(4), "2-D"),
    ],
)
def test_bad_vectors_are_refused(tmp_path: Path, vectors: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_index(tmp_path, vectors, [Document(str(i)) for i in range(3)], progress=quiet)


def test_hot_lists_stay_warm_without_permission_to_lock(
    ivf: Built, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without CAP_IPC_LOCK (the default in a pod) mlock fails; lists are still made
    resident, counted as not locked, and re-touched on every refresh. Root here may lock,
    so the refusal is simulated."""
    monkeypatch.setattr(MappedFile, "lock", lambda self, start=0, end=None: False)
    touched: list[tuple[int, int]] = []
    warm = MappedFile.warm

    def counting_warm(self: MappedFile, start: int = 0, end: int | None = None) -> int:
        touched.append((start, end or self.size))
        return warm(self, start, end)

    monkeypatch.setattr(MappedFile, "warm", counting_warm)
    shared = CacheMetrics()
    loaded = LoadedIndex(ivf.directory, options(lock_memory=True), VectorMetrics(shared))
    try:
        assert loaded.hot is not None
        loaded.hot.apply(np.array([5, 9], dtype=np.int64))
        value = shared.registry.get_sample_value
        assert value("sits_cache_vector_resident_lists") == 2
        assert value("sits_cache_vector_locked_bytes") == 0
        assert (value("sits_cache_vector_resident_bytes") or 0) > 0
        assert "mlock refused" in caplog.text
        before = len(touched)
        loaded.hot.apply(np.array([5, 9], dtype=np.int64))  # a refresh, same hot set
        assert len(touched) - before == 6  # three extents of each list touched again
    finally:
        loaded.close()
