"""L2's own `sits_cache_*` series, beside the shared ones labelled tier="vector".

Hit and miss (the shared `sits_cache_hits`/`sits_cache_misses`, tier="vector"): a query is
a hit when every inverted list it touched was resident (warmed, and locked where the
process may lock memory) when it ran, so it paid no disk read for index data; otherwise a
miss. For HNSW the whole index is warmed at start, so its queries count as hits once the
warm-up has finished. The per-list view of the same question is
`sits_cache_vector_list_accesses{residency="resident"|"cold"}`.

`sits_cache_lookup_duration_seconds{tier="vector"}` is the index search alone;
`sits_cache_vector_retrieval_duration_seconds` is the whole request (embedding the query
text, searching, reading documents), labelled by `input` = text | vector.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from ..metrics import LOOKUP_BUCKETS, CacheMetrics, Eviction, Tier

TIER = Tier.VECTOR


class VectorMetrics:
    def __init__(self, shared: CacheMetrics) -> None:
        self.shared = shared
        r = shared.registry
        self.available = Gauge(
            "sits_cache_vector_index_available",
            "1 while an index is open and serving, 0 while it is missing or unreadable.",
            registry=r,
        )
        self.info = Gauge(
            "sits_cache_vector_index_info",
            "The open index (value 1): kind and content digest.",
            ["kind", "digest"],
            registry=r,
        )
        self.lists = Gauge(
            "sits_cache_vector_lists", "Inverted lists in the open index (0 for HNSW).", registry=r
        )
        self.resident_lists = Gauge(
            "sits_cache_vector_resident_lists",
            "Inverted lists kept resident (hot over the window, or preloaded at start).",
            registry=r,
        )
        self.resident_bytes = Gauge(
            "sits_cache_vector_resident_bytes",
            "Bytes of index, vector and document files kept resident (lists or whole HNSW).",
            registry=r,
        )
        self.locked_bytes = Gauge(
            "sits_cache_vector_locked_bytes",
            "Of the resident bytes, those pinned with mlock (0 without CAP_IPC_LOCK).",
            registry=r,
        )
        self.preloaded_lists = Gauge(
            "sits_cache_vector_preloaded_lists",
            "Lists made resident at start from the saved access statistics.",
            registry=r,
        )
        self.warmup_seconds = Gauge(
            "sits_cache_vector_warmup_duration_seconds",
            "Duration of the last warm-up at start: hot-list preload, or HNSW warm-up.",
            ["phase"],
            registry=r,
        )
        self.list_accesses = Counter(
            "sits_cache_vector_list_accesses",
            "Inverted lists scanned by queries, by whether they were resident.",
            ["residency"],
            registry=r,
        )
        self.promotions = Counter(
            "sits_cache_vector_list_promotions",
            "Lists made resident after start because they became hot.",
            registry=r,
        )
        self.retrieval_seconds = Histogram(
            "sits_cache_vector_retrieval_duration_seconds",
            "POST /v1/retrieve from parsed request to answer (embedding, search, documents).",
            ["input"],
            buckets=LOOKUP_BUCKETS,
            registry=r,
        )
        self.requests = Counter(
            "sits_cache_vector_requests",
            "POST /v1/retrieve requests by HTTP status code.",
            ["code"],
            registry=r,
        )
        for residency in ("resident", "cold"):
            self.list_accesses.labels(residency)
        for phase in ("preload", "hnsw"):
            self.warmup_seconds.labels(phase).set(0)

    def query(self, hit: bool, seconds: float) -> None:
        (self.shared.hits if hit else self.shared.misses).labels(TIER).inc()
        self.shared.lookup_seconds.labels(TIER).observe(seconds)

    def residency(self, lists: int, resident_bytes: int, locked_bytes: int) -> None:
        self.resident_lists.set(lists)
        self.resident_bytes.set(resident_bytes)
        self.locked_bytes.set(locked_bytes)
        self.shared.bytes.labels(TIER).set(resident_bytes)

    def demoted(self, count: int) -> None:
        if count:
            self.shared.evictions.labels(TIER, Eviction.COLD).inc(count)
