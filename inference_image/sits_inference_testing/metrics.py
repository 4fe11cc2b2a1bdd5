"""Reading a Prometheus ``/metrics`` page (the gateway's or the sidecar's) in tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    value: float


def parse_metrics(text: str) -> list[Series]:
    """Every sample of a Prometheus text exposition, with its full name (``_bucket``...)."""
    return [
        Series(sample.name, dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def metric_value(series: list[Series], name: str, **labels: str) -> float:
    """Sum of the samples named ``name`` whose labels include ``labels``."""
    return sum(
        s.value
        for s in series
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


async def scrape(session: aiohttp.ClientSession, base_url: str) -> list[Series]:
    async with session.get(f"{base_url}/metrics") as response:
        response.raise_for_status()
        return parse_metrics(await response.text())
