"""Ask the built-in gateway's pods which weights they apply (GET /sits/v1/routing).

The status shows these, not the operator's own decision (core/traffic.py decides what to
make of the answers). Every ready pod is asked at once with a short timeout: a pod that
does not answer in time counts as not applying, and the reconcile pass is never held up
for longer than the timeout. One Protocol, the HTTP implementation on httpx (shares the
event loop), and a factory, like the other adapters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from sits_operator.core.gateway import ROUTING_PATH
from sits_operator.model.observed import GatewayReport

# In-cluster the gateway answers from memory in about a millisecond; a second is plenty
# and bounds what an unreachable pod costs one reconcile pass.
TIMEOUT_SECONDS = 1.0


@dataclass(frozen=True)
class GatewayPod:
    name: str
    ip: str


class GatewayReader(Protocol):
    async def read(self, pods: Sequence[GatewayPod], *, port: int) -> tuple[GatewayReport, ...]:
        """One report per pod, in the order given; failures are reports with an error."""


def pod_url(pod: GatewayPod, port: int) -> str:
    host = f"[{pod.ip}]" if ":" in pod.ip else pod.ip
    return f"http://{host}:{port}{ROUTING_PATH}"


def parse_report(pod: str, body: Any) -> GatewayReport:
    """The report of one pod; a body without integer weights is an error, not weights."""
    weights = body.get("weights") if isinstance(body, dict) else None
    if not isinstance(weights, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in weights.values()
    ):
        return GatewayReport(pod, None, "answered without weights")
    if not body.get("ready", False):
        return GatewayReport(pod, None, "has no routing table yet")
    origin = body.get("origin")
    return GatewayReport(
        pod,
        {str(k): int(v) for k, v in weights.items()},
        origin=dict(origin) if isinstance(origin, dict) else {},
    )


class HttpGatewayReader:
    """The real reader: one pooled httpx client for every pod of every SitsDeployment."""

    def __init__(self, client: httpx.AsyncClient | None = None) -> None:
        self._client = client or httpx.AsyncClient(timeout=TIMEOUT_SECONDS)

    async def _one(self, pod: GatewayPod, port: int) -> GatewayReport:
        try:
            response = await self._client.get(pod_url(pod, port))
        except httpx.TimeoutException:
            return GatewayReport(pod.name, None, f"no answer within {TIMEOUT_SECONDS:g} s")
        except httpx.HTTPError as exc:
            return GatewayReport(pod.name, None, f"unreachable ({type(exc).__name__})")
        if response.status_code != 200:
            return GatewayReport(pod.name, None, f"answered HTTP {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            return GatewayReport(pod.name, None, "answered no JSON")
        return parse_report(pod.name, body)

    async def read(self, pods: Sequence[GatewayPod], *, port: int) -> tuple[GatewayReport, ...]:
        return tuple(await asyncio.gather(*(self._one(pod, port) for pod in pods)))

    async def close(self) -> None:
        await self._client.aclose()


def make_gateway_reader(enabled: bool) -> GatewayReader | None:
    """Factory: None (dry runs, tests without gateways) means the status is not read back."""
    return HttpGatewayReader() if enabled else None
