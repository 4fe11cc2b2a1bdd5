"""The pragmatic strategic merge of pod template patches, case by case."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sits_operator.core.strategic_merge import strategic_merge

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"sits.dev/variant": "v1"}, "annotations": {"a": "1"}},
    "spec": {
        "containers": [
            {
                "name": "vllm",
                "image": "vllm",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            },
            {"name": "sits-cache", "image": "cache"},
        ],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "terminationGracePeriodSeconds": 60,
    },
}


@pytest.mark.parametrize(
    ("patch", "expected_changes"),
    [
        pytest.param({}, {}, id="empty-patch-changes-nothing"),
        pytest.param(
            {"metadata": {"labels": {"team": "ml"}}},
            {("metadata", "labels"): {"sits.dev/variant": "v1", "team": "ml"}},
            id="maps-merge-key-by-key",
        ),
        pytest.param(
            {"spec": {"terminationGracePeriodSeconds": 300, "runtimeClassName": "nvidia"}},
            {
                ("spec", "terminationGracePeriodSeconds"): 300,
                ("spec", "runtimeClassName"): "nvidia",
            },
            id="scalars-replaced-and-added",
        ),
        pytest.param(
            {"metadata": {"annotations": {"a": None}}},
            {("metadata", "annotations"): {}},
            id="null-removes-a-key",
        ),
        pytest.param(
            {"spec": {"tolerations": [{"key": "spot", "operator": "Exists"}]}},
            {("spec", "tolerations"): [{"key": "spot", "operator": "Exists"}]},
            id="lists-without-merge-key-are-replaced",
        ),
        pytest.param(
            {"spec": {"volumes": [{"name": "dshm", "emptyDir": {"sizeLimit": "8Gi"}}]}},
            {
                ("spec", "volumes"): [
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}
                ]
            },
            id="volumes-merge-by-name",
        ),
        pytest.param(
            {"spec": {"volumes": [{"name": "models", "emptyDir": {}}]}},
            {
                ("spec", "volumes"): [
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
                    {"name": "models", "emptyDir": {}},
                ]
            },
            id="new-volume-appended",
        ),
    ],
)
def test_merge_rules(patch: dict[str, Any], expected_changes: dict[tuple[str, str], Any]) -> None:
    expected = copy.deepcopy(TEMPLATE)
    for (section, key), value in expected_changes.items():
        expected[section][key] = value
    assert strategic_merge(TEMPLATE, patch) == expected


def test_containers_merge_by_name_and_env_inside_them_by_name() -> None:
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "vllm",
                    "env": [{"name": "B", "value": "two"}, {"name": "C", "value": "3"}],
                    "volumeMounts": [{"name": "models", "mountPath": "/models"}],
                    "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                },
                {"name": "log-shipper", "image": "fluent-bit"},
            ]
        }
    }
    containers = strategic_merge(TEMPLATE, patch)["spec"]["containers"]
    assert [c["name"] for c in containers] == ["vllm", "sits-cache", "log-shipper"]
    vllm = containers[0]
    assert vllm["image"] == "vllm", "fields the patch does not name stay"
    assert vllm["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "two"},
        {"name": "C", "value": "3"},
    ]
    assert vllm["volumeMounts"] == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "models", "mountPath": "/models"},
    ], "volumeMounts merge by mountPath"
    assert vllm["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert containers[1] == {"name": "sits-cache", "image": "cache"}


def test_a_null_field_of_a_container_is_removed() -> None:
    patch = {"spec": {"containers": [{"name": "vllm", "volumeMounts": None}]}}
    vllm = strategic_merge(TEMPLATE, patch)["spec"]["containers"][0]
    assert "volumeMounts" not in vllm
    assert vllm["image"] == "vllm"


def test_a_keyed_list_with_an_item_lacking_the_key_is_replaced() -> None:
    """Without the key there is nothing to merge on: the patch's list stands."""
    patch: dict[str, Any] = {"spec": {"volumes": [{"emptyDir": {}}]}}
    assert strategic_merge(TEMPLATE, patch)["spec"]["volumes"] == [{"emptyDir": {}}]


def test_neither_argument_is_modified() -> None:
    base, patch = copy.deepcopy(TEMPLATE), {"spec": {"containers": [{"name": "vllm", "x": [1]}]}}
    before_patch = copy.deepcopy(patch)
    merged = strategic_merge(base, patch)
    merged["spec"]["containers"][0]["x"].append(2)
    merged["metadata"]["labels"]["new"] = "1"
    assert base == TEMPLATE
    assert patch == before_patch
