"""Helpers for tests and benchmarks of the gateway: read its /metrics, drive bounded load.

Shipped with the package (not under tests/) so benchmarks and other test suites reuse the
same readers; nothing here runs in production.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from .proxy import VARIANT_HEADER


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


async def bounded_load(
    session: aiohttp.ClientSession,
    url: str,
    bodies: list[dict[str, Any]],
    *,
    headers: list[dict[str, str]] | None = None,
    concurrency: int = 16,
    time_limit_s: float = 120.0,
) -> Counter[str]:
    """POST every body once (at most ``concurrency`` in flight, all within the limit);
    count the variants that answered (``x-sits-variant``) and the statuses as ``"<code>"``."""
    gate = asyncio.Semaphore(concurrency)
    counts: Counter[str] = Counter()

    async def one(index: int) -> None:
        async with gate:
            extra = headers[index] if headers else None
            async with session.post(url, json=bodies[index], headers=extra) as response:
                await response.read()
                counts[response.headers.get(VARIANT_HEADER, "-")] += 1
                counts[str(response.status)] += 1

    async with asyncio.timeout(time_limit_s):
        await asyncio.gather(*(one(i) for i in range(len(bodies))))
    return counts


async def eventually(
    check: Callable[[], Awaitable[bool]], *, within: float, step: float = 0.02
) -> float:
    """Poll ``check`` until it holds; return the seconds it took, fail after ``within``."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    for _ in range(int(within / step) + 1):
        if await check():
            return loop.time() - started
        await asyncio.sleep(step)
    raise AssertionError(f"condition not met within {within} s")


async def read_until_error(response: aiohttp.ClientResponse) -> tuple[bytes, Exception | None]:
    """The body received, and the error that cut it short (None: it ended cleanly)."""
    received = bytearray()
    try:
        async for chunk in response.content.iter_any():
            received += chunk
    except aiohttp.ClientError as err:
        return bytes(received), err
    return bytes(received), None
