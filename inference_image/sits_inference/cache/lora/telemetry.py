"""The L3 tier's own ``sits_cache_lora_*`` series, next to the shared tier="lora" ones.

Shared (``CacheMetrics``, tier="lora"): hits (adapter resident when the request arrived),
misses, lookup duration (time a request waited for its adapter), entries (resident
adapters), bytes (their size on disk), evictions (reason="capacity" or "stale_version").
"""

from __future__ import annotations

import enum
from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from ..metrics import LOOKUP_BUCKETS, CacheMetrics, Eviction, Tier

TIER: Final = Tier.LORA


class LoadOutcome(enum.StrEnum):
    """How a load through vLLM's runtime API ended (``sits_cache_lora_loads_total``)."""

    SUCCESS = "success"
    REJECTED = "rejected"  # vLLM refused it (bad files, wrong base model)
    TIMEOUT = "timeout"
    UNREACHABLE = "unreachable"  # vLLM was not there


class LoraMetrics:
    """Series only the LoRA tier has; registered once per ``CacheMetrics`` registry."""

    def __init__(self, shared: CacheMetrics) -> None:
        self.shared = shared
        r = shared.registry
        self.resident = Gauge(
            "sits_cache_lora_resident_adapters",
            "Adapters loaded in vLLM by the residency manager (pinned included).",
            registry=r,
        )
        self.loads = Counter(
            "sits_cache_lora_loads",
            "Adapter loads through vLLM's runtime API, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.load_seconds = Histogram(
            "sits_cache_lora_load_duration_seconds",
            "Duration of one successful adapter load call.",
            buckets=LOOKUP_BUCKETS,
            registry=r,
        )
        self.waiting = Gauge(
            "sits_cache_lora_waiting_requests",
            "Requests waiting for their adapter to be loaded (or for a free slot).",
            registry=r,
        )
        self.in_flight = Gauge(
            "sits_cache_lora_in_flight_requests",
            "Requests holding an adapter lease (their adapter cannot be evicted).",
            registry=r,
        )
        self.refreshes = Counter(
            "sits_cache_lora_refreshes",
            "One-token requests that kept a resident adapter ahead of vLLM's worker LRU.",
            registry=r,
        )
        self.reapplied = Counter(
            "sits_cache_lora_reapplied",
            "Adapters loaded again after vLLM lost them (restart).",
            registry=r,
        )
        for outcome in LoadOutcome:
            self.loads.labels(outcome)
        shared.evictions.labels(TIER, Eviction.CAPACITY)
        shared.evictions.labels(TIER, Eviction.STALE_VERSION)

    def hit(self, waited_s: float, *, hit: bool) -> None:
        (self.shared.hits if hit else self.shared.misses).labels(TIER).inc()
        self.shared.lookup_seconds.labels(TIER).observe(waited_s)

    def evicted(self, reason: Eviction) -> None:
        self.shared.evictions.labels(TIER, reason).inc()

    def set_residency(self, count: int, size: int) -> None:
        self.resident.set(count)
        self.shared.entries.labels(TIER).set(count)
        self.shared.bytes.labels(TIER).set(size)
