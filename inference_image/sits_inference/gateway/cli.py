"""``sits-gateway``: run the gateway from flags or ``SITS_GATEWAY_*`` variables.

Inside a cluster::

    sits-gateway --source kubernetes --namespace demo --deployment chat --host 0.0.0.0

Outside (a file of endpoints and weights, reloaded when it changes)::

    sits-gateway --routes-file routes.yaml --port 8080
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ..openai.serving import run_loop, stop_on_signals
from .app import start_gateway
from .config import GatewayConfig, parse_config
from .sources import RoutingSource
from .sources.static import StaticFileSource
from .table import TableError
from .telemetry import Probes

log = logging.getLogger("sits_inference.gateway")

# Young-generation GC threshold while serving (CPython's default: 700). The count is net
# of frees, so it follows the objects of the requests in flight: at 64 concurrent requests
# the default ran a young collection every ~20 requests; 10,000 keeps at most a few MB of
# cyclic garbage waiting and makes young collections rare.
GC_YOUNG_THRESHOLD = 10_000


def tune_gc() -> None:
    """Once the gateway is up: freeze what start-up made and collect young objects rarely.

    A full collection walks every tracked object, ~45,000 of them left by the imports
    (OpenTelemetry, aiohttp, yaml): 15-30 ms on a 2-core machine, far more when memory is
    contended, and every request in flight waits for it. Frozen, those objects are never
    walked again (they live as long as the process anyway): with the freeze, the worst
    request of a quiet 2 s round at 500 requests/s took 2.4-3.3 ms, without it 5.8-8.2 ms
    (benchmarks/gateway_proxy.py's setting; docs/benchmarks.md).
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def make_source(config: GatewayConfig) -> RoutingSource:
    """The factory keyed by ``--source``."""
    if config.source == "kubernetes":
        if not (config.namespace and config.deployment):
            raise ValueError("the kubernetes source needs a namespace and a deployment")
        from .sources.kube import KubernetesSource  # kubernetes_asyncio only when used

        return KubernetesSource(
            namespace=config.namespace, deployment=config.deployment, kubeconfig=config.kubeconfig
        )
    if not config.routes_file:
        raise ValueError("the static source needs a routes file")
    return StaticFileSource(config.routes_file)


def make_tracer_provider(config: GatewayConfig) -> TracerProvider | None:
    """An SDK provider exporting OTLP/HTTP in batches when configured; None (no spans at
    all, the cheapest path) otherwise."""
    if not config.otlp_endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "sits-gateway"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(config.otlp_endpoint)))
    return provider


async def serve(config: GatewayConfig, stop: asyncio.Event | None = None) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM)."""
    stop = stop or asyncio.Event()
    stop_on_signals(stop)
    provider = make_tracer_provider(config)
    tracer = provider.get_tracer("sits.gateway") if provider else None
    probes = Probes(tracer=tracer, genai_metrics=config.genai_metrics)
    running = await start_gateway(config, make_source(config), probes=probes)
    tune_gc()
    log.info("sits-gateway listening on %s (source: %s)", running.url, config.source)
    try:
        await stop.wait()
        log.info("draining for %.1f s", config.drain_s)
        await running.drain(config.drain_s)
    finally:
        await running.stop()
        if provider is not None:
            provider.shutdown()  # flushes the spans still batched


def run(config: GatewayConfig) -> None:
    run_loop(serve(config))


def main(argv: Sequence[str] | None = None) -> None:
    config = parse_config(argv)
    logging.basicConfig(
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        run(config)
    except TableError as err:  # a routes file that cannot serve: say why, no traceback
        log.error("cannot start: %s", err)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
