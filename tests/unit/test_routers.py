"""HTTPRoute weight reading and writing (the Gateway API router's pure part)."""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.adapters.routers import route_weights, weights_from_status, with_route_weights

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


def test_writing_weights_keeps_everything_else_and_adds_missing_variants() -> None:
    before = route([ref("chat-v1", 100), ref("static", 3)], [ref("static", 1)])
    after = with_route_weights(before, SERVICES, {"v1": 75, "v2": 25})
    first, second = after["spec"]["rules"]
    assert first["matches"] == [{"path": {"value": "/"}}]
    assert [(r["name"], r.get("weight")) for r in first["backendRefs"]] == [
        ("chat-v1", 75),
        ("static", 3),
        ("chat-v2", 25),
    ]
    assert second["backendRefs"] == [ref("static", 1)]  # rules without variants untouched
    assert route_weights(after, SERVICES) == {"v1": 75, "v2": 25}
    assert before["spec"]["rules"][0]["backendRefs"][0]["weight"] == 100  # input not mutated


def test_builtin_router_reads_status_weights() -> None:
    status = {"variants": [{"name": "v1", "weight": 80}, {"name": "v2", "weight": 20}]}
    assert weights_from_status(status) == {"v1": 80, "v2": 20}
    assert weights_from_status({}) == {}
