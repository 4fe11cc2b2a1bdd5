"""Traffic routers: where variant weights live, and how they are read back.

The engine decides from the weights the router reports (what traffic really does), not
from what the operator last wrote. One Protocol, the built-in router (the SITS gateway
follows the SitsDeployment's status and reports what it applies), the Gateway API router,
a no-op, and a factory.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sits_operator.adapters.gateway import GatewayPod, GatewayReader, HttpGatewayReader
from sits_operator.core.http_route import route_weights, with_route_weights
from sits_operator.core.naming import gateway_selector_labels
from sits_operator.core.traffic import agreed_weights
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, SitsDeploymentSpec

log = logging.getLogger("sits_operator.analysis")


class TrafficRouter(Protocol):
    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        """Weights traffic follows now; empty when the router has none yet."""

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        """Make traffic follow these weights."""


async def read_weights_back(
    router: TrafficRouter, owner: ObjectRef, spec: SitsDeploymentSpec
) -> dict[str, int] | None:
    """What the router reports traffic follows; None when the apiserver refused the read
    (the engine then decides from its stored weights, and nothing is written this pass)."""
    try:
        return await router.read_weights(owner, spec)
    except ApiException as exc:
        log.warning("reading weights back failed: %s", exc.reason)
        return None


class NoopRouter:
    """No router: weights are only recorded in status; reads report nothing."""

    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        return {}

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        return None


def _ready_pod(pod: Any) -> GatewayPod | None:
    """A pod with an address whose Ready condition is True (what the Service would use)."""
    status = pod.status
    if status is None or not status.pod_ip:
        return None
    ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])
    return GatewayPod(pod.metadata.name, status.pod_ip) if ready else None


class BuiltinRouter:
    """Weights the built-in gateway's pods report applying (GET /sits/v1/routing).

    The operator writes its decision to `status.traffic.weights`, which the gateway pods
    watch, so set_weights has nothing to do. read_weights asks every ready gateway pod
    (listed from the apiserver, not the watch cache) and returns their weights only when
    all of them agree; empty otherwise (no pod, one unreachable, a change half applied),
    and the engine then decides from its stored weights.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        reader: GatewayReader | None = None,
        port: int = OperatorSettings().gateway_port,
    ) -> None:
        self._core = client.CoreV1Api(api_client)
        self._reader = reader or HttpGatewayReader()
        self._port = port

    async def gateway_pods(self, owner: ObjectRef) -> list[GatewayPod]:
        selector = ",".join(f"{k}={v}" for k, v in gateway_selector_labels(owner.name).items())
        pods = await self._core.list_namespaced_pod(owner.namespace, label_selector=selector)
        return [ready for pod in pods.items if (ready := _ready_pod(pod)) is not None]

    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        reports = await self._reader.read(await self.gateway_pods(owner), port=self._port)
        return agreed_weights(reports) or {}

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        return None


GATEWAY_GROUP, GATEWAY_VERSION, HTTPROUTES = "gateway.networking.k8s.io", "v1", "httproutes"


class GatewayAPIRouter:
    """Weights in an existing HTTPRoute's backendRefs (Envoy Gateway, Istio, ...).

    The operator owns only the weights of backendRefs naming its variant Services; the
    route itself (parents, matches, filters) is the user's. Writes are replaces with the
    resourceVersion just read, so a concurrent edit makes the write fail (and the next
    pass retry) instead of being lost.
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        self._custom = client.CustomObjectsApi(api_client)

    @staticmethod
    def _services(owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, str]:
        return {f"{owner.name}-{v.name}": v.name for v in spec.variants}

    @staticmethod
    def _where(owner: ObjectRef, spec: SitsDeploymentSpec) -> tuple[str, str]:
        ref = spec.traffic.http_route
        if ref is None:
            raise ValueError("spec.traffic.httpRoute is required for the gatewayAPI router")
        return ref.namespace or owner.namespace, ref.name

    async def _get(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, Any]:
        namespace, name = self._where(owner, spec)
        route = await self._custom.get_namespaced_custom_object(
            GATEWAY_GROUP, GATEWAY_VERSION, namespace, HTTPROUTES, name
        )
        return dict(route)

    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        return route_weights(await self._get(owner, spec), self._services(owner, spec))

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        route = await self._get(owner, spec)
        services = self._services(owner, spec)
        if route_weights(route, services) == weights:
            return
        namespace, name = self._where(owner, spec)
        await self._custom.replace_namespaced_custom_object(
            GATEWAY_GROUP,
            GATEWAY_VERSION,
            namespace,
            HTTPROUTES,
            name,
            with_route_weights(route, services, weights),
        )


def make_router(kind: str, api_client: client.ApiClient | None) -> TrafficRouter:
    """Factory keyed by spec.traffic.router."""
    if api_client is None:
        return NoopRouter()
    if kind == "builtin":
        return BuiltinRouter(api_client)
    if kind == "gatewayAPI":
        return GatewayAPIRouter(api_client)
    return NoopRouter()
