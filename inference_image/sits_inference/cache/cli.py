"""``sits-cache``: run the cache sidecar from ``SITS_CACHE_*`` variables or flags.

In a pod the operator sets the variables (see README.md beside this file). By hand::

    sits-cache --listen 127.0.0.1:8080 --upstream http://127.0.0.1:8000 --revision r1

A bad setting exits with status 2 and one line naming the variable or flag; nothing is
served with a value nobody asked for.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

from ..openai.serving import run_loop, stop_on_signals
from .metrics import CacheMetrics
from .settings import SettingsError, SidecarSettings, load_settings
from .tiers import build_tiers

log = logging.getLogger("sits_inference.cache")


async def serve(settings: SidecarSettings, stop: asyncio.Event | None = None) -> None:
    """Load the tiers, serve until ``stop`` is set (or SIGINT/SIGTERM), then close."""
    from .app import start_sidecar  # after logging is set up: it imports the tiers

    stop = stop or asyncio.Event()
    stop_on_signals(stop)
    metrics = CacheMetrics()
    log.info("loading cache tiers")
    tiers = await asyncio.to_thread(build_tiers, settings, metrics)
    running = await start_sidecar(settings, tiers, metrics)
    log.info(
        "sits-cache listening on %s, vLLM at %s (revision %r; L1 %s, L2 %s, L3 %s)",
        running.url,
        settings.upstream,
        settings.revision,
        "on" if tiers.semantic else "off",
        "on" if tiers.vector else "off",
        f"{len(settings.lora_adapters)} adapters" if tiers.lora else "off",
    )
    try:
        await stop.wait()
    finally:
        await running.stop()


def run(settings: SidecarSettings) -> None:
    run_loop(serve(settings))


def main(argv: Sequence[str] | None = None) -> None:
    try:
        settings = load_settings(argv)
    except SettingsError as err:
        print(f"sits-cache: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        run(settings)
    except SettingsError as err:  # a tier's own configuration check, at start
        log.error("cannot start: %s", err)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
