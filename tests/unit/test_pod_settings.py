"""Users' pod settings: how podDefaults and a variant's pod merge, and where they land."""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.core import naming
from sits_operator.core.pod_settings import effective_pod_settings, merge_pod_settings
from sits_operator.core.render import GPU_TOLERATION, render_children
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import PodSettings
from tests.unit.factories import OWNER, spec, variant

SETTINGS = OperatorSettings()
HF_TOKEN = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
SPOT = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}


def _settings(**raw: Any) -> PodSettings:
    return PodSettings.model_validate(raw)


@pytest.mark.parametrize(
    ("defaults", "own", "expected"),
    [
        pytest.param({}, {}, {}, id="nothing"),
        pytest.param({"env": [HF_TOKEN]}, {}, {"env": [HF_TOKEN]}, id="defaults-only"),
        pytest.param({}, {"tolerations": [SPOT]}, {"tolerations": [SPOT]}, id="own-only"),
        pytest.param(
            {"env": [HF_TOKEN], "tolerations": [SPOT]},
            {"tolerations": [DEDICATED]},
            {"env": [HF_TOKEN], "tolerations": [DEDICATED]},
            id="lists-replaced-whole",
        ),
        pytest.param(
            {"tolerations": [SPOT]},
            {"tolerations": []},
            {"tolerations": []},
            id="empty-list-clears",
        ),
        pytest.param(
            {"labels": {"team": "ml", "tier": "gold"}, "nodeSelector": {"zone": "a"}},
            {"labels": {"tier": "silver"}, "nodeSelector": {"pool": "h200"}},
            {
                "labels": {"team": "ml", "tier": "silver"},
                "nodeSelector": {"zone": "a", "pool": "h200"},
            },
            id="maps-merged-key-by-key-variant-wins",
        ),
        pytest.param(
            {"affinity": {"nodeAffinity": {"a": [1]}, "podAntiAffinity": {"b": 1}}},
            {"affinity": {"nodeAffinity": {"a": [2]}}},
            {"affinity": {"nodeAffinity": {"a": [2]}, "podAntiAffinity": {"b": 1}}},
            id="nested-maps-merge-their-lists-replace",
        ),
        pytest.param(
            {"serviceAccountName": "inference", "priorityClassName": "high"},
            {"priorityClassName": "low"},
            {"serviceAccountName": "inference", "priorityClassName": "low"},
            id="scalars-variant-wins",
        ),
        pytest.param(
            {"podTemplate": {"spec": {"containers": [{"name": "vllm", "stdin": True}]}}},
            {"podTemplate": {"spec": {"containers": [{"name": "sidekick", "image": "x"}]}}},
            {
                "podTemplate": {
                    "spec": {
                        "containers": [
                            {"name": "vllm", "stdin": True},
                            {"name": "sidekick", "image": "x"},
                        ]
                    }
                }
            },
            id="pod-template-patches-merged-strategically",
        ),
    ],
)
def test_variant_settings_merge_over_defaults(
    defaults: dict[str, Any], own: dict[str, Any], expected: dict[str, Any]
) -> None:
    merged = merge_pod_settings(_settings(**defaults), _settings(**own))
    assert merged == _settings(**expected)


def test_effective_settings_come_from_the_spec() -> None:
    s = spec(
        variant(pod={"labels": {"tier": "b"}}),
        variant("v2", "candidate"),
        podDefaults={"labels": {"team": "ml"}},
    )
    assert effective_pod_settings(s, s.variants[0]).labels == {"team": "ml", "tier": "b"}
    assert effective_pod_settings(s, s.variants[1]).labels == {"team": "ml"}


def _deployments(**extra: Any) -> dict[str, dict[str, Any]]:
    v1_pod = extra.pop("v1_pod", None)
    first = variant(gpuProduct="NVIDIA-A100-SXM4-80GB", **({"pod": v1_pod} if v1_pod else {}))
    manifests = render_children(OWNER, spec(first, variant("v2", "candidate"), **extra), SETTINGS)
    return {
        m["metadata"]["name"]: m
        for m in manifests
        if m["kind"] == "Deployment" and naming.LABEL_VARIANT in m["metadata"]["labels"]
    }


def _pod(deployment: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def _container(deployment: dict[str, Any], name: naming.Container) -> dict[str, Any]:
    return next(c for c in _pod(deployment)["containers"] if c["name"] == name)


def test_env_and_env_from_reach_vllm_only_after_the_operators_env() -> None:
    config = {"configMapRef": {"name": "vllm-settings"}}
    deployments = _deployments(podDefaults={"env": [HF_TOKEN], "envFrom": [config]})
    for deployment in deployments.values():
        vllm = _container(deployment, naming.Container.VLLM)
        assert vllm["env"][0]["name"] == naming.ENV_HF_TELEMETRY
        assert vllm["env"][-1] == HF_TOKEN
        assert vllm["envFrom"] == [config]
        sidecar = _container(deployment, naming.Container.CACHE)
        assert "HF_TOKEN" not in {e["name"] for e in sidecar["env"]}
        assert "envFrom" not in sidecar


def test_no_pod_settings_render_no_pod_fields() -> None:
    pod = _pod(_deployments()["chat-v2"])
    assert pod["tolerations"] == [GPU_TOLERATION]
    assert "nodeSelector" not in pod
    for absent in ("imagePullSecrets", "serviceAccountName", "affinity", "priorityClassName"):
        assert absent not in pod
    assert "envFrom" not in _container(_deployments()["chat-v2"], naming.Container.VLLM)


def test_user_tolerations_come_after_the_gpu_toleration() -> None:
    deployments = _deployments(podDefaults={"tolerations": [SPOT]}, v1_pod={"tolerations": []})
    assert _pod(deployments["chat-v2"])["tolerations"] == [GPU_TOLERATION, SPOT]
    assert _pod(deployments["chat-v1"])["tolerations"] == [GPU_TOLERATION], "cleared by v1"


def test_node_selector_adds_to_the_gpu_product() -> None:
    deployments = _deployments(podDefaults={"nodeSelector": {"pool": "inference"}})
    assert _pod(deployments["chat-v1"])["nodeSelector"] == {
        "pool": "inference",
        naming.NODE_LABEL_GPU_PRODUCT: "NVIDIA-A100-SXM4-80GB",
    }
    assert _pod(deployments["chat-v2"])["nodeSelector"] == {"pool": "inference"}


def test_pod_level_fields_are_passed_through() -> None:
    affinity: dict[str, Any] = {
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}
    }
    pod = _pod(
        _deployments(
            podDefaults={
                "imagePullSecrets": [{"name": "registry"}],
                "serviceAccountName": "inference",
                "affinity": affinity,
                "priorityClassName": "inference-high",
            }
        )["chat-v1"]
    )
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["serviceAccountName"] == "inference"
    assert pod["affinity"] == affinity
    assert pod["priorityClassName"] == "inference-high"


def test_labels_and_annotations_go_to_the_pods_not_the_deployment() -> None:
    deployment = _deployments(
        podDefaults={"labels": {"team": "ml"}, "annotations": {"owner": "ml@example.com"}}
    )["chat-v1"]
    template = deployment["spec"]["template"]["metadata"]
    assert template["labels"]["team"] == "ml"
    assert template["labels"][naming.LABEL_VARIANT] == "v1", "the operator's stay"
    assert template["annotations"]["owner"] == "ml@example.com"
    assert template["annotations"][naming.ANNOTATION_SCRAPE] == "true"
    assert "team" not in deployment["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == naming.selector_labels("chat", "v1")


def test_pod_template_patch_is_applied_last() -> None:
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/default-container": "vllm"}},
        "spec": {
            "runtimeClassName": "nvidia",
            "volumes": [{"name": "dshm", "emptyDir": {"sizeLimit": "16Gi"}}],
            "containers": [
                {"name": "vllm", "volumeMounts": [{"name": "cache", "mountPath": "/root/.cache"}]},
                {"name": "log-shipper", "image": "fluent-bit"},
            ],
        },
    }
    deployment = _deployments(podDefaults={"podTemplate": patch})["chat-v1"]
    pod = _pod(deployment)
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["volumes"][0] == {
        "name": "dshm",
        "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"},
    }
    assert [c["name"] for c in pod["containers"]] == ["vllm", "sits-cache", "log-shipper"]
    vllm = pod["containers"][0]
    assert vllm["volumeMounts"][0]["mountPath"] == "/dev/shm", "the operator's mounts stay"
    assert vllm["volumeMounts"][-1] == {"name": "cache", "mountPath": "/root/.cache"}
    assert vllm["args"][:2] == ["--model", "/models/llama"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kubectl.kubernetes.io/default-container"] == "vllm"
    assert annotations[naming.ANNOTATION_SCRAPE] == "true"


def _hashes(**extra: Any) -> dict[str, str]:
    return {
        name: d["metadata"]["annotations"][naming.ANNOTATION_TEMPLATE_HASH]
        for name, d in _deployments(**extra).items()
    }


@pytest.mark.parametrize(
    ("extra", "changed"),
    [
        pytest.param({}, set(), id="nothing"),
        pytest.param({"podDefaults": {"env": [HF_TOKEN]}}, {"chat-v1", "chat-v2"}, id="defaults"),
        pytest.param({"v1_pod": {"labels": {"team": "ml"}}}, {"chat-v1"}, id="one-variant"),
    ],
)
def test_pod_settings_change_the_hash_of_the_variants_they_reach(
    extra: dict[str, Any], changed: set[str]
) -> None:
    before, after = _hashes(), _hashes(**extra)
    assert {name for name in before if before[name] != after[name]} == changed
