"""Reading the operator's own /metrics (handlers/metrics.py) in tests and benchmarks:
the Prometheus queries it sent and the lag of its analysis periods."""

from __future__ import annotations

import math
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

QUERIES = "sits_operator_prometheus_queries"
LAG = "sits_operator_evaluation_lag_seconds"


def scrape(address: str, timeout: float = 5) -> str:
    """The exposition of an operator started with --metrics-address `address` (loopback)."""
    assert address.startswith("127."), "only the local operator is scraped"
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as answer:
        return str(answer.read().decode())


def queries_sent(text: str) -> dict[str, float]:
    """Queries sent so far by `batched` label ("true", "false"), all policies together."""
    sent = {"true": 0.0, "false": 0.0}
    for family in text_string_to_metric_families(text):
        if family.name != QUERIES:
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                sent[sample.labels["batched"]] += sample.value
    return sent


def lag_buckets(text: str) -> list[tuple[float, float]]:
    """The lag histogram's cumulative (upper bound, count) pairs, +Inf last."""
    buckets = []
    for family in text_string_to_metric_families(text):
        if family.name == LAG:
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    buckets.append((float(sample.labels["le"]), sample.value))
    return sorted(buckets)


def bucket_quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the bucket holding the q-quantile (a bound, not an estimate:
    the true quantile is at most this); NaN with no observations."""
    total = buckets[-1][1] if buckets else 0.0
    if total == 0:
        return math.nan
    return next(bound for bound, count in buckets if count >= q * total)


def bucket_difference(
    after: list[tuple[float, float]], before: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Observations between two scrapes of the same histogram."""
    earlier = dict(before)
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in after]
