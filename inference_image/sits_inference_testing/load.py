"""Driving a proxy in tests and benchmarks: bounded load, waiting for a condition, and
reading a stream that may be cut short."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from sits_inference.gateway.proxy import VARIANT_HEADER


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
