"""The HNSW index for small collections, its vectors served through a memory mapping.

Why HNSW below a size: IVF needs tens of vectors per list and thousands of training
points before its partition means anything, while a graph over a few ten thousand
vectors answers in well under a millisecond with near-exact recall. faiss's
IndexHNSWFlat stores full vectors (exact inner products; no re-ranking needed).

`read_index(..., IO_FLAG_MMAP_IFC)` keeps the flat vector storage in a mapping of the
file instead of a heap copy; the graph (neighbour lists) is read into memory. Warm-up
therefore touches every page of the file and then runs a few queries, so the first real
queries find the vectors in memory and faiss's thread pool and scratch buffers created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from .base import EXACT_FILTER_LIMIT, Extent, Hits, Ids, Vector, bitmap_selector, exact_top_k
from .manifest import INDEX_FILE, IndexFormatError, Manifest
from .pages import MappedFile


class HnswIndex:
    """Thread-safe for concurrent searches (faiss HNSW search is const)."""

    nlist = 0

    def __init__(self, directory: Path, manifest: Manifest) -> None:
        self.dimension = manifest.dimension
        self.count = manifest.count
        self.ef_search = int(manifest.params.get("ef_search", 64))
        self._index: Any = faiss.read_index(str(directory / INDEX_FILE), faiss.IO_FLAG_MMAP_IFC)
        if self._index.ntotal != self.count or self._index.d != self.dimension:
            raise IndexFormatError(f"{INDEX_FILE} does not match the manifest")
        self._file = MappedFile(directory / INDEX_FILE)

    def extents(self, list_no: int) -> list[Extent]:
        return []

    def files(self) -> list[MappedFile]:
        return [self._file]

    def vectors(self, ids: Ids) -> npt.NDArray[np.float32]:
        if ids.size == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out: npt.NDArray[np.float32] = self._index.reconstruct_batch(ids)
        return out

    def search(self, query: Vector, k: int, allowed: Ids | None) -> Hits:
        if allowed is not None and allowed.size <= EXACT_FILTER_LIMIT:
            return exact_top_k(query, allowed, self.vectors(allowed), k)
        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]  # not in stubs
        params.efSearch = max(self.ef_search, k)
        bitmap = None
        if allowed is not None:
            selector, bitmap = bitmap_selector(allowed, self.count)
            params.sel = selector
        scores, ids = self._index.search(query[None, :], k, params=params)
        del bitmap
        keep = ids[0] >= 0
        return Hits(ids[0][keep].astype(np.int64), scores[0][keep].astype(np.float32), None)

    def exercise(self, queries: int) -> None:
        """Search with perturbed stored vectors: real graph paths, faiss's threads and
        scratch buffers set up before the first request."""
        for query in self._sample_queries(queries):
            self.search(query, 10, None)

    def _sample_queries(self, count: int, seed: int = 0) -> npt.NDArray[np.float32]:
        rng = np.random.default_rng(seed)
        ids = rng.choice(self.count, size=min(count, self.count), replace=False)
        queries = self.vectors(np.sort(ids).astype(np.int64))
        queries += rng.normal(0.0, 0.02, queries.shape).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        return queries

    def close(self) -> None:
        self._file.close()
        self._index = None
