"""Traffic routers: where variant weights live, and how they are read back.

The engine decides from the weights the router reports (what traffic really does), not
from what the operator last wrote. One Protocol, the built-in router (weights live in
the SitsDeployment's status, which the SITS gateway watches), a no-op, and a factory.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubernetes_asyncio import client

from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL, ObjectRef, SitsDeploymentSpec


class TrafficRouter(Protocol):
    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        """Weights traffic follows now; empty when the router has none yet."""

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        """Make traffic follow these weights."""


class NoopRouter:
    """No router: weights are only recorded in status; reads report nothing."""

    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        return {}

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        return None


def weights_from_status(status: dict[str, Any]) -> dict[str, int]:
    rows = status.get("variants") or []
    return {str(r["name"]): int(r.get("weight") or 0) for r in rows if "name" in r}


class BuiltinRouter:
    """Weights are `status.variants[].weight`; the status write that follows a decision
    is what sets them, so set_weights has nothing to do. Reads go to the apiserver, not
    the watch cache, so the decision sees the weights the gateway sees."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self._custom = client.CustomObjectsApi(api_client)

    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        obj = await self._custom.get_namespaced_custom_object_status(
            API_GROUP, API_VERSION, owner.namespace, PLURAL, owner.name
        )
        return weights_from_status(dict(obj.get("status") or {}))

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        return None


def make_router(kind: str, api_client: client.ApiClient | None) -> TrafficRouter:
    """Factory keyed by spec.traffic.router."""
    if kind == "builtin" and api_client is not None:
        return BuiltinRouter(api_client)
    return NoopRouter()
