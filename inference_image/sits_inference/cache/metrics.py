"""The sidecar's Prometheus metrics: one registry, `sits_cache_*` names, a `tier` label.

Why one shared object: the three tiers answer the same questions (did it hit, how long
did the lookup take, how much does it hold, what did it throw away), and operators want
one dashboard that compares them. The series common to every tier live here, labelled
`tier` = `semantic` | `vector` | `lora`; a tier registers series only it has (for example
rejected near-matches, resident inverted lists, adapter loads) on `CacheMetrics.registry`
with the same `sits_cache_` prefix. vLLM's own `vllm:*` names are never reused.
"""

from __future__ import annotations

from typing import Final, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

Tier = Literal["semantic", "vector", "lora"]
TIERS: Final[tuple[Tier, ...]] = ("semantic", "vector", "lora")

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
        for tier in TIERS:
            # Zero-initialise so that rate() works from the first scrape.
            self.hits.labels(tier)
            self.misses.labels(tier)
            self.entries.labels(tier).set(0)
            self.bytes.labels(tier).set(0)
