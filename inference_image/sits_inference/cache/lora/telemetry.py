"""The L3 tier's own ``sits_cache_lora_*`` series, next to the shared tier="lora" ones.

Shared (``CacheMetrics``, tier="lora"): hits (adapter resident when the request arrived),
misses, lookup duration (time a request waited for its adapter), entries (resident
adapters), bytes (their size on disk), evictions (reason="capacity" or "stale_version").
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge, Histogram

from ..metrics import LOOKUP_BUCKETS, CacheMetrics

TIER: Final = "lora"
LOAD_OUTCOMES: Final = ("success", "rejected", "timeout", "unreachable")


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
        for outcome in LOAD_OUTCOMES:
            self.loads.labels(outcome)
        shared.evictions.labels(TIER, "capacity")
        shared.evictions.labels(TIER, "stale_version")

    def hit(self, waited_s: float, *, hit: bool) -> None:
        (self.shared.hits if hit else self.shared.misses).labels(TIER).inc()
        self.shared.lookup_seconds.labels(TIER).observe(waited_s)

    def evicted(self, reason: str) -> None:
        self.shared.evictions.labels(TIER, reason).inc()

    def set_residency(self, count: int, size: int) -> None:
        self.resident.set(count)
        self.shared.entries.labels(TIER).set(count)
        self.shared.bytes.labels(TIER).set(size)
