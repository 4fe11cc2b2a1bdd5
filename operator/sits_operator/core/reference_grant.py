"""May a SitsDeployment write an HTTPRoute in another namespace? Gateway API's own rule.

Pure. Router gatewayAPI writes the weights of the HTTPRoute that `spec.traffic.httpRoute`
names (adapters/routers.py). A route in the SitsDeployment's own namespace is always
allowed; one in another namespace only where a ReferenceGrant in the ROUTE's namespace
allows it, as Gateway API allows a cross-namespace reference: its `spec.from` lists
{group: sits.dev, kind: SitsDeployment, namespace: <the SitsDeployment's namespace>} and
its `spec.to` lists {group: gateway.networking.k8s.io, kind: HTTPRoute} with the route's
name or no name (every route there). Without one, whoever may create a SitsDeployment in
one namespace could move the traffic of another team's route through the operator's
ClusterRole (SECURITY.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sits_operator.model.spec import API_GROUP, KIND

GATEWAY_GROUP = "gateway.networking.k8s.io"
ROUTE_KIND = "HTTPRoute"
GRANT_VERSION = "v1beta1"  # the storage version of the pinned release (v1.6.0)
GRANT_PLURAL = "referencegrants"


def _entries(grant: Mapping[str, Any], side: str) -> list[Mapping[str, Any]]:
    entries = (grant.get("spec") or {}).get(side) or []
    return [e for e in entries if isinstance(e, Mapping)]


def grant_allows(
    grant: Mapping[str, Any], *, from_namespace: str, route_namespace: str, route_name: str
) -> bool:
    """Does this ReferenceGrant let SitsDeployments of `from_namespace` refer to the
    HTTPRoute `route_namespace/route_name`? Only a grant in the route's own namespace can."""
    where = (grant.get("metadata") or {}).get("namespace")
    if where is not None and where != route_namespace:
        return False
    sources = any(
        e.get("group") == API_GROUP
        and e.get("kind") == KIND
        and e.get("namespace") == from_namespace
        for e in _entries(grant, "from")
    )
    targets = any(
        e.get("group") == GATEWAY_GROUP
        and e.get("kind") == ROUTE_KIND
        and e.get("name") in (None, "", route_name)
        for e in _entries(grant, "to")
    )
    return sources and targets


def refusal_message(*, owner_namespace: str, route_namespace: str, route_name: str) -> str:
    return (
        f"HTTPRoute {route_namespace}/{route_name} is in another namespace: a ReferenceGrant "
        f"in {route_namespace} must allow {API_GROUP}/{KIND} from {owner_namespace} "
        f"to {GATEWAY_GROUP}/{ROUTE_KIND} {route_name}; its weights are not written"
    )


def route_refusal(
    grants: Iterable[Mapping[str, Any]],
    *,
    owner_namespace: str,
    route_namespace: str,
    route_name: str,
) -> str | None:
    """None when the SitsDeployment may use the route; else why not (the TrafficApplied
    condition's message). `grants`: the ReferenceGrants of the route's namespace."""
    if route_namespace == owner_namespace:
        return None
    if any(
        grant_allows(
            g,
            from_namespace=owner_namespace,
            route_namespace=route_namespace,
            route_name=route_name,
        )
        for g in grants
    ):
        return None
    return refusal_message(
        owner_namespace=owner_namespace, route_namespace=route_namespace, route_name=route_name
    )
