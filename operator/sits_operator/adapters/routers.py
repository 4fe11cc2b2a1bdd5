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
from sits_operator.core.http_route import JSON_PATCH, route_weights, weight_patch
from sits_operator.core.naming import gateway_selector_labels
from sits_operator.core.reference_grant import (
    GATEWAY_GROUP,
    GRANT_PLURAL,
    GRANT_VERSION,
    route_refusal,
)
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


GATEWAY_VERSION, HTTPROUTES = "v1", "httproutes"


class RouteRefusedError(Exception):
    """The HTTPRoute is in another namespace and no ReferenceGrant there allows this
    SitsDeployment to use it (core/reference_grant.py); the message says which is missing.
    Not an ApiException: the reconciler turns it into TrafficApplied False and the rollout
    waits, instead of deciding from weights it may not read or write."""


class GatewayAPIRouter:
    """Weights in an existing HTTPRoute's backendRefs (Envoy Gateway, Istio, ...).

    The operator owns only the weights of backendRefs naming its variant Services; the
    route itself (parents, matches, filters, other backends) is the user's. A route in
    another namespace is read and written only where a ReferenceGrant there allows it.
    Writes are JSON patches of those weights alone, guarded by the resourceVersion just
    read (core/http_route.py says why not server-side apply): a concurrent edit makes the
    write fail (and the next pass retry) instead of being lost.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        field_manager: str = OperatorSettings().field_manager,
    ) -> None:
        self._custom = client.CustomObjectsApi(api_client)
        self._field_manager = field_manager

    @staticmethod
    def _services(owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, str]:
        return {f"{owner.name}-{v.name}": v.name for v in spec.variants}

    @staticmethod
    def _where(owner: ObjectRef, spec: SitsDeploymentSpec) -> tuple[str, str]:
        ref = spec.traffic.http_route
        if ref is None:
            raise ValueError("spec.traffic.httpRoute is required for the gatewayAPI router")
        return ref.namespace or owner.namespace, ref.name

    async def _grants(self, namespace: str) -> list[dict[str, Any]]:
        """The ReferenceGrants of a namespace; none where the CRD is not installed."""
        try:
            found = await self._custom.list_namespaced_custom_object(
                GATEWAY_GROUP, GRANT_VERSION, namespace, GRANT_PLURAL
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            return []
        return list(dict(found).get("items") or [])

    async def _get(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, Any]:
        """The route, once this SitsDeployment may use it (RouteRefusedError otherwise)."""
        namespace, name = self._where(owner, spec)
        if namespace != owner.namespace:
            refusal = route_refusal(
                await self._grants(namespace),
                owner_namespace=owner.namespace,
                route_namespace=namespace,
                route_name=name,
            )
            if refusal is not None:
                raise RouteRefusedError(refusal)
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
        patch = weight_patch(route, self._services(owner, spec), weights)
        if not patch:
            return
        namespace, name = self._where(owner, spec)
        await self._custom.patch_namespaced_custom_object(
            GATEWAY_GROUP,
            GATEWAY_VERSION,
            namespace,
            HTTPROUTES,
            name,
            patch,
            field_manager=self._field_manager,
            _content_type=JSON_PATCH,  # type: ignore[call-arg]  # accepted via **kwargs at run time
        )


def make_router(
    kind: str,
    api_client: client.ApiClient | None,
    *,
    field_manager: str = OperatorSettings().field_manager,
) -> TrafficRouter:
    """Factory keyed by spec.traffic.router; HTTPRoute patches go under `field_manager`
    (SITS_FIELD_MANAGER, the manager of everything else the operator writes)."""
    if api_client is None:
        return NoopRouter()
    if kind == "builtin":
        return BuiltinRouter(api_client)
    if kind == "gatewayAPI":
        return GatewayAPIRouter(api_client, field_manager=field_manager)
    return NoopRouter()
