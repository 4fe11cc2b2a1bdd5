"""Serving an aiohttp application the way both proxies do, and running their event loop."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any

from aiohttp import web


async def start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on ``host:port`` (0: any free port); the runner and the base URL.

    ``handler_cancellation``: a client that goes away cancels its handler, which closes
    the upstream connection, which is how vLLM learns to stop generating.
    """
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=1024).start()
    bound = runner.addresses[0][1]
    return runner, f"http://{host}:{bound}"


def stop_on_signals(stop: asyncio.Event) -> None:
    """SIGINT and SIGTERM set ``stop`` (where the loop supports signal handlers)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """uvloop roughly doubles what one core proxies; plain asyncio still works without it."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)
