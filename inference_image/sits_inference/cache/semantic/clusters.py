"""Online Mini-Batch K-Means over query embeddings, with top-3 representatives per cluster.

The seed's L1 design: embed every query, cluster the embeddings online, keep each
cluster's three most representative queries as its key templates, and look up by the
most similar cluster. Here the clusters do two jobs:

- narrow the search: the centroids are the coarse quantiser of the IVF index
  (`index.py`), so a lookup scans only the entries of the `nprobe` most similar
  clusters instead of all of them;
- compress the key space: each cluster's top-3 representatives (the stored phrasings
  that answered the most lookups) summarise what people ask; `SemanticCache.stats()`
  and `representatives()` report them, so operators see thousands of queries as a few
  hundred key templates.

Algorithm (Sculley, "Web-scale k-means clustering", 2010), on the unit sphere: points are
buffered; every `batch_size` points each is assigned to its nearest centroid, and that
centroid moves toward it with a per-centroid learning rate 1/count, then is renormalised.
The number of clusters grows online up to `max_clusters`: a point whose best centroid
is less similar than `spawn_below` starts a new cluster (the usual way to seed an
online k-means without knowing the data in advance).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class OnlineKMeans:
    """Spherical mini-batch k-means; not thread-safe (the cache holds its lock)."""

    def __init__(
        self,
        dimension: int,
        max_clusters: int,
        *,
        batch_size: int = 32,
        spawn_below: float = 0.7,
    ) -> None:
        if max_clusters < 1:
            raise ValueError("max_clusters must be at least 1")
        self.max_clusters = max_clusters
        self.batch_size = batch_size
        self.spawn_below = spawn_below
        self._centroids = np.zeros((max_clusters, dimension), dtype=np.float32)
        self.counts = np.zeros(max_clusters, dtype=np.int64)
        self.k = 0
        self.version = 0  # bumped whenever a centroid is added or moves
        self._batch: list[Matrix] = []

    @property
    def centroids(self) -> Matrix:
        return self._centroids[: self.k]

    def nearest(self, vectors: Matrix) -> tuple[npt.NDArray[np.int64], Matrix]:
        """Label and cosine of the nearest centroid for each row; -1 while there are none."""
        n = len(vectors)
        if self.k == 0:
            return np.full(n, -1, dtype=np.int64), np.full(n, -1.0, dtype=np.float32)
        # One query (the hot path): a matrix-vector product, which BLAS runs on the calling
        # thread; the matrix-matrix form may wake BLAS worker threads, and on a node busy
        # with vLLM waiting for them costs milliseconds.
        single = n == 1
        sims = (self.centroids @ vectors[0])[None, :] if single else vectors @ self.centroids.T
        labels = np.argmax(sims, axis=1)
        return labels.astype(np.int64), sims[np.arange(n), labels].astype(np.float32)

    def observe(self, vector: Matrix) -> int:
        """Learn from one query embedding; returns its cluster."""
        labels, sims = self.nearest(vector[None, :])
        label, sim = int(labels[0]), float(sims[0])
        if label < 0 or (sim < self.spawn_below and self.k < self.max_clusters):
            return self._spawn(vector)
        self._batch.append(vector)
        if len(self._batch) >= self.batch_size:
            self._step()
        return label

    def _spawn(self, vector: Matrix) -> int:
        label = self.k
        self._centroids[label] = vector
        self.counts[label] = 1
        self.k += 1
        self.version += 1
        return label

    def _step(self) -> None:
        batch = np.stack(self._batch)
        self._batch.clear()
        labels, _ = self.nearest(batch)
        for vector, label in zip(batch, labels, strict=True):
            self.counts[label] += 1
            rate = 1.0 / float(self.counts[label])
            self._centroids[label] += rate * (vector - self._centroids[label])
        touched = np.unique(labels)
        norms = np.linalg.norm(self._centroids[touched], axis=1, keepdims=True)
        self._centroids[touched] /= np.maximum(norms, 1e-12)
        self.version += 1


class Representatives:
    """Members of each cluster and its top-3 by hits (ties: the earlier entry).

    Only ids are kept here; `hits` reads an entry's current hit count.
    """

    TOP = 3

    def __init__(self, hits: Callable[[int], int]) -> None:
        self._hits = hits
        self.members: dict[int, set[int]] = {}
        self.top: dict[int, list[int]] = {}

    def _rank(self, entry: int) -> tuple[int, int]:
        return (-self._hits(entry), entry)

    def add(self, cluster: int, entry: int) -> None:
        self.members.setdefault(cluster, set()).add(entry)
        self._offer(cluster, entry)

    def remove(self, cluster: int, entry: int) -> None:
        members = self.members.get(cluster)
        if members is None:
            return
        members.discard(entry)
        if not members:
            del self.members[cluster]
            self.top.pop(cluster, None)
        elif entry in self.top.get(cluster, ()):
            self.top[cluster] = sorted(members, key=self._rank)[: self.TOP]

    def hit(self, cluster: int, entry: int) -> None:
        """An entry's hit count grew: it may climb into (or within) its cluster's top 3."""
        top = self.top.get(cluster, [])
        if entry in top:
            top.sort(key=self._rank)
        else:
            self._offer(cluster, entry)

    def _offer(self, cluster: int, entry: int) -> None:
        top = self.top.setdefault(cluster, [])
        top.append(entry)
        top.sort(key=self._rank)
        del top[self.TOP :]

    def clusters(self) -> int:
        return len(self.members)

    def keys(self) -> int:
        return sum(len(t) for t in self.top.values())
