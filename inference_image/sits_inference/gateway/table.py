"""The routing table: which variants exist, their weights, their ready endpoints.

Sources (a static file, the Kubernetes API) produce immutable :class:`RoutingTable`
values; the gateway reads the current one per request. Immutability is what makes that
read lock-free: a source swaps in a whole new table, a request keeps the one it started
with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_SESSION_HEADER = "x-session-id"


class TableError(ValueError):
    """A routing document that cannot be used (the previous table stays in force)."""


@dataclass(frozen=True, slots=True)
class StickyPolicy:
    """Where a request's session key comes from (spec.traffic.stickySession)."""

    header: str = DEFAULT_SESSION_HEADER
    use_openai_user: bool = True


@dataclass(frozen=True, slots=True)
class VariantRoute:
    """One variant: its share of new traffic and the base URLs of its ready pods."""

    name: str
    weight: int
    endpoints: tuple[str, ...] = ()

    @property
    def routable(self) -> bool:
        """Only a variant with weight and a ready endpoint may receive new requests."""
        return self.weight > 0 and bool(self.endpoints)


@dataclass(frozen=True, slots=True)
class RoutingTable:
    """Everything the gateway needs to route the requests of one SitsDeployment."""

    namespace: str
    deployment: str
    variants: tuple[VariantRoute, ...] = ()
    # Model names clients may send; empty means "do not check" (any model is forwarded).
    models: frozenset[str] = field(default_factory=frozenset)
    # None: the gateway's configured default applies.
    sticky: StickyPolicy | None = None

    def variant(self, name: str) -> VariantRoute | None:
        for variant in self.variants:
            if variant.name == name:
                return variant
        return None

    def knows_model(self, model: str) -> bool:
        return not self.models or model in self.models


EMPTY_TABLE = RoutingTable(namespace="", deployment="")


def endpoint_url(address: str, port: int | None = None, scheme: str = "http") -> str:
    """A base URL: ``host:port`` (or a URL) as written in a file, or an EndpointSlice
    address plus its port, where IPv6 literals get brackets."""
    if "://" in address:
        return address.rstrip("/")
    if port is None:
        return f"{scheme}://{address}"
    host = f"[{address}]" if ":" in address and not address.startswith("[") else address
    return f"{scheme}://{host}:{port}"


def _as_str(doc: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = doc.get(key, default)
    if not isinstance(value, str) or not value:
        raise TableError(f"{key!r} must be a non-empty string")
    return value


def _weight(raw: object, variant: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise TableError(f"variant {variant!r}: weight must be an integer >= 0")
    return raw


def _endpoints(raw: object, variant: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(e, str) and e for e in raw):
        raise TableError(f"variant {variant!r}: endpoints must be a list of strings")
    return tuple(dict.fromkeys(endpoint_url(e) for e in raw))


def _variant(raw: object) -> VariantRoute:
    if not isinstance(raw, Mapping):
        raise TableError("each variant must be a mapping")
    name = _as_str(raw, "name")
    return VariantRoute(
        name=name,
        weight=_weight(raw.get("weight", 0), name),
        endpoints=_endpoints(raw.get("endpoints"), name),
    )


def _models(doc: Mapping[str, Any]) -> frozenset[str]:
    names: list[object] = list(doc.get("models") or [])
    if doc.get("model") is not None:
        names.append(doc["model"])
    if not all(isinstance(n, str) and n for n in names):
        raise TableError("'model'/'models' must be non-empty strings")
    return frozenset(str(n) for n in names)


def _sticky(raw: object) -> StickyPolicy | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise TableError("'sticky' must be a mapping")
    header = raw.get("header", DEFAULT_SESSION_HEADER)
    use_user = raw.get("useOpenAIUser", True)
    if not isinstance(header, str) or not header or not isinstance(use_user, bool):
        raise TableError("'sticky' needs a header name and a boolean useOpenAIUser")
    return StickyPolicy(header=header.lower(), use_openai_user=use_user)


def unique_variants(variants: Iterable[VariantRoute]) -> tuple[VariantRoute, ...]:
    """Variants in order, refusing duplicates (two weights for one name is ambiguous)."""
    seen: dict[str, VariantRoute] = {}
    for variant in variants:
        if variant.name in seen:
            raise TableError(f"variant {variant.name!r} appears twice")
        seen[variant.name] = variant
    return tuple(seen.values())


def table_from_document(doc: object) -> RoutingTable:
    """Parse the static file's document (YAML or JSON, same shape).

    Shape::

        namespace: demo            # label values of the metrics
        deployment: chat
        model: chat                # or models: [chat, chat-lora]
        sticky: {header: x-session-id, useOpenAIUser: true}   # optional
        variants:
          - {name: v1, weight: 90, endpoints: ["http://127.0.0.1:8001"]}
          - {name: v2, weight: 10, endpoints: ["127.0.0.1:8002"]}
    """
    if not isinstance(doc, Mapping):
        raise TableError("the routing document must be a mapping")
    raw_variants = doc.get("variants")
    if not isinstance(raw_variants, list) or not raw_variants:
        raise TableError("'variants' must be a non-empty list")
    return RoutingTable(
        namespace=_as_str(doc, "namespace", "default"),
        deployment=_as_str(doc, "deployment"),
        variants=unique_variants(_variant(v) for v in raw_variants),
        models=_models(doc),
        sticky=_sticky(doc.get("sticky")),
    )
