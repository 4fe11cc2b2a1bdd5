"""Nearest-neighbour search over cached entries: a faiss IVF index on our own clusters.

Why faiss (IndexIVFScalarQuantizer), not hnswlib or usearch:
- IVF is the structure the seed describes: the online k-means centroids (`clusters.py`)
  are the coarse quantiser, so "look up the most similar clusters, then the entries in
  them" is one faiss call, in C++, with `nprobe` clusters scanned.
- Memory: 8-bit scalar quantisation stores 384 bytes per 384-d vector (plus the slack of
  growing inverted lists). hnswlib keeps float32 vectors plus the graph links (about
  1.7 KB per entry at M=16), which alone would take most of the 250 MiB per 100,000
  entries budget before any payload.
- Exact deletes: TTL, eviction and invalidation remove entries by id, every minute of
  the day. faiss removes an id from its list at once (hash-table direct map); hnswlib
  only marks it deleted and keeps its memory and graph position.
- Partitions: an entry's id carries its partition number in the high 32 bits, so an
  `IDSelectorRange` restricts the scan to one partition inside faiss, with no Python
  callback per candidate (hnswlib's filter is a Python call per visited node).
Why 8 bits: one uniform step of 1/255 over [-0.5, 0.5] for every component. MiniLM's unit
vectors never come near that bound (the largest component over 100,000 questions is
0.26), and rounding moves a cosine by 0.001 on average, 0.004 at most (measured), a
twentieth of the step the benchmark sweeps thresholds by (0.02). fp16 took twice the
memory for precision nothing downstream can use.
The vectors are stored raw (no residual) so that moving centroids never corrupts them;
an entry filed under a centroid that has since moved is still found through `nprobe`,
and `SemanticCache` re-files entries as centroids move.
"""

from __future__ import annotations

from typing import Any, Final

import faiss
import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
# faiss's bundled stubs miss DirectMap and the keyword form of SearchParametersIVF.
_faiss: Any = faiss
PARTITION_SHIFT: Final = 32
BYTES_PER_VECTOR_EXTRA: Final = 8 + 32  # the id in its list, the direct-map hash slot
# Components outside [-COMPONENT_BOUND, COMPONENT_BOUND] are clipped by the quantiser.
COMPONENT_BOUND: Final = 0.5


def entry_id(partition: int, sequence: int) -> int:
    return (partition << PARTITION_SHIFT) | (sequence & 0xFFFF_FFFF)


def partition_of(entry: int) -> int:
    return entry >> PARTITION_SHIFT


class EntryIndex:
    """L1's entries by embedding: IVF over unit vectors, inner product (= cosine); not
    thread-safe (caller locks). Not the vector tier (L2), which serves a prebuilt index."""

    def __init__(self, dimension: int, max_clusters: int, *, nprobe: int = 16) -> None:
        self.dimension = dimension
        self.nprobe = nprobe
        self._quantizer = faiss.IndexFlatIP(dimension)
        self._ivf = faiss.IndexIVFScalarQuantizer(
            self._quantizer,
            dimension,
            max_clusters,
            faiss.ScalarQuantizer.QT_8bit_uniform,
            faiss.METRIC_INNER_PRODUCT,
        )
        self._ivf.by_residual = False
        # A uniform quantiser is "trained" by its range: (minimum, width), set, not learnt,
        # so that the first entries need no training set.
        bounds = np.array([-COMPONENT_BOUND, 2 * COMPONENT_BOUND], dtype=np.float32)
        _faiss.copy_array_to_vector(bounds, self._ivf.sq.trained)
        # The quantiser is trained online by OnlineKMeans; lists beyond its current
        # centroid count simply stay empty.
        self._ivf.is_trained = True
        self._ivf.set_direct_map_type(_faiss.DirectMap.Hashtable)

    @property
    def ntotal(self) -> int:
        return int(self._ivf.ntotal)

    def bytes_per_vector(self) -> int:
        return int(self._ivf.code_size) + BYTES_PER_VECTOR_EXTRA

    def set_centroids(self, centroids: Matrix) -> None:
        self._quantizer.reset()
        if len(centroids):
            self._quantizer.add(np.ascontiguousarray(centroids, dtype=np.float32))

    def add(self, entry: int, vector: Matrix, cluster: int) -> None:
        x = np.ascontiguousarray(vector.reshape(1, -1), dtype=np.float32)
        ids = np.array([entry], dtype=np.int64)
        lists = np.array([cluster], dtype=np.int64)
        # add_core opens an OpenMP parallel region even for one vector; on a node busy with
        # vLLM, starting that team costs milliseconds. The thread count is a per-thread
        # OpenMP setting, so this changes nothing for other threads (the L2 tier's).
        previous = _faiss.omp_get_max_threads()
        _faiss.omp_set_num_threads(1)
        try:
            self._ivf.add_core(1, faiss.swig_ptr(x), faiss.swig_ptr(ids), faiss.swig_ptr(lists))
        finally:
            _faiss.omp_set_num_threads(previous)

    def remove(self, entry: int) -> None:
        self._ivf.remove_ids(faiss.IDSelectorArray(np.array([entry], dtype=np.int64)))

    def move(self, entry: int, cluster: int) -> None:
        """File an entry under another cluster (its centroid is now elsewhere)."""
        vector = self.vectors([entry])[0]
        self.remove(entry)
        self.add(entry, vector, cluster)

    def vectors(self, entries: list[int]) -> Matrix:
        ids = np.array(entries, dtype=np.int64)
        out: Matrix = self._ivf.reconstruct_batch(ids)
        return out

    def search(self, vector: Matrix, partition: int, k: int) -> list[tuple[int, float]]:
        """The k most similar entries of one partition, most similar first."""
        selector = faiss.IDSelectorRange(
            partition << PARTITION_SHIFT, (partition + 1) << PARTITION_SHIFT
        )
        params = _faiss.SearchParametersIVF(sel=selector, nprobe=self.nprobe)
        sims, ids = self._ivf.search(vector.reshape(1, -1), k, params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], sims[0], strict=True) if i >= 0]

    def reset(self) -> None:
        self._ivf.reset()
