"""The IVF-PQ index, served from its file through a memory mapping.

`faiss.read_index(path, IO_FLAG_MMAP)` loads the coarse quantizer and the PQ codebooks
into memory (small) and turns the inverted lists into an `OnDiskInvertedLists` that
points into a mapping of the same file: list codes and ids are read straight from the
page cache, so a list that is not in memory costs disk reads the first time it is
scanned. That is what makes hot-list preloading matter.

Search is two-step on purpose: the coarse quantizer picks the `nprobe` lists, then
`search_preassigned` scans exactly those lists. The service learns which lists each query
touched (to count accesses and decide hit or miss) without quantizing twice.

PQ codes alone rank neighbours approximately (recall@10 about 0.75 on the benchmark's
data with 48 sub-quantizers), so the best `k * refine_factor` candidates are re-ranked
with their float16 vectors. vectors.f16 is in internal-id order, which is list order:
each list's vectors are one contiguous range, warmed together with its codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt
from faiss import swig_ptr

from .base import EXACT_FILTER_LIMIT, Extent, Hits, Ids, Vector, bitmap_selector, exact_top_k
from .docs import DocStore
from .manifest import INDEX_FILE, VECTORS_FILE, IndexFormatError, Manifest
from .pages import MappedFile


class IvfPqIndex:
    """Thread-safe for concurrent searches (faiss search is const; nothing here mutates)."""

    def __init__(self, directory: Path, manifest: Manifest, docs: DocStore) -> None:
        self.dimension = manifest.dimension
        self.count = manifest.count
        self.nprobe = int(manifest.params["nprobe"])
        self.refine_factor = int(manifest.params.get("refine_factor", 1))
        # faiss's stubs lack much of the SWIG surface (search_preassigned_c, lists.at...).
        self._index: Any = faiss.read_index(str(directory / INDEX_FILE), faiss.IO_FLAG_MMAP)
        ivf: Any = faiss.extract_index_ivf(self._index)
        lists: Any = faiss.downcast_InvertedLists(ivf.invlists)
        if not isinstance(lists, faiss.OnDiskInvertedLists):
            raise IndexFormatError(f"{INDEX_FILE}: inverted lists were not memory-mapped")
        if ivf.ntotal != self.count or ivf.d != self.dimension:
            raise IndexFormatError(f"{INDEX_FILE} does not match the manifest")
        self._ivf = ivf
        self.nlist = int(ivf.nlist)
        self.nprobe = min(self.nprobe, self.nlist)
        disk: Any = lists  # the stubs type OnDiskInvertedLists.lists as a Python list
        entry = int(disk.code_size) + 8  # codes then int64 ids, per slot of capacity
        self._sizes = np.array([disk.list_size(i) for i in range(self.nlist)], dtype=np.int64)
        self._offsets = np.array([disk.lists.at(i).offset for i in range(self.nlist)], np.int64)
        caps = np.array([disk.lists.at(i).capacity for i in range(self.nlist)], np.int64)
        self._list_bytes = caps * entry
        self._starts = np.concatenate([[0], np.cumsum(self._sizes)[:-1]]).astype(np.int64)
        self._index_file = MappedFile(directory / INDEX_FILE)
        self._vector_file = MappedFile(directory / VECTORS_FILE)
        row = self.dimension * 2
        if self._vector_file.size != self.count * row:
            raise IndexFormatError(f"{VECTORS_FILE} does not hold {self.count} vectors")
        self._vectors = (
            self._vector_file.view().view(np.float16).reshape(self.count, self.dimension)
        )
        self._docs = docs

    def list_size(self, list_no: int) -> int:
        return int(self._sizes[list_no])

    def extents(self, list_no: int) -> list[Extent]:
        """Codes+ids in the index file, vectors, and documents of one list."""
        first = int(self._starts[list_no])
        end = first + int(self._sizes[list_no])
        if end == first:
            return []
        offset = int(self._offsets[list_no])
        row = self.dimension * 2
        doc_start, doc_end = self._docs.byte_range(first, end)
        return [
            Extent(self._index_file, offset, offset + int(self._list_bytes[list_no])),
            Extent(self._vector_file, first * row, end * row),
            Extent(self._docs.file, doc_start, doc_end),
        ]

    def files(self) -> list[MappedFile]:
        return [self._index_file, self._vector_file, self._docs.file]

    def vectors(self, ids: Ids) -> npt.NDArray[np.float32]:
        return self._vectors[ids].astype(np.float32)

    def probe(
        self, query: Vector, nprobe: int | None = None
    ) -> tuple[Ids, npt.NDArray[np.float32]]:
        """The lists a query scans (nearest centroids first) and their distances."""
        distances, lists = self._ivf.quantizer.search(query[None, :], nprobe or self.nprobe)
        return lists.astype(np.int64), distances

    def exercise(self, queries: int) -> None:
        """Coarse quantization only: it warms the in-memory part (centroids, faiss's
        threads) without scanning, and so without warming, any list."""
        rng = np.random.default_rng(0)
        for _ in range(queries):
            query = rng.normal(size=self.dimension).astype(np.float32)
            self.probe(query / np.linalg.norm(query))

    def search(self, query: Vector, k: int, allowed: Ids | None) -> Hits:
        if allowed is not None and allowed.size <= EXACT_FILTER_LIMIT:
            hits = exact_top_k(query, allowed, self.vectors(allowed), k)
            touched = np.unique(np.searchsorted(self._starts, allowed, side="right") - 1)
            return Hits(hits.ids, hits.scores, touched.astype(np.int64))
        lists, distances = self.probe(query)
        candidates = min(self.count, k * self.refine_factor)
        params = faiss.SearchParametersIVF()
        params.nprobe = int(lists.shape[1])
        bitmap = None
        if allowed is not None:
            selector, bitmap = bitmap_selector(allowed, self.count)
            params.sel = selector
        out_d = np.empty((1, candidates), dtype=np.float32)
        out_i = np.empty((1, candidates), dtype=np.int64)
        x = np.ascontiguousarray(query[None, :], dtype=np.float32)
        self._ivf.search_preassigned_c(
            1,
            swig_ptr(x),
            candidates,
            swig_ptr(lists),
            swig_ptr(np.ascontiguousarray(distances)),
            swig_ptr(out_d),
            swig_ptr(out_i),
            False,
            params,
        )
        del bitmap  # faiss is done with the selector's memory
        found = out_i[0][out_i[0] >= 0]
        hits = exact_top_k(query, found, self.vectors(found), k)
        return Hits(hits.ids, hits.scores, lists[0])

    def close(self) -> None:
        """Unmap this index's files (the document store is closed by its owner)."""
        self._vectors = np.zeros((0, self.dimension), dtype=np.float16)  # drop the view first
        self._index_file.close()
        self._vector_file.close()
        self._index = None
