"""SLI samples from Prometheus, one query per rule for all variants of a deployment.

prometheus-api-client is synchronous (requests); every query runs in a worker thread
with a timeout so a slow Prometheus never blocks Kopf's event loop. Failures become a
RuleSamples with `error` set (the engine's Error verdict, which freezes the rollout);
empty results and NaN become missing or NaN samples (the engine's NoData).

Queries select one ``source`` of the request metrics (``{{source}}`` in a policy's
template, and the minimum-traffic count): the gateway and the sidecars export the same
requests, and their sum would count each one twice.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any, Protocol

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from sits_operator.model.analysis import RuleSamples, Sample
from sits_operator.model.durations import format_duration
from sits_operator.model.policy import Rule
from sits_operator.model.spec import MetricSource

REQUESTS_QUERY = (
    'sum by (variant) (increase(sits_requests_total{{namespace="{namespace}",'
    'sits_deployment="{deployment}",source="{source}"}}[{window}]))'
)


@dataclass(frozen=True)
class Target:
    """Which deployment's series to select, and from which source (gateway or sidecar)."""

    namespace: str
    deployment: str
    variants: tuple[str, ...]
    source: MetricSource = MetricSource.GATEWAY


class MetricsProvider(Protocol):
    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        """The rule's value and request count per variant, or an error."""


def render_query(template: str, target: Target, window_seconds: float, variant: str = "") -> str:
    """Fill the policy's placeholders; values are label values, quotes are escaped."""
    values = {
        "namespace": target.namespace,
        "deployment": target.deployment,
        "variant": variant,
        "source": target.source.value,
        "window": format_duration(window_seconds),
    }
    query = template
    for key, value in values.items():
        query = query.replace("{{" + key + "}}", value.replace('"', '\\"'))
    return query


def _by_variant(result: list[dict[str, Any]]) -> dict[str, float]:
    values: dict[str, float] = {}
    for series in result:
        variant = series.get("metric", {}).get("variant")
        if variant is None:
            continue
        try:
            values[str(variant)] = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            values[str(variant)] = math.nan
    return values


class PrometheusProvider:
    """Real provider on prometheus-api-client."""

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float = 5.0):
        self._timeout = timeout
        self._client = PrometheusConnect(
            url=url, headers=headers, retry=Retry(total=0), timeout=math.ceil(timeout)
        )

    async def _query(self, query: str) -> dict[str, float]:
        result = await asyncio.wait_for(
            asyncio.to_thread(self._client.custom_query, query), timeout=self._timeout + 1
        )
        return _by_variant(result)

    async def _values(self, rule: Rule, target: Target) -> dict[str, float]:
        if "{{variant}}" not in rule.query:
            return await self._query(render_query(rule.query, target, rule.window_seconds))
        values: dict[str, float] = {}
        for variant in target.variants:  # templates that select one variant: one query each
            query = render_query(rule.query, target, rule.window_seconds, variant)
            found = await self._query(query)
            values[variant] = next(iter(found.values()), math.nan)
        return values

    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        count_query = REQUESTS_QUERY.format(
            namespace=target.namespace,
            deployment=target.deployment,
            source=target.source.value,
            window=format_duration(rule.window_seconds),
        )
        try:
            values = await self._values(rule, target)
            counts = await self._query(count_query)
        except (requests.RequestException, PrometheusApiClientException, TimeoutError) as exc:
            return RuleSamples(rule=rule.name, error=f"{type(exc).__name__}: {exc}"[:300])
        samples = {
            variant: Sample(value=value, requests=counts.get(variant, 0.0))
            for variant, value in values.items()
        }
        return RuleSamples(rule=rule.name, by_variant=samples)


class NoopProvider:
    """No metrics backend: every rule has no data (the rollout holds)."""

    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        return RuleSamples(rule=rule.name)


def make_provider(url: str | None, *, headers: dict[str, str] | None = None) -> MetricsProvider:
    return PrometheusProvider(url, headers=headers) if url else NoopProvider()
