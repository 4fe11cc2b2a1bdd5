"""Kubernetes objects (SitsDeployment, EndpointSlices) to a routing table, without an apiserver."""

from __future__ import annotations

from typing import Any

import pytest

from sits_inference.gateway.sources.kube_model import (
    build_table,
    routing_origin,
    served_models,
    slice_endpoints,
    sticky_policy,
    variant_weights,
    weights_with_origin,
)
from sits_inference.gateway.table import StickyPolicy, VariantRoute


def deployment(**parts: Any) -> dict[str, Any]:
    spec = {
        "variants": [
            {"name": "v1", "role": "stable", "lora": {"adapters": [{"name": "sql"}]}},
            {"name": "v2", "role": "candidate", "lora": {"adapters": [{"name": "sql-v2"}]}},
        ],
        **parts.pop("spec", {}),
    }
    return {"metadata": {"name": "chat", "namespace": "demo"}, "spec": spec, **parts}


def endpoint_slice(
    name: str,
    service: str,
    addresses: list[tuple[str, bool | None]],
    ports: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    endpoints = []
    for address, ready in addresses:
        conditions = {} if ready is None else {"ready": ready}
        endpoints.append({"addresses": [address], "conditions": conditions})
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": service}},
        "ports": ports if ports is not None else [{"name": "http", "port": 8080}],
        "endpoints": endpoints,
    }


def status(**weights: int | str | None) -> dict[str, Any]:
    rows = [{"name": n} if w is None else {"name": n, "weight": w} for n, w in weights.items()]
    return deployment(status={"variants": rows})


def initial(**weights: int) -> dict[str, Any]:
    rows = [{"variant": n, "weight": w} for n, w in weights.items()]
    return deployment(spec={"traffic": {"initialWeights": rows}})


@pytest.mark.parametrize(
    ("obj", "weights"),
    [
        # the operator's status wins
        (status(v1=80, v2=20), [("v1", 80), ("v2", 20)]),
        # a status row without a weight means 0, never "all"
        (status(v1=100, v2=None), [("v1", 100), ("v2", 0)]),
        # before the operator wrote status: spec.traffic.initialWeights
        (initial(v1=50, v2=50), [("v1", 50), ("v2", 50)]),
        # and without those, the stable variant gets everything
        (deployment(), [("v1", 100), ("v2", 0)]),
        (deployment(status={"variants": []}), [("v1", 100), ("v2", 0)]),
        # garbage weights count as 0
        (status(v1="50", v2=-5), [("v1", 0), ("v2", 0)]),
    ],
)
def test_weights(obj: dict[str, Any], weights: list[tuple[str, int]]) -> None:
    assert variant_weights(obj) == weights


def test_models_are_the_served_name_and_every_adapter() -> None:
    assert served_models(deployment()) == frozenset({"chat", "sql", "sql-v2"})
    renamed = deployment(spec={"servedModelName": "org/chat-7b"})
    assert "org/chat-7b" in served_models(renamed)


def test_sticky_policy_from_spec() -> None:
    assert sticky_policy(deployment()) is None
    obj = deployment(
        spec={"traffic": {"stickySession": {"header": "X-Conv", "useOpenAIUser": False}}}
    )
    assert sticky_policy(obj) == StickyPolicy(header="x-conv", use_openai_user=False)
    assert sticky_policy(deployment(spec={"traffic": {"stickySession": {}}})) == StickyPolicy()


@pytest.mark.parametrize(
    ("ports", "urls"),
    [
        ([{"name": "http", "port": 8080}, {"name": "m", "port": 9090}], ("http://10.0.0.1:8080",)),
        ([{"name": "other", "port": 7000}], ("http://10.0.0.1:7000",)),
        ([{"name": "a", "port": 1}, {"name": "b", "port": 2}], ()),
        ([], ()),
    ],
)
def test_the_http_port_or_the_only_port(ports: list[dict[str, Any]], urls: tuple[str, ...]) -> None:
    assert slice_endpoints(endpoint_slice("s", "chat-v1", [("10.0.0.1", True)], ports)) == (
        "chat-v1",
        urls,
    )


def test_unready_endpoints_are_left_out_and_unknown_means_ready() -> None:
    obj = endpoint_slice(
        "s", "chat-v1", [("10.0.0.1", True), ("10.0.0.2", False), ("fd00::3", None)]
    )
    assert slice_endpoints(obj) == ("chat-v1", ("http://10.0.0.1:8080", "http://[fd00::3]:8080"))


def test_build_table_joins_weights_and_slices_by_service_name() -> None:
    slices = {
        "chat-v1-a": slice_endpoints(endpoint_slice("a", "chat-v1", [("10.0.0.1", True)])),
        "chat-v1-b": slice_endpoints(
            endpoint_slice("b", "chat-v1", [("10.0.0.2", True), ("10.0.0.1", True)])
        ),
        "other": slice_endpoints(endpoint_slice("o", "unrelated", [("10.9.9.9", True)])),
    }
    table = build_table("demo", "chat", status(v1=90, v2=10), slices)
    assert table.variants == (
        VariantRoute("v1", 90, ("http://10.0.0.1:8080", "http://10.0.0.2:8080")),
        VariantRoute("v2", 10, ()),
    )
    assert table.knows_model("sql-v2")


def test_no_deployment_means_no_variants() -> None:
    table = build_table("demo", "chat", None, {})
    assert (table.namespace, table.deployment, table.variants) == ("demo", "chat", ())


def decided(**weights: int) -> dict[str, Any]:
    rows = [{"variant": n, "weight": w} for n, w in weights.items()]
    return {"weights": rows, "decidedAt": "2027-01-15T08:00:00.000Z"}


def test_the_decided_weights_win_over_the_reported_ones() -> None:
    """status.variants[].weight is what the gateways report applying: following it
    would never move; status.traffic.weights is what the operator decided."""
    obj = deployment(
        metadata={"name": "chat", "namespace": "demo", "generation": 4, "resourceVersion": "77"},
        status={"variants": [{"name": "v1", "weight": 100}], "traffic": decided(v1=60, v2=40)},
    )
    assert weights_with_origin(obj) == ([("v1", 60), ("v2", 40)], "status.traffic.weights")
    assert routing_origin(obj) == {
        "generation": 4,
        "resourceVersion": "77",
        "decidedAt": "2027-01-15T08:00:00.000Z",
        "weightsFrom": "status.traffic.weights",
    }
    assert weights_with_origin(status(v1=80, v2=20))[1] == "status.variants"
    assert weights_with_origin(deployment())[1] == "spec"
    assert routing_origin(None) == {}


async def test_the_routing_endpoint_reports_the_table_in_force() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from sits_inference.gateway.app import ROUTING_PATH, Gateway
    from sits_inference.gateway.config import GatewayConfig
    from sits_inference.gateway.sources import MemorySource
    from sits_inference.gateway.table import RoutingTable
    from sits_inference.gateway.telemetry import Probes

    table = RoutingTable(
        "demo",
        "chat",
        (VariantRoute("v1", 70, ("http://10.0.0.1:8080",)), VariantRoute("v2", 30, ())),
    )
    gateway = Gateway(GatewayConfig(), MemorySource(table), Probes())
    async with TestClient(TestServer(gateway.app())) as http:
        response = await http.get(ROUTING_PATH)
        assert response.status == 200
        body = await response.json()
    gateway.probes.shutdown()
    assert body == {
        "namespace": "demo",
        "deployment": "chat",
        "ready": True,
        "weights": {"v1": 70, "v2": 30},
        "endpoints": {"v1": 1, "v2": 0},
        "routable": ["v1"],
        "origin": {},
    }
