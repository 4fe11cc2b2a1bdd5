"""What the service needs from an opened index, whatever its kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import faiss
import numpy as np
import numpy.typing as npt

from .pages import MappedFile

Vector = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]
# Filters matching at most this many documents are answered by exact search over them:
# cheaper than an ANN pass that would skip most candidates, and recall is exact.
EXACT_FILTER_LIMIT = 4096


@dataclass(frozen=True)
class Hits:
    """Top-k internal ids with cosine scores (best first) and the inverted lists probed
    (None for indexes without lists, such as HNSW)."""

    ids: Ids
    scores: npt.NDArray[np.float32]
    lists: Ids | None


@dataclass(frozen=True)
class Extent:
    """One contiguous byte range of a mapped file that belongs to an inverted list."""

    file: MappedFile
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


class OpenIndex(Protocol):
    dimension: int
    count: int
    nlist: int  # 0 for indexes without inverted lists

    def search(self, query: Vector, k: int, allowed: Ids | None) -> Hits: ...

    def vectors(self, ids: Ids) -> npt.NDArray[np.float32]: ...

    def extents(self, list_no: int) -> list[Extent]: ...

    def files(self) -> list[MappedFile]: ...

    def exercise(self, queries: int) -> None:
        """Run a few synthetic searches that touch no inverted list data (warm-up)."""

    def close(self) -> None: ...


def one_faiss_thread() -> None:
    """Limit faiss's OpenMP team to the calling thread (the setting is per thread).

    One query is one unit of work: faiss parallelises over queries, so a team of threads
    brings no speed-up, only a barrier at the end of each parallel region. On a node where
    vLLM (or anything else) keeps the cores busy, that barrier waits until the other team
    thread gets a time slice: on the 2-core benchmark machine it raised the p99 of fully
    resident queries from 0.65 ms to 4.4 ms. Search worker threads call this first.
    """
    faiss.omp_set_num_threads(1)


def bitmap_selector(allowed: Ids, count: int) -> tuple[faiss.IDSelector, npt.NDArray[np.uint8]]:
    """An IDSelectorBitmap over internal ids; keep the returned array alive while searching
    (faiss holds a raw pointer into it)."""
    bits = np.zeros(count, dtype=bool)
    bits[allowed] = True
    bitmap = np.packbits(bits, bitorder="little")
    return faiss.IDSelectorBitmap(count, faiss.swig_ptr(bitmap)), bitmap


def exact_top_k(query: Vector, ids: Ids, vectors: npt.NDArray[np.float32], k: int) -> Hits:
    """Rank `ids` (whose rows are `vectors`) by cosine with the unit-length query."""
    if ids.size == 0:
        return Hits(np.zeros(0, np.int64), np.zeros(0, np.float32), None)
    scores = (vectors @ query).astype(np.float32)
    top = min(k, ids.size)
    order = np.argpartition(-scores, top - 1)[:top] if top < ids.size else np.arange(ids.size)
    order = order[np.argsort(-scores[order], kind="stable")]
    return Hits(ids[order].astype(np.int64), scores[order], None)


def exact_neighbours(
    vectors: npt.NDArray[np.float32], queries: npt.NDArray[np.float32], k: int, chunk: int = 131_072
) -> Ids:
    """Row numbers of the k rows of `vectors` most similar to each query, best first
    (brute force over unit vectors: the ground truth recall is measured against)."""
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(vectors), chunk):
        scores = queries @ vectors[start : start + chunk].T
        ids = np.broadcast_to(np.arange(start, start + scores.shape[1]), scores.shape)
        cand_s = np.concatenate([best_s, scores], axis=1)
        cand_i = np.concatenate([best_i, ids], axis=1)
        top = np.argpartition(-cand_s, k - 1, axis=1)[:, :k]
        best_s = np.take_along_axis(cand_s, top, axis=1)
        best_i = np.take_along_axis(cand_i, top, axis=1)
    order = np.argsort(-best_s, axis=1, kind="stable")
    return np.take_along_axis(best_i, order, axis=1)
