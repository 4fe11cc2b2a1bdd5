"""Pure translation of Kubernetes objects (plain JSON dicts) into a routing table.

Kept apart from the watches so every rule here is unit-tested without an apiserver:

- weights come from ``status.traffic.weights`` (the weights the operator decided); from
  ``status.variants[].weight`` when an older operator wrote no ``status.traffic`` (the
  operator now writes there what the gateways report applying, so reading it back would
  never move); before the operator wrote any, from ``spec.traffic.initialWeights``, and
  without those the stable variant gets everything (the CRD's documented default);
- endpoints come from the EndpointSlices labelled
  ``kubernetes.io/service-name=<deployment>-<variant>``: the addresses of endpoints not
  marked unready (``ready`` unset means ready, per the EndpointSlice API), on the port
  named ``http`` (or the only port, when a slice has exactly one);
- model names: ``spec.servedModelName`` (default: the object's name) and every LoRA
  adapter of every variant, since clients select an adapter by its name;
- the sticky-session policy: ``spec.traffic.stickySession``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..table import DEFAULT_SESSION_HEADER, RoutingTable, StickyPolicy, VariantRoute, endpoint_url

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
HTTP_PORT_NAME = "http"

SliceIndex = Mapping[str, tuple[str, tuple[str, ...]]]  # slice name -> (service, endpoints)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _spec_variants(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [_dict(v) for v in _list(_dict(obj.get("spec")).get("variants"))]


def _spec_weights(obj: Mapping[str, Any]) -> dict[str, int]:
    traffic = _dict(_dict(obj.get("spec")).get("traffic"))
    initial = {
        str(w.get("variant")): int(w.get("weight") or 0)
        for w in map(_dict, _list(traffic.get("initialWeights")))
        if w.get("variant")
    }
    if initial:
        return initial
    return {str(v["name"]): 100 for v in _spec_variants(obj) if v.get("role") == "stable"}


class WeightsFrom:
    """Where :func:`variant_weights` found the weights (reported on /sits/v1/routing)."""

    DECIDED = "status.traffic.weights"
    STATUS_VARIANTS = "status.variants"
    SPEC = "spec"


def weights_with_origin(obj: Mapping[str, Any]) -> tuple[list[tuple[str, int]], str]:
    """``(variant, weight)`` in a stable order, and which field they came from."""
    status = _dict(obj.get("status"))
    decided = [_dict(r) for r in _list(_dict(status.get("traffic")).get("weights"))]
    weights = [(str(r["variant"]), _int(r.get("weight"))) for r in decided if r.get("variant")]
    if weights:
        return weights, WeightsFrom.DECIDED
    rows = [_dict(r) for r in _list(status.get("variants"))]
    weights = [(str(r["name"]), _int(r.get("weight"))) for r in rows if r.get("name")]
    if weights:
        return weights, WeightsFrom.STATUS_VARIANTS
    return _spec_variant_weights(obj), WeightsFrom.SPEC


def variant_weights(obj: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(variant, weight)`` in a stable order; status wins over spec once it exists."""
    return weights_with_origin(obj)[0]


def routing_origin(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """Which SitsDeployment state a table was built from, so the operator can tell a
    gateway that applies its latest decision from one that lags (``/sits/v1/routing``)."""
    if obj is None:
        return {}
    meta = _dict(obj.get("metadata"))
    traffic = _dict(_dict(obj.get("status")).get("traffic"))
    return {
        "generation": meta.get("generation"),
        "resourceVersion": meta.get("resourceVersion"),
        "decidedAt": traffic.get("decidedAt"),
        "weightsFrom": weights_with_origin(obj)[1],
    }


def _spec_variant_weights(obj: Mapping[str, Any]) -> list[tuple[str, int]]:
    weights = _spec_weights(obj)
    names = [str(v["name"]) for v in _spec_variants(obj) if v.get("name")]
    return [(name, weights.get(name, 0)) for name in names]


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def served_models(obj: Mapping[str, Any]) -> frozenset[str]:
    spec = _dict(obj.get("spec"))
    base = spec.get("servedModelName") or _dict(obj.get("metadata")).get("name")
    names = {str(base)} if base else set()
    for variant in _spec_variants(obj):
        for adapter in map(_dict, _list(_dict(variant.get("lora")).get("adapters"))):
            if adapter.get("name"):
                names.add(str(adapter["name"]))
    return frozenset(names)


def sticky_policy(obj: Mapping[str, Any]) -> StickyPolicy | None:
    traffic = _dict(_dict(obj.get("spec")).get("traffic"))
    raw = traffic.get("stickySession")
    if not isinstance(raw, dict):
        return None
    header = raw.get("header") or DEFAULT_SESSION_HEADER
    use_user = raw.get("useOpenAIUser", True)
    return StickyPolicy(header=str(header).lower(), use_openai_user=use_user is not False)


def _slice_port(ports: Iterable[dict[str, Any]]) -> int | None:
    listed = [p for p in ports if isinstance(p.get("port"), int)]
    for port in listed:
        if port.get("name") == HTTP_PORT_NAME:
            return int(port["port"])
    return int(listed[0]["port"]) if len(listed) == 1 else None


def slice_endpoints(obj: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """``(service name, ready endpoint URLs)`` of one EndpointSlice."""
    labels = _dict(_dict(obj.get("metadata")).get("labels"))
    service = str(labels.get(SERVICE_NAME_LABEL) or "")
    port = _slice_port(map(_dict, _list(obj.get("ports"))))
    if port is None:
        return service, ()
    urls: list[str] = []
    for endpoint in map(_dict, _list(obj.get("endpoints"))):
        if _dict(endpoint.get("conditions")).get("ready") is False:
            continue
        urls.extend(endpoint_url(str(a), port) for a in _list(endpoint.get("addresses")))
    return service, tuple(urls)


def service_name(deployment: str, variant: str) -> str:
    """Same rule as the operator's ``naming.variant_object_name``."""
    return f"{deployment}-{variant}"


def build_table(
    namespace: str, deployment: str, obj: Mapping[str, Any] | None, slices: SliceIndex
) -> RoutingTable:
    """The table for the current objects; no SitsDeployment means no variants (503)."""
    if obj is None:
        return RoutingTable(namespace=namespace, deployment=deployment)
    by_service: dict[str, list[str]] = {}
    for name in sorted(slices):
        service, endpoints = slices[name]
        by_service.setdefault(service, []).extend(endpoints)
    variants = tuple(
        VariantRoute(
            name=name,
            weight=weight,
            endpoints=tuple(dict.fromkeys(by_service.get(service_name(deployment, name), []))),
        )
        for name, weight in variant_weights(obj)
    )
    return RoutingTable(
        namespace=namespace,
        deployment=deployment,
        variants=variants,
        models=served_models(obj),
        sticky=sticky_policy(obj),
    )
