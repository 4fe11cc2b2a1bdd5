"""Sidecar-level series beside the tiers' own, on the same registry and prefix.

Why separate from ``CacheMetrics``: those count what a tier decided (L1 hit or miss,
lookup time); these count what happened to each HTTP request (served from cache, sent to
vLLM, skipped and why), the state of vLLM as the sidecar sees it, and invalidations. The
per-outcome latency histogram is what shows a hit's benefit on a dashboard.
"""

from __future__ import annotations

import enum
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class CacheOutcome(enum.StrEnum):
    """What the sidecar did with a chat or completion request (``x-sits-cache`` for the
    first four; the ``outcome`` label of ``sits_cache_requests_total``). Not the request
    contract's ``Outcome`` (success or error, ``sits_requests_total``), which the sidecar
    records beside it."""

    HIT = "hit"
    MISS = "miss"
    BYPASS = "bypass"
    SKIP = "skip"
    ERROR = "error"
    REJECTED = "rejected"
    CANCELLED = "cancelled"


class UpstreamFailure(enum.StrEnum):
    """Why vLLM could not serve a request (``sits_cache_upstream_errors_total{kind}``)."""

    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    STREAM_BROKEN = "stream_broken"


class StoreResult(enum.StrEnum):
    """What became of a completed miss offered to L1 (``sits_cache_stores_total{result}``)."""

    STORED = "stored"
    NOT_STORABLE = "not_storable"
    FAILED = "failed"


class CoalesceResult(enum.StrEnum):
    """What a request waiting for an identical one found (``sits_cache_coalesced_total``)."""

    HIT = "hit"
    MISS = "miss"
    TIMEOUT = "timeout"


class Invalidation(enum.StrEnum):
    """Why L1 entries were dropped (``sits_cache_invalidated_entries_total{reason}``)."""

    ADMIN = "admin"
    MODEL_CHANGED = "model_changed"


DURATION_BUCKETS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class SidecarMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.requests = Counter(
            "sits_cache_requests",
            "Chat and completion requests by what the sidecar did: hit (served from L1), "
            "miss (sent to vLLM, stored if complete), bypass (x-sits-cache: bypass), skip "
            "(not cacheable), error (vLLM unavailable or failed), rejected (malformed), "
            "cancelled (the client left before the answer was decided).",
            ["outcome"],
            registry=r,
        )
        self.skipped = Counter(
            "sits_cache_skipped", "Requests not looked up, by reason.", ["reason"], registry=r
        )
        self.duration = Histogram(
            "sits_cache_request_duration_seconds",
            "Time from request to the last byte of the response, by outcome.",
            ["outcome"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.upstream_errors = Counter(
            "sits_cache_upstream_errors", "Requests vLLM could not serve.", ["kind"], registry=r
        )
        self.replayed_streams = Counter(
            "sits_cache_replayed_streams", "Hits replayed as server-sent events.", registry=r
        )
        self.stores = Counter(
            "sits_cache_stores",
            "Completed misses offered to L1: stored, not storable (error, truncated, "
            "unsupported fields), or failed in L1.",
            ["result"],
            registry=r,
        )
        self.upstream_up = Gauge(
            "sits_cache_upstream_up", "1 while vLLM's /health answers 200.", registry=r
        )
        self.upstream_recoveries = Counter(
            "sits_cache_upstream_recoveries", "Times vLLM came back after being down.", registry=r
        )
        self.invalidations = Counter(
            "sits_cache_invalidated_entries",
            "L1 entries removed by invalidation: admin (endpoint) or model_changed "
            "(vLLM came back serving a different model).",
            ["reason"],
            registry=r,
        )
        self.coalesced = Counter(
            "sits_cache_coalesced",
            "Requests that waited for an identical request already sent to vLLM, by what "
            "they found: hit (its answer), miss (not stored: they went to vLLM), timeout.",
            ["result"],
            registry=r,
        )
        self.leading = Gauge(
            "sits_cache_coalescing_leaders",
            "Distinct cacheable requests at vLLM right now that identical ones would wait for.",
            registry=r,
        )
        for found in CoalesceResult:
            self.coalesced.labels(found)
        for outcome in CacheOutcome:
            self.requests.labels(outcome)
        for kind in UpstreamFailure:
            self.upstream_errors.labels(kind)
        for stored in StoreResult:
            self.stores.labels(stored)
