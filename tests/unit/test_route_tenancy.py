"""Router gatewayAPI in a shared cluster: the ReferenceGrant rule for a route in another
namespace, the JSON patch that changes only the variant weights, and how a refusal shows."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch  # RFC 6902 as the apiserver applies it (a dependency of Kopf's)
import pytest
from kubernetes_asyncio.client import ApiClient

from sits_operator.adapters.kube import NoopKubeWriter
from sits_operator.adapters.routers import GatewayAPIRouter, RouteRefusedError, make_router
from sits_operator.core.http_route import JSON_PATCH, route_weights, weight_patch
from sits_operator.core.reference_grant import route_refusal
from sits_operator.handlers.analysis import Analyzer
from sits_operator.handlers.reconcile import Reconciler
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef
from tests.unit.factories import spec
from tests.unit.test_rollout_status_pass import (
    POLICIES,
    READY,
    Clock,
    Trickle,
    body,
    conditions,
    last_status,
)
from tests.unit.test_routers import ref

SERVICES = {"chat-v1": "v1", "chat-v2": "v2"}
OWNER = ObjectRef(name="chat", namespace="team-a", uid="u")
GRANT_FROM = {"group": "sits.dev", "kind": "SitsDeployment", "namespace": "team-a"}
GRANT_TO = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "chat"}


def grant(
    from_: dict[str, str] | None = None, to: dict[str, str] | None = None, namespace: str = "team-b"
) -> dict[str, Any]:
    return {
        "metadata": {"name": "sits", "namespace": namespace},
        "spec": {"from": [from_ or GRANT_FROM], "to": [to or GRANT_TO]},
    }


@pytest.mark.parametrize(
    ("route_namespace", "grants", "allowed"),
    [
        pytest.param("team-a", [], True, id="same-namespace-needs-no-grant"),
        pytest.param("team-b", [], False, id="no-grant"),
        pytest.param("team-b", [grant()], True, id="grant-for-this-route"),
        pytest.param("team-b", [grant(to={**GRANT_TO, "name": ""})], True, id="empty-name"),
        pytest.param(
            "team-b",
            [grant(to={"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"})],
            True,
            id="every-route",
        ),
        pytest.param("team-b", [grant(to={**GRANT_TO, "name": "other"})], False, id="other-route"),
        pytest.param("team-b", [grant(to={**GRANT_TO, "kind": "Service"})], False, id="to-kind"),
        pytest.param("team-b", [grant(to={**GRANT_TO, "group": ""})], False, id="to-group"),
        pytest.param(
            "team-b", [grant({**GRANT_FROM, "namespace": "team-c"})], False, id="from-other-ns"
        ),
        pytest.param(
            "team-b",
            [grant({**GRANT_FROM, "kind": "HTTPRoute", "group": "gateway.networking.k8s.io"})],
            False,
            id="from-other-kind",
        ),
        pytest.param("team-b", [grant(namespace="team-a")], False, id="grant-in-own-namespace"),
        pytest.param(
            "team-b",
            [grant(to={**GRANT_TO, "name": "other"}), grant()],
            True,
            id="one-of-several",
        ),
        pytest.param("team-b", [{"metadata": {}}], False, id="grant-without-spec"),
    ],
)
def test_route_in_another_namespace_needs_a_reference_grant_there(
    route_namespace: str, grants: list[dict[str, Any]], allowed: bool
) -> None:
    refusal = route_refusal(
        grants, owner_namespace="team-a", route_namespace=route_namespace, route_name="chat"
    )
    assert (refusal is None) == allowed


def test_the_refusal_names_the_missing_grant() -> None:
    assert route_refusal(
        [], owner_namespace="team-a", route_namespace="team-b", route_name="chat"
    ) == (
        "HTTPRoute team-b/chat is in another namespace: a ReferenceGrant in team-b must allow "
        "sits.dev/SitsDeployment from team-a to gateway.networking.k8s.io/HTTPRoute chat; "
        "its weights are not written"
    )


def http_route(*rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A user's route as the apiserver returns it: parents, matches, a filter per rule."""
    return {
        "metadata": {"name": "chat", "namespace": "team-a", "resourceVersion": "41"},
        "spec": {
            "parentRefs": [{"name": "edge", "namespace": "gateway-system"}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/r{i}"}}],
                    "filters": [{"type": "RequestHeaderModifier"}],
                    "backendRefs": refs,
                }
                for i, refs in enumerate(rules)
            ],
        },
    }


def weight_op(rule: int, index: int, weight: int, op: str = "replace") -> dict[str, Any]:
    return {"op": op, "path": f"/spec/rules/{rule}/backendRefs/{index}/weight", "value": weight}


def append_op(rule: int, service: str, weight: int) -> dict[str, Any]:
    ref = {"name": service, "port": 8080, "weight": weight}
    return {"op": "add", "path": f"/spec/rules/{rule}/backendRefs/-", "value": ref}


TEST_RV = {"op": "test", "path": "/metadata/resourceVersion", "value": "41"}
NEW = {"v1": 75, "v2": 25}


def without_backends(rule: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rule.items() if k != "backendRefs"}


def foreign(rule: dict[str, Any]) -> list[dict[str, Any]]:
    """The backendRefs that are not variant Services (what the operator must not touch)."""
    refs = rule["backendRefs"]
    return [r for r in refs if r["name"] not in SERVICES or r.get("kind", "Service") != "Service"]


@pytest.mark.parametrize(
    ("rules", "ops"),
    [
        pytest.param([[ref("chat-v1", 75), ref("chat-v2", 25)]], [], id="already-there"),
        pytest.param(
            [[ref("chat-v1", 100), ref("chat-v2", 0)]],
            [TEST_RV, weight_op(0, 0, 75), weight_op(0, 1, 25)],
            id="plain",
        ),
        pytest.param(
            [[ref("chat-v1", 75), ref("chat-v2")]],
            [TEST_RV, weight_op(0, 1, 25, "add")],
            id="absent",
        ),
        pytest.param(
            [[ref("static", 3), ref("chat-v1", 100)], [ref("static", 1)]],
            [
                TEST_RV,
                weight_op(0, 1, 75),
                append_op(0, "chat-v2", 25),
            ],
            id="foreign-kept-missing-variant-added",
        ),
        pytest.param(
            [[ref("chat-v1", 100, kind="ServiceImport"), ref("chat-v2", 0)]],
            [
                TEST_RV,
                weight_op(0, 1, 25),
                append_op(0, "chat-v1", 75),
            ],
            id="other-kind-is-not-a-variant",
        ),
        pytest.param(
            [[ref("chat-v1", 100), ref("chat-v2", 0)], [ref("chat-v2", 0), ref("chat-v1", 100)]],
            [
                TEST_RV,
                weight_op(0, 0, 75),
                weight_op(0, 1, 25),
                weight_op(1, 0, 25),
                weight_op(1, 1, 75),
            ],
            id="every-rule",
        ),
        pytest.param([[ref("static", 1)]], [], id="no-variant-no-write"),
    ],
)
def test_the_patch_touches_only_variant_weights(
    rules: list[list[dict[str, Any]]], ops: list[dict[str, Any]]
) -> None:
    route = http_route(*rules)
    assert weight_patch(route, SERVICES, NEW) == ops
    after = jsonpatch.apply_patch(route, ops)
    if ops:
        assert route_weights(after, SERVICES) == NEW
    for rule, was in zip(after["spec"]["rules"], route["spec"]["rules"], strict=True):
        assert without_backends(rule) == without_backends(was)  # matches and filters
        assert foreign(rule) == foreign(was)
    assert after["spec"]["parentRefs"] == route["spec"]["parentRefs"]


def test_a_route_edited_since_it_was_read_fails_the_patch() -> None:
    route = http_route([ref("chat-v1", 100), ref("chat-v2", 0)])
    ops = weight_patch(route, SERVICES, NEW)
    edited = copy.deepcopy(route)
    edited["metadata"]["resourceVersion"] = "42"
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(edited, ops)


class FakeCustomObjects:
    """The CustomObjectsApi calls the router makes: routes and grants per namespace."""

    def __init__(self, route: dict[str, Any], grants: dict[str, list[dict[str, Any]]]) -> None:
        self.route, self.grants = route, grants
        self.calls: list[tuple[str, Any]] = []

    async def list_namespaced_custom_object(self, *where: str) -> dict[str, Any]:
        self.calls.append(("list", where))
        return {"items": self.grants.get(where[2], [])}

    async def get_namespaced_custom_object(self, *where: str) -> dict[str, Any]:
        self.calls.append(("get", where))
        return self.route

    async def patch_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("patch", (args, kwargs)))


class FakeApiRouter(GatewayAPIRouter):
    def __init__(self, custom: FakeCustomObjects) -> None:
        self._custom, self._field_manager = custom, "sits-operator"  # type: ignore[assignment]


def route_spec(namespace: str | None) -> Any:
    return spec(
        traffic={"router": "gatewayAPI", "httpRoute": {"name": "chat", "namespace": namespace}}
    )


async def test_the_router_sends_a_json_patch_under_its_field_manager() -> None:
    custom = FakeCustomObjects(http_route([ref("chat-v1", 100), ref("chat-v2", 0)]), {})
    await FakeApiRouter(custom).set_weights(OWNER, route_spec(None), NEW)
    assert [kind for kind, _ in custom.calls] == ["get", "patch"]  # own namespace: no grant
    args, kwargs = custom.calls[-1][1]
    assert args == (
        "gateway.networking.k8s.io",
        "v1",
        "team-a",
        "httproutes",
        "chat",
        [TEST_RV, weight_op(0, 0, 75), weight_op(0, 1, 25)],
    )
    assert kwargs == {"field_manager": "sits-operator", "_content_type": JSON_PATCH}


async def test_the_factory_patches_under_the_operators_field_manager() -> None:
    """SITS_FIELD_MANAGER names the route's weights' manager too, as for every child."""
    api = ApiClient()
    try:
        router = make_router("gatewayAPI", api, field_manager="platform-sits")
        assert isinstance(router, GatewayAPIRouter)
        assert router._field_manager == "platform-sits"
    finally:
        await api.close()


async def test_a_route_in_another_namespace_is_neither_read_nor_written_without_a_grant() -> None:
    custom = FakeCustomObjects(http_route([ref("chat-v1", 100), ref("chat-v2", 0)]), {})
    router = FakeApiRouter(custom)
    with pytest.raises(RouteRefusedError, match="a ReferenceGrant in team-b must allow"):
        await router.read_weights(OWNER, route_spec("team-b"))
    with pytest.raises(RouteRefusedError):
        await router.set_weights(OWNER, route_spec("team-b"), NEW)
    grants = ("gateway.networking.k8s.io", "v1beta1", "team-b", "referencegrants")
    assert custom.calls == [("list", grants), ("list", grants)]
    custom.grants["team-b"] = [grant()]
    await router.set_weights(OWNER, route_spec("team-b"), NEW)
    assert [kind for kind, _ in custom.calls[2:]] == ["list", "get", "patch"]


def gateway_api_body() -> dict[str, Any]:
    raw = body()
    raw["spec"]["traffic"] = {
        "router": "gatewayAPI",
        "httpRoute": {"name": "chat", "namespace": "team-b"},
    }
    return raw


async def test_a_refused_route_shows_in_traffic_applied_and_the_rollout_waits() -> None:
    custom = FakeCustomObjects(http_route([ref("chat-v1", 100), ref("chat-v2", 0)]), {})
    writer, events, clock = NoopKubeWriter(), [], Clock()
    provider = Trickle(500.0)
    recon = Reconciler(
        writer=writer,
        settings=OperatorSettings(),
        analyzer=Analyzer(
            None,
            provider_factory=lambda _access: provider,
            router_factory=lambda _kind, _api: FakeApiRouter(custom),
            clock=clock,
        ),
        post=lambda _body, type_, reason, message: events.append((type_, reason, message)),
        wall_clock=clock,
    )

    async def reconcile(analyze: bool) -> dict[str, Any]:
        await recon.reconcile(gateway_api_body(), READY, policies=POLICIES, analyze=analyze)
        return last_status(writer)

    status = await reconcile(analyze=True)
    assert conditions(status)["TrafficApplied"] == ("False", "ReferenceGrantMissing")
    (message,) = [c["message"] for c in status["conditions"] if c["type"] == "TrafficApplied"]
    assert message.startswith("HTTPRoute team-b/chat is in another namespace")
    assert conditions(status)["Ready"] == ("False", "ReferenceGrantMissing")
    assert "analysis" not in status  # nothing decided
    assert not [c for c in custom.calls if c[0] != "list"]  # the route neither read nor written
    clock.now += 5
    status = await reconcile(analyze=False)  # a pass between analyses: no flapping
    assert conditions(status)["TrafficApplied"] == ("False", "ReferenceGrantMissing")
    clock.now += 25
    await reconcile(analyze=True)
    assert [e for e in events if e[0] == "Warning"] == [
        ("Warning", "ReferenceGrantMissing", message)
    ]  # once, when the refusal starts
    custom.grants["team-b"] = [grant({**GRANT_FROM, "namespace": "prod"})]  # body()'s namespace
    clock.now += 30
    status = await reconcile(analyze=True)
    assert "TrafficApplied" not in conditions(status)
    assert custom.calls[-1][0] == "patch"
    (args, _kwargs) = custom.calls[-1][1]
    assert args[2] == "team-b"
    shown = {v["name"]: v["weight"] for v in status["variants"]}
    assert route_weights(jsonpatch.apply_patch(custom.route, args[5]), SERVICES) == shown
    assert shown["v2"] > 0
