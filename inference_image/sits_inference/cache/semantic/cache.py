"""SemanticCache: the L1 tier the sidecar calls (admit on the loop, lookup/store in threads).

A lookup: exact match first (same partition, same casefolded text: no embedding needed);
then, unless the text is too long for the embedder, embed it, scan the `nprobe` nearest
clusters of its partition for the 8 most similar entries, and return the first one that
is at least `threshold` similar *and* passes the near-miss guard (`guard.py`).

Locking: one lock guards all structures; embedding, the expensive part (about 10 ms), runs
outside it, so one thread's embedding never blocks another's exact-match hit, store or
invalidation (the embedder serialises its own calls: a shared fast tokenizer is not safe
to call from two threads at once). The embedding of a miss is remembered for the `store`
that usually follows, so an answer is embedded once.

The sidecar splits a lookup in two so that a miss costs the client as little as possible:
`probe` (the exact-match part, on the event loop: it never embeds and never waits for the
lock) says whether only the semantic search can still decide; `lookup(admission,
vector)` then searches with an embedding the caller computed, batched with other
requests' (`embed`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge

from sits_inference.cache.embedding import Embedder, Vectors, default_embedder
from sits_inference.cache.metrics import CacheMetrics, Eviction, Tier
from sits_inference.cache.semantic import guard
from sits_inference.cache.semantic.clusters import OnlineKMeans, Representatives
from sits_inference.cache.semantic.config import SemanticConfig
from sits_inference.cache.semantic.index import EntryIndex, entry_id
from sits_inference.cache.semantic.normalise import exact_key
from sits_inference.cache.semantic.request import Admission, CacheRequest, admit
from sits_inference.cache.semantic.store import (
    PREFILL_COST,
    Entry,
    EntryStore,
    entry_size,
    exact_hash,
    pack,
    unpack,
)

TIER: Final = Tier.SEMANTIC
CANDIDATES: Final = 8
PENDING_EMBEDDINGS: Final = 1024
REFILE_PER_STEP: Final = 64


@dataclass(frozen=True, slots=True)
class Hit:
    payload: bytes
    similarity: float
    age_seconds: float
    matched_text: str


@dataclass(frozen=True, slots=True)
class Probe:
    """The exact-match part of a lookup: a hit, or whether the semantic search may still
    find one (False: a certain miss, already counted)."""

    hit: Hit | None
    search: bool


@dataclass(frozen=True, slots=True)
class SemanticStats:
    """For the sidecar's admin endpoint."""

    entries: int
    bytes: int
    clusters: int
    representative_keys: int
    partitions: int
    queries_clustered: int
    threshold: float
    max_entries: int
    max_bytes: int | None
    ttl_seconds: float


def max_clusters_for(max_entries: int) -> int:
    """About 4 * sqrt(n) lists: the usual IVF sizing, so a list holds ~sqrt(n)/4 entries."""
    return int(min(4096, max(16, 4 * max_entries**0.5)))


class _Series:
    """The semantic tier's own series, registered once per registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.rejections = _get_or_make(
            registry,
            Counter,
            "sits_cache_near_miss_rejections",
            "Candidates above the similarity threshold that the near-miss guard refused.",
            ["reason"],
        )
        self.expired = _get_or_make(
            registry, Counter, "sits_cache_semantic_expired", "L1 entries dropped by TTL.", []
        )
        self.invalidated = _get_or_make(
            registry,
            Counter,
            "sits_cache_semantic_invalidated",
            "L1 entries removed by invalidate() (admin endpoint, revision change).",
            [],
        )
        self.clusters = _get_or_make(
            registry, Gauge, "sits_cache_semantic_clusters", "Online k-means clusters.", []
        )
        for reason in guard.REASONS:
            self.rejections.labels(reason)


def _get_or_make(
    registry: CollectorRegistry, kind: Any, name: str, doc: str, labels: list[str]
) -> Any:
    existing = getattr(registry, "_names_to_collectors", {}).get(name)
    if existing is not None:
        return existing
    return kind(name, doc, labels, registry=registry)


class SemanticCache:
    """The L1 semantic cache; see the package docstring for the contract."""

    def __init__(
        self,
        config: SemanticConfig,
        *,
        metrics: CacheMetrics,
        embedder: Embedder | None = None,
        clock: Callable[[], float] = time.monotonic,
        nprobe: int = 16,
    ) -> None:
        self.config = config
        self._metrics = metrics
        self._series = _Series(metrics.registry)
        self._embedder = embedder if embedder is not None else default_embedder()
        self._clock = clock
        self._lock = threading.RLock()
        clusters = max_clusters_for(config.max_entries)
        self._kmeans = OnlineKMeans(self._embedder.dimension, clusters)
        self._index = EntryIndex(self._embedder.dimension, clusters, nprobe=nprobe)
        self._store = EntryStore()
        self._reps = Representatives(lambda e: self._store.entries[e].hits)
        # Partition key -> small number (the high bits of entry ids), and back; a
        # partition is forgotten when its last entry goes, so that one-off conversations
        # do not accumulate keys.
        self._partitions: dict[str, int] = {}
        self._partition_keys: dict[int, str] = {}
        self._partition_sizes: dict[int, int] = {}
        self._next_partition = 0
        self._sequence = 0
        self._pending: OrderedDict[tuple[str, str], Vectors] = OrderedDict()
        self._kmeans_version = 0
        self._refile: list[int] = []
        self._update_gauges()

    # The contract -------------------------------------------------------------------

    def admit(self, request: CacheRequest) -> Admission:
        return admit(self.config, request)

    def lookup(
        self, admission: Admission, vector: Vectors | None = None, *, started: float | None = None
    ) -> Hit | None:
        """``vector``: the question's embedding when the caller computed it (``embed``),
        ``started``: when that began (``perf_counter``), so the lookup time includes it."""
        if not admission.cacheable:
            return None
        started = time.perf_counter() if started is None else started
        hit = self._lookup(admission, vector)
        self._counted(hit, started)
        return hit

    def probe(self, admission: Admission, *, storing: bool = False) -> Probe | None:
        """The exact-match part of `lookup`, cheap enough for an event loop: no embedding,
        and None instead of waiting when another thread holds the lock. A hit or a certain
        miss is counted here; ``search`` means `lookup` must decide (and counts).
        ``storing``: an answer of the partition is being stored (it may exist by then)."""
        if not admission.cacheable:
            return Probe(None, search=False)
        started = time.perf_counter()
        if not self._lock.acquire(blocking=False):
            return None
        try:
            self._expire()
            exact = self._exact_entry(admission)
            hit = self._hit(exact, 1.0) if exact is not None else None
            known = storing or admission.partition in self._partitions
            search = hit is None and admission.semantic and known
        finally:
            self._lock.release()
        if not search:
            self._counted(hit, started)
        return Probe(hit, search)

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Questions' embeddings in one forward pass (blocking: call it in a thread)."""
        return self._embedder.embed(texts)

    def _counted(self, hit: Hit | None, started: float) -> None:
        self._metrics.lookup_seconds.labels(TIER).observe(time.perf_counter() - started)
        (self._metrics.hits if hit else self._metrics.misses).labels(TIER).inc()

    def store(self, admission: Admission, payload: bytes) -> None:
        if not admission.cacheable:
            return
        stored, compressed = pack(payload)
        size = entry_size(admission.text, stored)
        if size > self._capacity_bytes():
            return  # larger than the whole cache: storing it would evict everything
        vector = self._vector(admission, learn=True) if admission.semantic else None
        with self._lock:
            self._expire()
            self._replace_exact(admission)
            # The GPU's cost to regenerate grows with the answer, not with its zlib size.
            cost = float(PREFILL_COST + len(payload))
            self._insert(admission, stored, compressed, cost, size, vector)
            self._enforce_capacity()
            self._update_gauges()

    def invalidate(
        self,
        *,
        model: str | None = None,
        revision: str | None = None,
        adapter_digest: str | None = None,
    ) -> int:
        with self._lock:
            doomed = [
                e
                for e in self._store
                if (model is None or e.model == model)
                and (revision is None or e.revision == revision)
                and (adapter_digest is None or e.adapter_digest == adapter_digest)
            ]
            for entry in doomed:
                self._remove(entry)
            self._series.invalidated.inc(len(doomed))
            self._update_gauges()
            return len(doomed)

    def stats(self) -> SemanticStats:
        with self._lock:
            return SemanticStats(
                entries=len(self._store),
                bytes=self._store.nbytes,
                clusters=self._kmeans.k,
                representative_keys=self._reps.keys(),
                partitions=len(self._partition_sizes),
                queries_clustered=int(self._kmeans.counts[: self._kmeans.k].sum()),
                threshold=self.config.threshold,
                max_entries=self.config.max_entries,
                max_bytes=self.config.max_bytes,
                ttl_seconds=self.config.ttl_seconds,
            )

    def representatives(self, limit: int = 20) -> list[dict[str, Any]]:
        """The largest clusters with their top-3 phrasings: what people ask, compressed."""
        with self._lock:
            largest = sorted(self._reps.members.items(), key=lambda kv: -len(kv[1]))[:limit]
            return [
                {
                    "cluster": cluster,
                    "entries": len(members),
                    "keys": [
                        {"text": self._store.entries[e].text, "hits": self._store.entries[e].hits}
                        for e in self._reps.top.get(cluster, [])
                    ],
                }
                for cluster, members in largest
            ]

    def candidates(self, admission: Admission, k: int = CANDIDATES) -> list[tuple[str, float]]:
        """The index's k nearest stored texts, before threshold and guard (diagnostics:
        the benchmark measures the index's recall with it). No metrics, no learning."""
        if not admission.semantic:
            return []
        vector = np.asarray(self._embedder.embed([admission.text])[0], dtype=np.float32)
        with self._lock:
            partition = self._partitions.get(admission.partition)
            if partition is None:
                return []
            found = self._index.search(vector, partition, k)
            return [(self._store.entries[e].text, s) for e, s in found if e in self._store.entries]

    # Lookup -------------------------------------------------------------------------

    def _lookup(self, admission: Admission, given: Vectors | None = None) -> Hit | None:
        with self._lock:
            self._expire()
            exact = self._exact_entry(admission)
            if exact is not None:
                return self._hit(exact, 1.0)
            if not admission.semantic or admission.partition not in self._partitions:
                return None
        vector = self._vector(admission, learn=True, given=given)
        with self._lock:
            partition = self._partitions.get(admission.partition)
            if partition is None:
                return None
            for candidate, similarity in self._index.search(vector, partition, CANDIDATES):
                if similarity < self.config.threshold:
                    break
                entry = self._store.entries.get(candidate)
                if entry is None:
                    continue
                reason = guard.check(admission.text, entry.text)
                if reason is not None:
                    self._series.rejections.labels(reason).inc()
                    continue
                return self._hit(entry, similarity)
        return None

    def _exact_entry(self, admission: Admission) -> Entry | None:
        partition = self._partitions.get(admission.partition)
        if partition is None:
            return None
        found = self._store.exact.get(exact_hash(partition, admission.exact))
        entry = self._store.entries.get(found) if found is not None else None
        if entry is None or exact_key(entry.text) != admission.exact:
            return None
        return entry

    def _hit(self, entry: Entry, similarity: float) -> Hit:
        self._store.hit(entry)
        self._reps.hit(entry.cluster, entry.id)
        return Hit(
            payload=unpack(entry),
            similarity=min(1.0, similarity),
            age_seconds=max(0.0, self._clock() - entry.created),
            matched_text=entry.text,
        )

    def _vector(
        self, admission: Admission, *, learn: bool, given: Vectors | None = None
    ) -> Vectors:
        """The query's embedding: ``given``, or remembered from the lookup, else computed
        (unlocked); remembered for the store that follows a lookup."""
        key = (admission.partition, admission.exact)
        if given is None:
            with self._lock:
                remembered = self._pending.pop(key, None)
            if remembered is not None:
                return remembered
            given = self._embedder.embed([admission.text])[0]
        vector: Vectors = np.asarray(given, dtype=np.float32)
        with self._lock:
            self._pending[key] = vector
            while len(self._pending) > PENDING_EMBEDDINGS:
                self._pending.popitem(last=False)
            if learn:
                self._learn(vector)
        return vector

    # Store ---------------------------------------------------------------------------

    def _capacity_bytes(self) -> float:
        return float(self.config.max_bytes) if self.config.max_bytes else float("inf")

    def _replace_exact(self, admission: Admission) -> None:
        existing = self._exact_entry(admission)
        if existing is not None:
            self._remove(existing)

    def _insert(
        self,
        admission: Admission,
        stored: bytes,
        compressed: bool,
        cost: float,
        size: int,
        vector: Vectors | None,
    ) -> None:
        partition = self._partition_number(admission.partition)
        self._sequence += 1
        entry = Entry(
            id=entry_id(partition, self._sequence),
            partition=partition,
            text=admission.text,
            payload=stored,
            compressed=compressed,
            model=admission.model,
            revision=admission.revision,
            adapter_digest=admission.adapter_digest,
            created=self._clock(),
            nbytes=size,
            cost=cost,
        )
        self._store.add(entry, exact_hash(partition, admission.exact))
        self._partition_sizes[partition] = self._partition_sizes.get(partition, 0) + 1
        if vector is not None:
            if self._kmeans.k == 0:
                self._learn(vector)
            entry.cluster = int(self._kmeans.nearest(vector[None, :])[0][0])
            self._index.add(entry.id, vector, entry.cluster)
            self._reps.add(entry.cluster, entry.id)

    def _partition_number(self, key: str) -> int:
        number = self._partitions.get(key)
        if number is None:
            self._next_partition += 1
            number = self._next_partition
            self._partitions[key] = number
            self._partition_keys[number] = key
        return number

    def _learn(self, vector: Vectors) -> None:
        self._kmeans.observe(vector)
        if self._kmeans.version != self._kmeans_version:
            self._kmeans_version = self._kmeans.version
            self._index.set_centroids(self._kmeans.centroids)
            self._series.clusters.set(self._kmeans.k)
            self._refile_some()

    def _refile_some(self) -> None:
        """Move a few entries to their nearest centroid now that centroids have moved.

        A full sweep over all entries happens every len(entries) / REFILE_PER_STEP steps;
        meanwhile `nprobe` > 1 finds entries whose centroid drifted.
        """
        if not self._refile:
            self._refile = [e.id for e in self._store if e.cluster >= 0]
        batch = [e for e in self._refile[-REFILE_PER_STEP:] if e in self._store.entries]
        del self._refile[-REFILE_PER_STEP:]
        if not batch:
            return
        labels, _ = self._kmeans.nearest(self._index.vectors(batch))
        for entry_no, label in zip(batch, labels, strict=True):
            entry = self._store.entries[entry_no]
            if int(label) != entry.cluster:
                self._reps.remove(entry.cluster, entry.id)
                self._index.move(entry.id, int(label))
                entry.cluster = int(label)
                self._reps.add(entry.cluster, entry.id)

    # Removal -------------------------------------------------------------------------

    def _remove(self, entry: Entry) -> None:
        self._store.remove(entry, exact_hash(entry.partition, exact_key(entry.text)))
        if entry.cluster >= 0:
            self._index.remove(entry.id)
            self._reps.remove(entry.cluster, entry.id)
        left = self._partition_sizes[entry.partition] - 1
        if left:
            self._partition_sizes[entry.partition] = left
        else:
            del self._partition_sizes[entry.partition]
            del self._partitions[self._partition_keys.pop(entry.partition)]

    def _expire(self) -> None:
        horizon = self._clock() - self.config.ttl_seconds
        expired = 0
        while (oldest := self._store.oldest()) is not None and oldest.created <= horizon:
            self._remove(oldest)
            expired += 1
        if expired:
            self._series.expired.inc(expired)
            self._update_gauges()

    def _enforce_capacity(self) -> None:
        max_bytes = self._capacity_bytes()
        while len(self._store) > self.config.max_entries or self._store.nbytes > max_bytes:
            over_entries = len(self._store) > self.config.max_entries
            reason = Eviction.MAX_ENTRIES if over_entries else Eviction.MAX_BYTES
            victim = self._store.least_valuable()
            if victim is None:
                break
            self._remove(victim)
            self._metrics.evictions.labels(TIER, reason).inc()

    def _update_gauges(self) -> None:
        self._metrics.entries.labels(TIER).set(len(self._store))
        self._metrics.bytes.labels(TIER).set(self._store.nbytes)


__all__ = ["Hit", "Probe", "SemanticCache", "SemanticStats"]
