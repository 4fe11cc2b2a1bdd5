"""The aiohttp application: admission (body, JSON, model), variant choice, and the routes.

Why aiohttp for both sides: one event loop, a server and a pooled client that both avoid
per-request allocations of sessions or threads, and a streaming API for request and
response bodies; on uvloop a single core proxies thousands of small requests per second.

Admission happens before a variant is chosen, so bad input never reaches (or is counted
against) a variant: 413 from the declared or the read length, 400 for a body that is not
a JSON object with a string ``model``, 404 for a model the routing table does not list,
503 when no variant with weight has a ready endpoint. These count in
``sits_gateway_rejected_total`` instead.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import hdrs, web

from ..openai.errors import ApiError
from ..openai.replies import metrics_reply
from ..openai.requests import Operation, read_body
from ..openai.serving import start_site
from . import errors
from .balance import Balancer, Pick
from .config import GatewayConfig
from .proxy import Forwarder, UpstreamSettings, error_response
from .request import InferenceRequest, parse_request
from .sources import HasOrigin, RoutingSource
from .table import RoutingTable, StickyPolicy
from .telemetry import Probes

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_MODELS_CREATED = int(time.time())
# The routing in force, read by the operator to put the applied weights into status.
ROUTING_PATH = "/sits/v1/routing"


class Gateway:
    """Routes and measures; owns the upstream session, not the source's lifecycle."""

    def __init__(
        self,
        config: GatewayConfig,
        source: RoutingSource,
        probes: Probes,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.source = source
        self.probes = probes
        self._rng = rng or random.Random()
        self._balancer = Balancer(source.current(), self._rng)
        probes.use_table(self._balancer.table)
        self._default_sticky = StickyPolicy(
            header=config.session_header.lower(), use_openai_user=config.use_openai_user
        )
        self._session: aiohttp.ClientSession | None = None
        self._forwarder: Forwarder | None = None
        self.draining = False

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(
            limit=self.config.pool_limit,
            limit_per_host=0,
            keepalive_timeout=self.config.upstream_keepalive_s,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # bytes pass through exactly as the upstream sent them
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
        )
        settings = UpstreamSettings(
            self.config.connect_timeout_s,
            self.config.upstream_timeout_s,
            self.config.upstream_keepalive_s,
        )
        self._forwarder = Forwarder(self._session, self.probes, settings)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.max_body_bytes)
        app.router.add_post("/v1/chat/completions", self._inference(Operation.CHAT))
        app.router.add_post("/v1/completions", self._inference(Operation.COMPLETION))
        app.router.add_post("/v1/embeddings", self._inference(Operation.EMBEDDINGS))
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get(ROUTING_PATH, self.routing)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_route("*", "/{tail:.*}", self.not_found)
        app.on_response_prepare.append(self._close_when_draining)
        return app

    async def _close_when_draining(
        self, request: web.Request, response: web.StreamResponse
    ) -> None:
        """While draining, every response ends its connection and says so (the header is
        set here as aiohttp has written its own by now): the client's next request opens a
        new connection, which the Service sends to a pod that stays."""
        if self.draining:
            response.force_close()
            response.headers[hdrs.CONNECTION] = "close"

    # -- routing -------------------------------------------------------------------------

    def balancer(self) -> Balancer:
        """The balancer of the current table, rebuilt only when the source swapped it."""
        table = self.source.current()
        if table is not self._balancer.table:
            self._balancer = Balancer(table, self._rng)
            self.probes.use_table(table)
        return self._balancer

    def session_key(
        self, request: web.Request, inference: InferenceRequest, table: RoutingTable
    ) -> str | None:
        sticky = table.sticky or self._default_sticky
        key = request.headers.get(sticky.header)
        if key:
            return key
        return inference.user if sticky.use_openai_user else None

    def choose(self, request: web.Request, inference: InferenceRequest) -> Pick:
        balancer = self.balancer()
        if not balancer.table.knows_model(inference.model):
            raise errors.unknown_model(inference.model)
        pick = balancer.pick(self.session_key(request, inference, balancer.table))
        if pick is None:
            raise errors.no_endpoint(balancer.table.deployment)
        return pick

    # -- handlers ------------------------------------------------------------------------

    def _inference(self, operation: Operation) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            started = time.perf_counter()
            try:
                inference = await self._admit(request, operation)
                pick = self.choose(request, inference)
            except ApiError as err:
                self.probes.rejected(err.status, err.code or err.type)
                return error_response(err)
            assert self._forwarder is not None, "Gateway.open() was not awaited"
            return await self._forwarder.forward(request, inference, pick, started)

        return handle

    async def _admit(self, request: web.Request, operation: Operation) -> InferenceRequest:
        raw = await read_body(request, self.config.max_body_bytes, errors.SERVER)
        return parse_request(raw, operation, add_stream_usage=self.config.stream_usage)

    async def models(self, request: web.Request) -> web.Response:
        """The models the routing table lists, in the OpenAI list format."""
        table = self.source.current()
        data = [
            {"id": name, "object": "model", "created": _MODELS_CREATED, "owned_by": "sits"}
            for name in sorted(table.models)
        ]
        return web.json_response({"object": "list", "data": data})

    async def health(self, request: web.Request) -> web.Response:
        """200 once the source has a table (even without endpoints: the gateway itself is
        healthy and answers 503 per request); 503 before, so it joins its Service late."""
        table = self.source.current()
        variants = [
            {"name": v.name, "weight": v.weight, "endpoints": len(v.endpoints)}
            for v in table.variants
        ]
        ready = self.source.ready and not self.draining
        body = {
            "status": "draining" if self.draining else "ok" if ready else "starting",
            "namespace": table.namespace,
            "deployment": table.deployment,
            "routable": list(self.balancer().routable),
            "variants": variants,
        }
        return web.json_response(body, status=200 if ready else 503)

    async def routing(self, request: web.Request) -> web.Response:
        """The weights this process applies now and where they came from (read-only).

        The operator asks every ready gateway pod and writes the weights into the
        SitsDeployment's status only when all of them report the same: the status then
        says what traffic does, not what was asked. ``weights`` lists every variant of the
        table, even at 0; ``routable`` those that get new requests now (weight and a ready
        endpoint).
        """
        table = self.source.current()
        origin = self.source.origin if isinstance(self.source, HasOrigin) else {}
        body = {
            "namespace": table.namespace,
            "deployment": table.deployment,
            "ready": self.source.ready,
            "weights": {v.name: v.weight for v in table.variants},
            "endpoints": {v.name: len(v.endpoints) for v in table.variants},
            "routable": list(self.balancer().routable),
            "origin": origin,
        }
        return web.json_response(body)

    async def metrics(self, request: web.Request) -> web.Response:
        self.balancer()  # gauges describe the table in force, even before any request
        return metrics_reply(self.probes.registry)

    async def not_found(self, request: web.Request) -> web.Response:
        return error_response(errors.unknown_path(request.path))


@dataclass
class RunningGateway:
    """A started gateway (for tests and tools): its URL, and how to stop it."""

    gateway: Gateway
    runner: web.AppRunner
    url: str

    async def drain(self, seconds: float) -> None:
        """Serve on for ``seconds``, closing each connection after its response and
        failing /health; what a terminating pod does once its endpoint left the Service."""
        self.gateway.draining = True
        await asyncio.sleep(seconds)

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.gateway.close()
        await self.gateway.source.close()
        self.gateway.probes.shutdown()


async def start_gateway(
    config: GatewayConfig,
    source: RoutingSource,
    *,
    probes: Probes | None = None,
    rng: random.Random | None = None,
) -> RunningGateway:
    """Start source, session and server on ``config.host:config.port`` (0: any free port)."""
    await source.start()
    gateway = Gateway(config, source, probes or Probes(genai_metrics=config.genai_metrics), rng=rng)
    await gateway.open()
    runner, url = await start_site(gateway.app(), config.host, config.port)
    return RunningGateway(gateway, runner, url)
