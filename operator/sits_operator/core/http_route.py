"""The variant weights inside a Gateway API HTTPRoute: read and set by the gatewayAPI
router (adapters/routers.py, GatewayAPIRouter), computed here."""

from __future__ import annotations

from typing import Any


def route_weights(route: dict[str, Any], services: dict[str, str]) -> dict[str, int]:
    """Weights of the variant Services among the route's backendRefs (service -> variant).

    A Service referenced in several rules counts once (the first rule's weight): the
    operator keeps them equal. A backendRef without weight has weight 1 (the spec's default).
    """
    weights: dict[str, int] = {}
    for rule in route.get("spec", {}).get("rules") or []:
        for ref in rule.get("backendRefs") or []:
            variant = services.get(ref.get("name", ""))
            if variant is not None and ref.get("kind", "Service") == "Service":
                weights.setdefault(variant, int(ref.get("weight", 1)))
    return weights


def with_route_weights(
    route: dict[str, Any], services: dict[str, str], weights: dict[str, int]
) -> dict[str, Any]:
    """The route with every variant backendRef's weight set; matches, filters and other
    backends untouched. Rules that reference a variant get the missing variants added."""
    by_variant = {variant: service for service, variant in services.items()}
    rules = []
    for rule in route.get("spec", {}).get("rules") or []:
        refs = [dict(ref) for ref in rule.get("backendRefs") or []]
        named = {ref.get("name") for ref in refs}
        if named & set(services):
            for ref in refs:
                if ref.get("name") in services:
                    ref["weight"] = weights.get(services[ref["name"]], 0)
            for variant, service in by_variant.items():
                if service not in named:
                    refs.append({"name": service, "port": 8080, "weight": weights.get(variant, 0)})
        rules.append({**rule, "backendRefs": refs})
    return {**route, "spec": {**route.get("spec", {}), "rules": rules}}
