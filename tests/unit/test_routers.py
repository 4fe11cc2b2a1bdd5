"""HTTPRoute weight reading, and the builtin router's read-back (the weights' patch and
the cross-namespace rule of the Gateway API router: test_route_tenancy.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from sits_operator.adapters.gateway import GatewayPod
from sits_operator.adapters.routers import BuiltinRouter, NoopRouter, read_weights_back
from sits_operator.core.http_route import route_weights
from sits_operator.model.observed import GatewayReport
from sits_operator.model.spec import ObjectRef, SitsDeploymentSpec
from tests.unit.factories import spec

SERVICES = {"chat-v1": "v1", "chat-v2": "v2"}


def route(*rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "spec": {
            "rules": [
                {"matches": [{"path": {"value": "/"}}], "backendRefs": refs} for refs in rules
            ]
        }
    }


def ref(name: str, weight: int | None = None, kind: str = "Service") -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "port": 8080, "kind": kind}
    if weight is not None:
        out["weight"] = weight
    return out


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param([[ref("chat-v1", 90), ref("chat-v2", 10)]], {"v1": 90, "v2": 10}, id="plain"),
        pytest.param([[ref("chat-v1"), ref("chat-v2")]], {"v1": 1, "v2": 1}, id="default-weight-1"),
        pytest.param([[ref("other", 5), ref("chat-v2", 0)]], {"v2": 0}, id="foreign-ignored"),
        pytest.param([[ref("chat-v1", 50, kind="ServiceImport")]], {}, id="other-kind-ignored"),
        pytest.param(
            [[ref("chat-v1", 70)], [ref("chat-v1", 30)]], {"v1": 70}, id="first-rule-wins"
        ),
        pytest.param([], {}, id="no-rules"),
    ],
)
def test_route_weights(rules: list[list[dict[str, Any]]], expected: dict[str, int]) -> None:
    assert route_weights(route(*rules), SERVICES) == expected


class FakeReader:
    """Answers per pod name as told; records which pods were asked on which port."""

    def __init__(self, answers: dict[str, dict[str, int] | None]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int]] = []

    async def read(self, pods: Sequence[GatewayPod], *, port: int) -> tuple[GatewayReport, ...]:
        self.asked += [(p.name, port) for p in pods]
        return tuple(
            GatewayReport(p.name, self.answers[p.name], "" if self.answers[p.name] else "timeout")
            for p in pods
        )


class PodsOf(BuiltinRouter):
    """The router with its pod listing replaced (the real one asks the apiserver)."""

    def __init__(self, pods: list[GatewayPod], reader: FakeReader) -> None:
        self._reader, self._port, self._pods = reader, 8080, pods

    async def gateway_pods(self, owner: ObjectRef) -> list[GatewayPod]:
        return self._pods


A, B = GatewayPod("chat-gateway-a", "10.0.0.1"), GatewayPod("chat-gateway-b", "10.0.0.2")


@pytest.mark.parametrize(
    ("pods", "answers", "expected"),
    [
        pytest.param(
            [A, B],
            {A.name: {"v1": 80, "v2": 20}, B.name: {"v1": 80, "v2": 20}},
            {"v1": 80, "v2": 20},
            id="all-agree",
        ),
        pytest.param(
            [A, B],
            {A.name: {"v1": 80, "v2": 20}, B.name: {"v1": 90, "v2": 10}},
            {},
            id="mid-change",
        ),
        pytest.param([A, B], {A.name: {"v1": 80, "v2": 20}, B.name: None}, {}, id="one-silent"),
        pytest.param([], {}, {}, id="no-ready-pod"),
    ],
)
async def test_builtin_router_reads_the_weights_every_gateway_pod_agrees_on(
    pods: list[GatewayPod], answers: dict[str, dict[str, int] | None], expected: dict[str, int]
) -> None:
    reader = FakeReader(answers)
    router = PodsOf(pods, reader)
    owner = ObjectRef(name="chat", namespace="prod", uid="u")
    assert await router.read_weights(owner, spec()) == expected
    assert reader.asked == [(p.name, 8080) for p in pods]


class RefusingRouter(NoopRouter):
    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        raise ApiException(status=403, reason="Forbidden")


async def test_a_refused_read_back_is_none_and_a_read_is_what_the_router_reports() -> None:
    owner = ObjectRef(name="chat", namespace="prod", uid="u")
    assert await read_weights_back(RefusingRouter(), owner, spec()) is None
    assert await read_weights_back(NoopRouter(), owner, spec()) == {}
