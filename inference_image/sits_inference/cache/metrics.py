"""The sidecar's Prometheus metrics: one registry, `sits_cache_*` names, a `tier` label.

Why one shared object: the three tiers answer the same questions (did it hit, how long
did the lookup take, how much does it hold, what did it throw away), and operators want
one dashboard that compares them. The series common to every tier live here, labelled
`tier` = `semantic` | `vector` | `lora` (``Tier``); a tier registers series only it has (for example
rejected near-matches, resident inverted lists, adapter loads) on `CacheMetrics.registry`
with the same `sits_cache_` prefix. vLLM's own `vllm:*` names are never reused.
"""

from __future__ import annotations

import enum
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Tier(enum.StrEnum):
    """The ``tier`` label: one word per tier, as in the settings (``SITS_CACHE_<TIER>_*``),
    the packages (``cache/<tier>/``) and the SitsDeployment (``cache.semantic``,
    ``cache.vectorIndex``, ``cache.lora``)."""

    SEMANTIC = "semantic"  # L1
    VECTOR = "vector"  # L2
    LORA = "lora"  # L3


class Eviction(enum.StrEnum):
    """Why a tier gave something up (``reason`` of ``sits_cache_evictions_total``)."""

    MAX_ENTRIES = "max_entries"  # L1: over its entry limit
    MAX_BYTES = "max_bytes"  # L1: over its memory limit
    COLD = "cold"  # L2: an inverted list no longer hot
    CAPACITY = "capacity"  # L3: a slot was needed for another adapter
    STALE_VERSION = "stale_version"  # L3: an older version of an adapter


# Lookups are meant to take well under 20 ms; the tail buckets catch cold pages and
# adapter loads, which take seconds.
LOOKUP_BUCKETS: Final = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


class CacheMetrics:
    """Series shared by all tiers; construct once per sidecar process (or per test)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.hits = Counter(
            "sits_cache_hits", "Lookups answered by the tier.", ["tier"], registry=r
        )
        self.misses = Counter(
            "sits_cache_misses", "Lookups the tier could not answer.", ["tier"], registry=r
        )
        self.lookup_seconds = Histogram(
            "sits_cache_lookup_duration_seconds",
            "Time to decide hit or miss (L1: embedding and search).",
            ["tier"],
            buckets=LOOKUP_BUCKETS,
            registry=r,
        )
        self.entries = Gauge(
            "sits_cache_entries", "Entries held by the tier.", ["tier"], registry=r
        )
        self.bytes = Gauge(
            "sits_cache_bytes", "Approximate memory held by the tier.", ["tier"], registry=r
        )
        self.evictions = Counter(
            "sits_cache_evictions",
            "Entries removed to respect a capacity limit (not TTL expiry).",
            ["tier", "reason"],
            registry=r,
        )
        for tier in Tier:
            # Zero-initialise so that rate() works from the first scrape.
            self.hits.labels(tier)
            self.misses.labels(tier)
            self.entries.labels(tier).set(0)
            self.bytes.labels(tier).set(0)
