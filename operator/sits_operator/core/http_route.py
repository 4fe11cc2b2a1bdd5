"""The variant weights inside a Gateway API HTTPRoute: read and set by the gatewayAPI
router (adapters/routers.py, GatewayAPIRouter), computed here.

The route is the user's: the operator changes only the weights of the backendRefs that
name its variant Services (and adds a missing variant's backendRef to a rule that already
names another variant). It does so with a JSON patch, not server-side apply: in the
Gateway API CRD (v1.6.0) `spec.rules` and each rule's `backendRefs` are atomic lists
(`x-kubernetes-list-type: atomic`), so an apply of a partial route listing only the
variant backends would replace the whole list, dropping the user's other backends,
matches and filters, and take ownership of all of it. The patch instead:

- starts with a `test` of `metadata.resourceVersion` against the route just read: list
  indices are only right for that version, so a concurrent edit makes the patch fail
  (the apiserver answers 422) and the next pass reads the route again and retries;
- `replace`s (or `add`s, where the field is absent) only `/spec/rules/<i>/backendRefs/<j>/weight`;
- `add`s, at the end of a rule's `backendRefs`, a variant that rule lacks.

The router sends it with `field_manager=` the operator's, so `metadata.managedFields`
records the operator (operation Update). The list being atomic, that entry names the
whole `f:rules`: a user who later applies the route server-side must take it back with
`--force-conflicts` (a client-side `kubectl apply` or edit is unaffected).
"""

from __future__ import annotations

from typing import Any

from sits_operator.model.settings import OperatorSettings

JSON_PATCH = "application/json-patch+json"
# The port of every variant Service (core/render.py, render_variant_service); a backendRef
# the operator adds must name one.
VARIANT_PORT = OperatorSettings().sidecar_port


def _variant_refs(rule: dict[str, Any], services: dict[str, str]) -> list[tuple[int, str]]:
    """(index, variant) of the rule's backendRefs that are variant Services."""
    return [
        (j, services[ref.get("name", "")])
        for j, ref in enumerate(rule.get("backendRefs") or [])
        if ref.get("name", "") in services and ref.get("kind", "Service") == "Service"
    ]


def _rules(route: dict[str, Any]) -> list[dict[str, Any]]:
    return list(route.get("spec", {}).get("rules") or [])


def route_weights(route: dict[str, Any], services: dict[str, str]) -> dict[str, int]:
    """Weights of the variant Services among the route's backendRefs (service -> variant).

    A Service referenced in several rules counts once (the first rule's weight): the
    operator keeps them equal. A backendRef without weight has weight 1 (the spec's default).
    """
    weights: dict[str, int] = {}
    for rule in _rules(route):
        refs = rule.get("backendRefs") or []
        for j, variant in _variant_refs(rule, services):
            weights.setdefault(variant, int(refs[j].get("weight", 1)))
    return weights


def weight_patch(
    route: dict[str, Any], services: dict[str, str], weights: dict[str, int]
) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) that sets every variant backendRef's weight in `route`
    as read; [] when the route already carries these weights. Rules that name no variant,
    and every other field, are left alone; a rule that names a variant gets the missing
    variants added."""
    ops: list[dict[str, Any]] = []
    for i, rule in enumerate(_rules(route)):
        refs = rule.get("backendRefs") or []
        present = _variant_refs(rule, services)
        for j, variant in present:
            weight = weights.get(variant, 0)
            if refs[j].get("weight") != weight:
                op = "replace" if "weight" in refs[j] else "add"
                ops.append(
                    {"op": op, "path": f"/spec/rules/{i}/backendRefs/{j}/weight", "value": weight}
                )
        named = {variant for _, variant in present}
        for service, variant in services.items():
            if present and variant not in named:
                ref = {"name": service, "port": VARIANT_PORT, "weight": weights.get(variant, 0)}
                ops.append({"op": "add", "path": f"/spec/rules/{i}/backendRefs/-", "value": ref})
    if not ops:
        return []
    version = route.get("metadata", {}).get("resourceVersion")
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": version}, *ops]
