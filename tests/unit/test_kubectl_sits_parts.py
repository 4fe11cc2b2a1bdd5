"""The pure parts of `kubectl sits`: rows from objects, policy wording, messages, output."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from sits_kubectl.commands import EFFECTS, command_value, confirmation, patch_body
from sits_kubectl.messages import Call, apiserver_message, refusal
from sits_kubectl.output import document
from sits_kubectl.text import age, number
from sits_kubectl.view import breach_text, build, pod_row, strategy_text
from sits_operator.core.naming import LABEL_VARIANT
from sits_operator.model.analysis import Command, command_annotation
from sits_operator.model.policy import (
    ActionType,
    CompareTo,
    Comparison,
    Rule,
    RuleAction,
)
from sits_operator.model.spec import API_GROUP, PLURAL, parse_spec
from tests.unit.factories import variant
from tests.unit.kubectl_sits_fixtures import recorded, snapshot


def rule(**changes: Any) -> Rule:
    base: dict[str, Any] = {
        "name": "r",
        "sli": "s",
        "query": "q",
        "window_seconds": 60.0,
        "comparison": Comparison.LT,
        "action": RuleAction(ActionType.ROLLBACK),
        "threshold": 0.95,
    }
    return Rule(**{**base, **changes})


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"for_periods": 2}, "< 0.95 for 2 periods -> rollback"),
        ({}, "< 0.95 for 1 period -> rollback"),
        (
            {
                "comparison": Comparison.GT,
                "threshold": 200.0,
                "for_seconds": 90.0,
                "action": RuleAction(ActionType.SET_WEIGHT, 10),
            },
            "> 200 for 90s -> setWeight 10",
        ),
        (
            {"compare_to": CompareTo.STABLE, "tolerance": 0.05, "threshold": None},
            "< stable - 5 % for 1 period -> rollback",
        ),
        (
            {
                "compare_to": CompareTo.STABLE,
                "comparison": Comparison.GE,
                "tolerance": 0.1,
                "action": RuleAction(ActionType.PAUSE),
            },
            ">= stable + 10 % for 1 period -> pause",
        ),
        (
            {"compare_to": CompareTo.STABLE, "action": RuleAction(ActionType.HOLD)},
            "< stable for 1 period -> hold",
        ),
    ],
)
def test_breach_text(changes: dict[str, Any], expected: str) -> None:
    assert breach_text(rule(**changes)) == expected


@pytest.mark.parametrize(
    ("rollout", "expected"),
    [
        ({}, "canary: 10 % steps up to 50 %"),
        (
            {"stepWeight": 25, "maxWeight": 75, "interval": "4s"},
            "canary: 25 % steps up to 75 %, each at least 4s",
        ),
        (
            {
                "steps": [
                    {"setWeight": 5},
                    {"pause": {}},
                    {"setWeight": 50},
                    {"pause": {"duration": "10m"}},
                ]
            },
            "canary: 5 % -> pause -> 50 % -> pause 10m",
        ),
        ({"strategy": "abTest"}, "A/B test: the split holds until promoted or aborted"),
    ],
)
def test_strategy_text(rollout: dict[str, Any], expected: str) -> None:
    spec = parse_spec({"variants": [variant(), variant("v2", "candidate")], "rollout": rollout})
    assert strategy_text(spec) == expected
    assert strategy_text(None) == ""


def pod(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "metadata": {
            "name": "chat-v2-a",
            "labels": {LABEL_VARIANT: "v2"},
            "creationTimestamp": "2026-05-28T20:20:01Z",
        },
        "spec": {
            "nodeName": "gpu-1",
            "containers": [
                {
                    "name": "vllm",
                    "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1", "cpu": "4"}},
                },
                {"name": "sits-cache", "resources": {"limits": {"cpu": "1"}}},
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "vllm", "restartCount": 2, "state": {}},
                {"name": "sits-cache", "restartCount": 1, "state": {}},
            ],
        },
    }
    for key, value in changes.items():
        base[key] = {**base[key], **value}
    return base


@pytest.mark.parametrize(
    ("changes", "status", "ready", "node", "slices", "restarts"),
    [
        ({}, "Running", True, "gpu-1", "1g.10gb x1", 3),
        (
            {"metadata": {"deletionTimestamp": "2026-05-28T20:30:00Z"}},
            "Terminating",
            True,
            "gpu-1",
            "1g.10gb x1",
            3,
        ),
        (
            {
                "status": {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "False"}],
                    "containerStatuses": [
                        {"restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                    ],
                }
            },
            "CrashLoopBackOff",
            False,
            "gpu-1",
            "1g.10gb x1",
            7,
        ),
        (
            {
                "spec": {
                    "containers": [
                        {"resources": {"limits": {"nvidia.com/mig-3g.40gb": "2"}}},
                        {
                            "resources": {
                                "limits": {"nvidia.com/mig-3g.40gb": "1", "nvidia.com/gpu": "1"}
                            }
                        },
                    ]
                }
            },
            "Running",
            True,
            "gpu-1",
            "3g.40gb x3",
            3,
        ),
        (
            {
                "spec": {"nodeName": None},
                "status": {"phase": "Pending", "conditions": [], "containerStatuses": []},
            },
            "Pending",
            False,
            "-",
            "1g.10gb x1",
            0,
        ),
    ],
)
def test_pod_row(
    changes: dict[str, Any], status: str, ready: bool, node: str, slices: str, restarts: int
) -> None:
    row = pod_row(pod(**changes))
    assert (row.status, row.ready, row.node, row.slices, row.restarts) == (
        status,
        ready,
        node,
        slices,
        restarts,
    )


def test_view_rows_of_a_recorded_rollout() -> None:
    found, _ = snapshot("progressing")
    view = build(found)
    assert [(v.name, v.role, v.weight, v.ready, v.replicas, v.profile) for v in view.variants] == [
        ("v1", "stable", 80, 1, 1, "1g.10gb"),
        ("v2", "candidate", 20, 1, 1, "1g.10gb"),
    ]
    assert [(s.sli, s.value, s.verdict) for s in view.variants[1].slis] == [
        ("success_rate_5m", 1.0, "Pass"),
        ("latency_p95_ms", 61.2, "Pass"),
    ]
    assert [p.name for p in view.variants[1].pods] == ["chat-v2-6f8b4d9c7-k7q4m"]
    assert view.gateway is not None
    assert len(view.gateway.pods) == 2
    assert [d.action for d in view.decisions] == ["step", "restart"]  # newest first
    assert view.pending == ()


def test_pending_commands_are_those_not_acknowledged() -> None:
    found, _ = snapshot("paused")
    assert build(found).pending == ((command_annotation(Command.ABORT), "2026-05-28T20:23:30Z"),)


def test_command_annotations_are_the_operators() -> None:
    assert [command_annotation(c) for c in Command] == [f"{API_GROUP}/{c.value}" for c in Command]
    assert set(EFFECTS) == set(Command)


def test_command_value_is_new_each_time_and_says_when() -> None:
    first = command_value(datetime(2026, 5, 28, 20, 29, 31, 123456, tzinfo=UTC))
    assert first == "2026-05-28T20:29:31.123456Z"
    assert command_value(datetime(2026, 5, 28, 20, 29, 31, 123457, tzinfo=UTC)) != first


def test_patch_sets_only_the_annotation() -> None:
    key = command_annotation(Command.ABORT)
    assert patch_body(Command.ABORT, "v") == {"metadata": {"annotations": {key: "v"}}}


def test_confirmation_reads_the_stored_value_back() -> None:
    key = command_annotation(Command.RETRY)
    stored = {"metadata": {"annotations": {key: "2026-05-28T20:29:31.000001Z"}}}
    text = confirmation(Command.RETRY, "chat", "prod", stored)
    assert f'"chat" in namespace "prod": set {key}=2026-05-28T20:29:31.000001Z' in text
    assert EFFECTS[Command.RETRY] in text
    assert "kubectl sits get chat -n prod --watch" in text


RESOURCE = f"{PLURAL}.{API_GROUP}"
FORBIDDEN = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "reason": "Forbidden",
        "code": 403,
        "message": f'{RESOURCE} "chat" is forbidden: User "jane" cannot patch resource "{PLURAL}" '
        f'in API group "{API_GROUP}" in the namespace "prod"',
    }
)


@pytest.mark.parametrize(
    ("status", "body", "as_user", "says"),
    [
        (
            403,
            FORBIDDEN,
            None,
            [
                f'Forbidden: you may not patch {RESOURCE} "chat" in namespace "prod".',
                'User "jane" cannot patch resource',
                f"granting 'patch' on {RESOURCE}",
                f"kubectl auth can-i patch {RESOURCE}/chat -n prod",
            ],
        ),
        (403, FORBIDDEN, "jane", ["you (as jane) may not patch", "-n prod --as jane"]),
        (401, '{"message": "Unauthorized"}', None, ["Unauthorized: the apiserver did not accept"]),
        (
            404,
            f'{{"message": "{RESOURCE} \\"chat\\" not found"}}',
            None,
            [f'Not found: {RESOURCE} "chat" in namespace "prod"'],
        ),
        (
            500,
            "not json",
            None,
            [
                'patch sitsdeployments.sits.dev "chat" in namespace "prod" '
                "failed (500): Internal Server Error"
            ],
        ),
    ],
)
def test_refusal_names_verb_resource_and_the_check(
    status: int, body: str, as_user: str | None, says: list[str]
) -> None:
    call = Call("patch", RESOURCE, "prod", "chat")
    text = refusal(call, status, apiserver_message(body, "Internal Server Error"), as_user)
    for line in says:
        assert line in text, text


def test_refused_impersonation_is_not_blamed_on_the_verb() -> None:
    said = 'users "jane" is forbidden: User "bob" cannot impersonate resource "users"'
    text = refusal(Call("patch", RESOURCE, "prod", "chat"), 403, said, "jane")
    assert text.startswith("Forbidden: you may not act as jane (--as)")
    assert "may not patch" not in text


def test_refusal_of_a_cluster_wide_read() -> None:
    text = refusal(Call("get", "sitspolicies.sits.dev", None, "sits2026"), 403, "no")
    assert 'get sitspolicies.sits.dev "sits2026" (cluster-wide)' in text
    assert "kubectl auth can-i get sitspolicies.sits.dev/sits2026\n" not in text
    assert text.endswith("kubectl auth can-i get sitspolicies.sits.dev/sits2026")


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_output_is_the_object_without_managed_fields(output: str) -> None:
    obj = recorded("progressing")["object"]
    obj["metadata"]["managedFields"] = [{"manager": "sits-operator"}]
    text = document(obj, output)
    shown = json.loads(text) if output == "json" else yaml.safe_load(text)
    assert "managedFields" not in shown["metadata"]
    assert shown["status"] == obj["status"]
    assert obj["metadata"]["managedFields"], "the caller's object is left alone"


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (None, "-"),
        (0, "0s"),
        (42, "42s"),
        (119, "119s"),
        (192, "3m12s"),
        (600, "10m"),
        (7500, "2h5m"),
        (4 * 3600, "4h"),
        (49 * 3600, "2d1h"),
        (10 * 86400, "10d"),
    ],
)
def test_age_like_kubectl(seconds: int | None, expected: str) -> None:
    assert age(None if seconds is None else 1000.0, 1000.0 + (seconds or 0)) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(None, "-"), (float("nan"), "-"), (0.99871, "0.9987"), (1.0, "1")]
)
def test_number(value: float | None, expected: str) -> None:
    assert number(value) == expected
