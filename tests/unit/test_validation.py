"""Semantic checks the schema cannot make, and the quantity parser they rely on."""

from __future__ import annotations

import pytest

from sits_operator.core.quantity import parse_bytes
from sits_operator.core.validation import semantic_problems
from sits_operator.model.settings import OperatorSettings
from tests.unit.factories import spec, variant


@pytest.mark.parametrize(
    ("first", "fragment"),
    [
        pytest.param(
            variant(lora={"enabled": False, "adapters": [{"name": "a", "source": "/a"}]}),
            "spec.variants[0].lora: 1 adapter(s) listed but lora.enabled is false",
            id="adapters-with-lora-disabled",
        ),
        pytest.param(
            variant(migProfile="1g.10gb", modelMemory="9Gi"),
            "spec.variants[0].modelMemory: 9Gi of weights leaves",
            id="model-too-big",
        ),
        pytest.param(
            variant(migProfile="1g.18gb", gpuProduct="NVIDIA-A100-SXM4-80GB"),
            "spec.variants[0].migProfile: 1g.18gb is not offered by",
            id="wrong-product",
        ),
        pytest.param(
            variant(modelMemory="lots"), "spec.variants[0].modelMemory: 'lots'", id="bad-quantity"
        ),
        pytest.param(
            variant(
                lora={
                    "adapters": [
                        {"name": "a", "source": "/a", "pinned": True},
                        {"name": "b", "source": "/b", "pinned": True},
                        {"name": "c", "source": "/c"},
                    ]
                },
                cache={"lora": {"maxResident": 2}},
            ),
            "spec.variants[0].cache.lora.maxResident: 2 slot(s) cannot hold 2 pinned",
            id="pinned-fill-every-residency-slot",
        ),
        pytest.param(
            variant(startupTimeout="10s"),
            "spec.variants[0].startupTimeout: 10s must be between 30s and 24h",
            id="startup-budget-too-short-for-any-model",
        ),
        pytest.param(
            variant(startupTimeout="25h"),
            "spec.variants[0].startupTimeout: 25h must be between 30s and 24h",
            id="startup-budget-hides-a-hang",
        ),
        pytest.param(
            variant(startupTimeout="soon"),
            "spec.variants[0].startupTimeout: 'soon' is not a duration",
            id="startup-budget-not-a-duration",
        ),
    ],
)
def test_problems_name_the_field(first: dict[str, object], fragment: str) -> None:
    problems = semantic_problems(spec(first, variant("v2", "candidate")), OperatorSettings())
    assert any(fragment in p for p in problems), problems


def test_weight_for_unknown_variant() -> None:
    s = spec(traffic={"initialWeights": [{"variant": "v9", "weight": 100}]})
    assert semantic_problems(s, OperatorSettings()) == [
        "spec.traffic.initialWeights[0].variant: no variant named 'v9'"
    ]


@pytest.mark.parametrize(
    "good",
    [
        variant(),
        variant(modelMemory="2Gi"),
        variant(migProfile="7g.80gb", modelMemory="60Gi"),
        variant(startupTimeout="30s"),
        variant(startupTimeout="24h"),
        variant(startupTimeout="1h30m"),
    ],
)
def test_valid_specs_have_no_problems(good: dict[str, object]) -> None:
    assert semantic_problems(spec(good, variant("v2", "candidate")), OperatorSettings()) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [("512", 512), ("1Ki", 1024), ("1.5Gi", 3 * 2**29), ("2G", 2 * 10**9), ("7Mi", 7 * 2**20)],
)
def test_parse_bytes(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1.5.3G", "-1Gi", "1gb", "1m"])
def test_parse_bytes_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a memory quantity"):
        parse_bytes(text)


def _template(*containers: dict[str, object], **spec_fields: object) -> dict[str, object]:
    return {"spec": {"containers": list(containers), **spec_fields}}


# (where the settings go, the settings, the start of the problem that names the field)
POD_PROBLEMS: list[tuple[str, dict[str, object], str]] = [
    (
        "defaults",
        {"env": [{"name": "HF_HUB_DISABLE_TELEMETRY", "value": "0"}]},
        "spec.podDefaults.env[0].name: HF_HUB_DISABLE_TELEMETRY is set by the operator",
    ),
    (
        "variant",
        {"env": [{"name": "A"}, {"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING"}]},
        "spec.variants[0].pod.env[1].name: VLLM_ALLOW_RUNTIME_LORA_UPDATING is set",
    ),
    (
        "defaults",
        {"labels": {"sits.dev/variant": "x"}},
        "spec.podDefaults.labels: 'sits.dev/variant' is the operator's",
    ),
    (
        "variant",
        {"labels": {"app.kubernetes.io/instance": "chat"}},
        "spec.variants[0].pod.labels: 'app.kubernetes.io/instance' is the operator's",
    ),
    (
        "defaults",
        {"labels": {"team name": "ml"}},
        "spec.podDefaults.labels: 'team name' is not a valid key",
    ),
    (
        "variant",
        {"podTemplate": {"metadata": {"annotations": {"example.com/": "x"}}}},
        "spec.variants[0].pod.podTemplate.metadata.annotations: 'example.com/' is not a valid key",
    ),
    (
        "defaults",
        {"annotations": {"prometheus.io/scrape": "false"}},
        "spec.podDefaults.annotations: 'prometheus.io/scrape' is the operator's",
    ),
    (
        "defaults",
        {"annotations": {"sits.dev/template-hash": "x"}},
        "spec.podDefaults.annotations: 'sits.dev/template-hash' is the operator's",
    ),
    (
        "defaults",
        {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"}},
        "spec.podDefaults.nodeSelector: 'nvidia.com/gpu.product' is set from the variant's "
        "gpuProduct",
    ),
    (
        "defaults",
        {"podTemplate": {"spec": {"$patch": "replace"}}},
        "spec.podDefaults.podTemplate.spec.$patch: patch directives are not supported",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "vllm", "env": [{"$patch": "delete", "name": "A"}]})},
        "spec.podDefaults.podTemplate.spec.containers[0].env[0].$patch: patch directives",
    ),
    (
        "defaults",
        {"podTemplate": {"kind": "Pod"}},
        "spec.podDefaults.podTemplate.kind: a pod template patch has only metadata and spec",
    ),
    (
        "defaults",
        {"podTemplate": {"metadata": {"name": "x"}}},
        "spec.podDefaults.podTemplate.metadata.name: only labels and annotations",
    ),
    (
        "variant",
        {"podTemplate": {"metadata": {"labels": {"sits.dev/deployment": "other"}}}},
        "spec.variants[0].pod.podTemplate.metadata.labels: 'sits.dev/deployment' is the operator's",
    ),
    (
        "variant",
        {"podTemplate": {"metadata": {"annotations": {"prometheus.io/port": "1"}}}},
        "spec.variants[0].pod.podTemplate.metadata.annotations: 'prometheus.io/port'",
    ),
    (
        "defaults",
        {"podTemplate": _template(tolerations=[])},
        "spec.podDefaults.podTemplate.spec.tolerations: the patch would replace the operator's "
        "GPU toleration",
    ),
    (
        "defaults",
        {"podTemplate": _template(nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H200"})},
        "spec.podDefaults.podTemplate.spec.nodeSelector: 'nvidia.com/gpu.product'",
    ),
    (
        "variant",
        {"podTemplate": _template({"name": "vllm", "args": ["--model", "x"]})},
        "spec.variants[0].pod.podTemplate.spec.containers[0].args: the operator owns the args "
        "of container vllm",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "vllm", "image": "other"})},
        "spec.podDefaults.podTemplate.spec.containers[0].image: the operator owns the image",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "x", "image": "y"}, {"name": "vllm", "command": []})},
        "spec.podDefaults.podTemplate.spec.containers[1].command: the operator owns",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "sits-cache", "ports": []})},
        "spec.podDefaults.podTemplate.spec.containers[0].ports: the operator owns the ports of "
        "container sits-cache",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "vllm", "livenessProbe": None})},
        "spec.podDefaults.podTemplate.spec.containers[0].livenessProbe: the operator owns",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "sits-cache", "readinessProbe": {}})},
        "spec.podDefaults.podTemplate.spec.containers[0].readinessProbe: the operator owns",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "vllm", "startupProbe": {}})},
        "spec.podDefaults.podTemplate.spec.containers[0].startupProbe: the operator owns",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "vllm", "env": [{"name": "HF_HUB_DISABLE_TELEMETRY"}]})},
        "spec.podDefaults.podTemplate.spec.containers[0].env[0].name: HF_HUB_DISABLE_TELEMETRY "
        "is set by the operator in container vllm",
    ),
    (
        "defaults",
        {"podTemplate": _template({"name": "sits-cache", "env": [{"name": "SITS_CACHE_MODEL"}]})},
        "spec.podDefaults.podTemplate.spec.containers[0].env[0].name: SITS_CACHE_MODEL is set",
    ),
    (
        "defaults",
        {
            "podTemplate": _template(
                {"name": "vllm", "resources": {"limits": {"nvidia.com/mig-7g.80gb": "1"}}}
            )
        },
        "spec.podDefaults.podTemplate.spec.containers[0].resources.limits: "
        "'nvidia.com/mig-7g.80gb' is the operator's: the MIG slice comes from migProfile",
    ),
    (
        "defaults",
        {
            "podTemplate": _template(
                {"name": "sits-cache", "resources": {"requests": {"nvidia.com/gpu": 1}}}
            )
        },
        "spec.podDefaults.podTemplate.spec.containers[0].resources.requests: 'nvidia.com/gpu'",
    ),
    (
        "defaults",
        {"podTemplate": _template({"image": "busybox"})},
        "spec.podDefaults.podTemplate.spec.containers[0].name: required (containers merge by name)",
    ),
    (
        "defaults",
        {"podTemplate": {"spec": {"containers": {"name": "vllm"}}}},
        "spec.podDefaults.podTemplate.spec.containers: must be a list",
    ),
]


@pytest.mark.parametrize(
    ("where", "settings", "fragment"),
    POD_PROBLEMS,
    ids=[f"{i}-{p[2].split(':')[0].rsplit('.', 1)[-1]}" for i, p in enumerate(POD_PROBLEMS)],
)
def test_pod_settings_may_not_override_what_the_operator_owns(
    where: str, settings: dict[str, object], fragment: str
) -> None:
    if where == "defaults":
        s = spec(variant(), variant("v2", "candidate"), podDefaults=settings)
    else:
        s = spec(variant(pod=settings), variant("v2", "candidate"))
    problems = semantic_problems(s, OperatorSettings())
    assert any(p.startswith(fragment) for p in problems), problems


VALID_POD_SETTINGS: dict[str, object] = {
    "env": [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}},
        {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"},
    ],
    "envFrom": [{"secretRef": {"name": "more"}}],
    "labels": {"team": "ml", "example.com/sits.dev": "x"},
    "annotations": {"owner": "ml", "prometheus.io/scheme": "http"},
    "nodeSelector": {"pool": "gpu"},
    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    "podTemplate": {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"a": "b"}},
        "spec": {
            "runtimeClassName": "nvidia",
            "volumes": [{"name": "dshm", "emptyDir": {"sizeLimit": "16Gi"}}],
            "containers": [
                {
                    "name": "vllm",
                    "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                    "resources": {"limits": {"ephemeral-storage": "50Gi"}},
                    "volumeMounts": [{"name": "cache", "mountPath": "/root/.cache"}],
                },
                {"name": "sits-cache", "resources": {"requests": {"cpu": "2"}}},
                {"name": "sidekick", "image": "busybox", "args": ["sleep"], "ports": []},
            ],
        },
    },
}


def test_pod_settings_that_only_add_have_no_problems() -> None:
    s = spec(
        variant(pod=VALID_POD_SETTINGS),
        variant("v2", "candidate"),
        podDefaults=VALID_POD_SETTINGS,
    )
    assert semantic_problems(s, OperatorSettings()) == []
