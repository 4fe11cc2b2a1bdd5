"""Table-driven tests of the pure rendering of children."""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.core import naming
from sits_operator.core.render import render_children, template_hash
from sits_operator.core.vllm import kv_cache_bytes
from sits_operator.model.settings import OperatorSettings
from tests.unit.factories import OWNER, spec, variant

SETTINGS = OperatorSettings()
GiB = 2**30


def _deployment(manifests: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(m for m in manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == name)


def _container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == name)


def test_children_are_a_deployment_and_service_per_variant_plus_one_root_service() -> None:
    manifests = render_children(OWNER, spec(), SETTINGS)
    assert [(m["kind"], m["metadata"]["name"]) for m in manifests] == [
        ("Deployment", "chat-v1"),
        ("Service", "chat-v1"),
        ("Deployment", "chat-v2"),
        ("Service", "chat-v2"),
        ("ServiceAccount", "chat-gateway"),
        ("Role", "chat-gateway"),
        ("RoleBinding", "chat-gateway"),
        ("Deployment", "chat-gateway"),
        ("PodDisruptionBudget", "chat-gateway"),
        ("Service", "chat"),
    ]
    for manifest in manifests:
        (ref,) = manifest["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "sits.dev/v1alpha1",
            "kind": "SitsDeployment",
            "name": "chat",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert manifest["metadata"]["namespace"] == "prod"
        assert manifest["metadata"]["labels"][naming.LABEL_DEPLOYMENT] == "chat"


@pytest.mark.parametrize(
    ("variant_extra", "expected_args", "absent_args"),
    [
        pytest.param(
            {},
            ["--model", "/models/llama", "--served-model-name", "chat", "--port", "8000"],
            ["--enable-lora", "--revision", "r1"],
            id="base-rollout-revision-is-no-vllm-revision",
        ),
        pytest.param(
            {"model": "Qwen/Qwen3-1.7B", "modelRevision": "70d244cc86ccca08cf5af4e1e306ecf9"},
            [
                "--model",
                "Qwen/Qwen3-1.7B",
                "--served-model-name",
                "chat",
                "--revision",
                "70d244cc86ccca08cf5af4e1e306ecf9",
                "--port",
            ],
            ["--tokenizer-revision"],
            id="hub-model-pinned-by-model-revision",
        ),
        pytest.param(
            {"model": "Qwen/Qwen3-1.7B"},
            ["--model", "Qwen/Qwen3-1.7B", "--served-model-name", "chat", "--port"],
            ["--revision"],
            id="hub-model-default-branch",
        ),
        pytest.param(
            {"model": "pvc://models/qwen3-1.7b/v2"},
            ["--model", "/var/lib/sits/volumes/models/qwen3-1.7b/v2", "--served-model-name"],
            ["--revision"],
            id="pvc-model-loaded-from-the-mount",
        ),
        pytest.param(
            {"lora": {"adapters": [{"name": "a", "source": "/a"}], "maxLoras": 2}},
            ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "16"],
            [],
            id="adapters-enable-lora",
        ),
        pytest.param(
            {
                "lora": {"adapters": [{"name": "a", "source": "/a"}], "maxLoras": 2},
                "cache": {"lora": {"maxResident": 6}},
            },
            ["--max-lora-rank", "16", "--max-cpu-loras", "6"],
            [],
            id="cpu-loras-hold-the-sidecar-residency",
        ),
        pytest.param(
            {
                "lora": {"adapters": [{"name": "a", "source": "/a"}], "maxLoras": 8},
                "cache": {"lora": {"maxResident": 4}},
            },
            ["--max-cpu-loras", "8"],
            [],
            id="cpu-loras-at-least-gpu-slots",
        ),
        pytest.param(
            {"lora": {"enabled": True, "adapters": []}},
            [],
            ["--enable-lora"],
            id="no-adapters-no-lora",
        ),
        pytest.param(
            {"vllmArgs": ["--max-model-len=4096"]},
            ["--max-model-len=4096"],
            [],
            id="user-args-appended",
        ),
    ],
)
def test_vllm_args(
    variant_extra: dict[str, Any], expected_args: list[str], absent_args: list[str]
) -> None:
    manifests = render_children(
        OWNER, spec(variant(**variant_extra), variant("v2", "candidate")), SETTINGS
    )
    args = _container(_deployment(manifests, "chat-v1"), "vllm")["args"]
    joined = " ".join(args)
    assert " ".join(expected_args) in joined
    assert args.count("--model") == 1
    for absent in absent_args:
        assert absent not in args
    if "vllmArgs" in variant_extra:
        assert args[-1] == "--max-model-len=4096"  # user args last


@pytest.mark.parametrize(
    ("profile", "model_memory", "expected_bytes"),
    [
        ("1g.10gb", None, int(10 * GiB * 0.4)),
        ("3g.40gb", None, int(40 * GiB * 0.4)),
        ("7g.80gb", "16Gi", int(80 * GiB * 0.9) - 16 * GiB),
        # H200: the driver's 32.5 GiB, not the name's 35.
        ("2g.35gb", "20G", int(32.5 * GiB * 0.9) - 20 * 10**9),
        ("1g.18gb", "3.5Gi", int(16 * GiB * 0.9) - int(3.5 * GiB)),
    ],
)
def test_kv_cache_is_sized_to_the_mig_slice(
    profile: str, model_memory: str | None, expected_bytes: int
) -> None:
    v = spec(variant(migProfile=profile, modelMemory=model_memory), variant("v2", "candidate"))
    assert kv_cache_bytes(v.variants[0], SETTINGS) == expected_bytes
    args = _container(_deployment(render_children(OWNER, v, SETTINGS), "chat-v1"), "vllm")["args"]
    assert args[args.index("--kv-cache-memory-bytes") + 1] == str(expected_bytes)


def test_pod_requests_one_mig_slice_and_carries_the_sidecar() -> None:
    v = spec(
        variant(
            migProfile="2g.20gb",
            gpuProduct="NVIDIA-A100-SXM4-80GB",
            resources={"cpu": "4", "memory": "32Gi"},
        ),
        variant("v2", "candidate"),
    )
    deployment = _deployment(render_children(OWNER, v, SETTINGS), "chat-v1")
    pod = deployment["spec"]["template"]["spec"]
    vllm = _container(deployment, "vllm")
    assert vllm["resources"]["limits"] == {
        "nvidia.com/mig-2g.20gb": "1",
        "cpu": "4",
        "memory": "32Gi",
    }
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert vllm["readinessProbe"]["httpGet"] == {"path": "/health", "port": "vllm"}
    assert vllm["livenessProbe"]["httpGet"]["path"] == "/health"
    sidecar = _container(deployment, "sits-cache")
    assert sidecar["image"] == SETTINGS.cache_sidecar_image
    assert sidecar["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels[naming.LABEL_VARIANT] == "v1"
    assert labels[naming.LABEL_REVISION] == "r1"
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert deployment["spec"]["selector"]["matchLabels"] == {
        naming.LABEL_DEPLOYMENT: "chat",
        naming.LABEL_VARIANT: "v1",
    }


@pytest.mark.parametrize(
    ("startup_timeout", "failure_threshold"),
    [
        pytest.param(None, 90, id="default-15m"),
        pytest.param("10m", 60, id="10m"),
        pytest.param("30s", 3, id="minimum"),
        pytest.param("95s", 10, id="rounded-up-to-cover-the-budget"),
        pytest.param("1h30m", 540, id="large-model"),
    ],
)
def test_startup_probe_covers_the_startup_budget(
    startup_timeout: str | None, failure_threshold: int
) -> None:
    extra = {} if startup_timeout is None else {"startupTimeout": startup_timeout}
    deployment = _deployment(render_children(OWNER, spec(variant(**extra)), SETTINGS), "chat-v1")
    vllm = _container(deployment, "vllm")
    startup = vllm["startupProbe"]
    assert startup == {
        "httpGet": {"path": "/health", "port": "vllm"},
        "periodSeconds": 10,
        "failureThreshold": failure_threshold,
    }
    # The kubelet starts these only after the startup probe passed: no delays of their own.
    for probe in ("readinessProbe", "livenessProbe"):
        assert vllm[probe]["httpGet"] == {"path": "/health", "port": "vllm"}
        assert "initialDelaySeconds" not in vllm[probe]


def test_vllm_probes_give_a_busy_server_time_to_answer() -> None:
    """A busy vLLM answers /health late: the kubelet's default 1 s timeout killed it."""
    vllm = _container(_deployment(render_children(OWNER, spec(), SETTINGS), "chat-v1"), "vllm")
    assert vllm["readinessProbe"] == {
        "httpGet": {"path": "/health", "port": "vllm"},
        "periodSeconds": 5,
        "timeoutSeconds": 3,
        "failureThreshold": 3,
    }
    assert vllm["livenessProbe"] == {
        "httpGet": {"path": "/health", "port": "vllm"},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 6,
    }


def test_failed_containers_leave_their_last_log_lines_as_termination_message() -> None:
    deployment = _deployment(render_children(OWNER, spec(), SETTINGS), "chat-v1")
    for name in ("vllm", "sits-cache"):
        assert _container(deployment, name)["terminationMessagePolicy"] == ("FallbackToLogsOnError")


def test_services_target_the_sidecar_port() -> None:
    manifests = render_children(OWNER, spec(), SETTINGS)
    services = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "Service"}
    assert services["chat-v2"]["spec"]["selector"] == {
        naming.LABEL_DEPLOYMENT: "chat",
        naming.LABEL_VARIANT: "v2",
    }
    # router builtin (the default): the root Service is the gateway's (test_gateway_render.py)
    assert services["chat"]["spec"]["selector"] == naming.gateway_selector_labels("chat")
    for svc in services.values():
        assert svc["spec"]["ports"][0]["targetPort"] == "http"


@pytest.mark.parametrize(
    ("change", "changed_children"),
    [
        pytest.param({}, set(), id="nothing"),
        pytest.param({"revision": "r9"}, {"Deployment/chat-v2", "Service/chat-v2"}, id="revision"),
        pytest.param({"replicas": 3}, {"Deployment/chat-v2"}, id="replicas"),
        pytest.param({"image": "vllm/vllm-openai:v0.12.0"}, {"Deployment/chat-v2"}, id="image"),
        pytest.param(
            {"model": "Qwen/Qwen3-1.7B", "modelRevision": "main"},
            {"Deployment/chat-v2"},
            id="model-revision",
        ),
        pytest.param({"startupTimeout": "40m"}, {"Deployment/chat-v2"}, id="startup-timeout"),
    ],
)
def test_template_hash_changes_only_for_the_changed_variant(
    change: dict[str, Any], changed_children: set[str]
) -> None:
    before = render_children(OWNER, spec(), SETTINGS)
    after = render_children(
        OWNER, spec(variant(), variant("v2", "candidate", **{"revision": "r2", **change})), SETTINGS
    )

    def hashes(ms: list[dict[str, Any]]) -> dict[str, str]:
        return {
            f"{m['kind']}/{m['metadata']['name']}": m["metadata"]["annotations"][
                naming.ANNOTATION_TEMPLATE_HASH
            ]
            for m in ms
        }

    old, new = hashes(before), hashes(after)
    assert {k for k in old if old[k] != new[k]} == changed_children


def test_template_hash_ignores_key_order() -> None:
    assert template_hash({"a": 1, "b": {"c": 2, "d": 3}}) == template_hash(
        {"b": {"d": 3, "c": 2}, "a": 1}
    )


def test_served_model_name_defaults_to_resource_name_and_can_be_set() -> None:
    named = spec(variant(), variant("v2", "candidate"), servedModelName="llama-chat")
    args = _container(_deployment(render_children(OWNER, named, SETTINGS), "chat-v2"), "vllm")[
        "args"
    ]
    assert args[args.index("--served-model-name") + 1] == "llama-chat"


def test_cache_settings_reach_the_sidecar_environment() -> None:
    v = spec(
        variant(cache={"semantic": {"similarityThreshold": 0.93, "ttl": "10m"}}),
        variant("v2", "candidate"),
    )
    env = {
        e["name"]: e["value"]
        for e in _container(
            _deployment(render_children(OWNER, v, SETTINGS), "chat-v1"), "sits-cache"
        )["env"]
    }
    assert env["SITS_CACHE_SEMANTIC_THRESHOLD"] == "0.93"
    assert env["SITS_CACHE_SEMANTIC_TTL"] == "10m"
    assert env["SITS_CACHE_UPSTREAM"] == "http://127.0.0.1:8000"
    assert env["SITS_CACHE_REVISION"] == "r1"
    # the request-metric contract's labels: namespace, sits_deployment, variant
    assert (env["SITS_CACHE_NAMESPACE"], env["SITS_CACHE_DEPLOYMENT"]) == (
        OWNER.namespace,
        OWNER.name,
    )
    assert env["SITS_CACHE_VARIANT"] == "v1"


def test_children_are_part_of_their_sitsdeployment_and_carry_no_argo_instance_label() -> None:
    """Argo CD tracks its applications by app.kubernetes.io/instance: a child labelled with
    the SitsDeployment's name there could be pruned by an application of that name."""
    manifests = render_children(OWNER, spec(), SETTINGS)
    pod_labels = [
        m["spec"]["template"]["metadata"]["labels"] for m in manifests if m["kind"] == "Deployment"
    ]
    for labels in [m["metadata"]["labels"] for m in manifests] + pod_labels:
        assert labels[naming.LABEL_PART_OF] == "chat"
        assert labels[naming.LABEL_DEPLOYMENT] == "chat"
        assert labels[naming.LABEL_MANAGED_BY] == naming.MANAGED_BY
        assert "app.kubernetes.io/instance" not in labels


def test_selectors_use_only_sits_labels_which_never_change() -> None:
    """A Deployment's selector is immutable: an operator upgrade must not change it."""
    for manifest in render_children(OWNER, spec(), SETTINGS):
        spec_ = manifest.get("spec")
        if spec_ is None or "selector" not in spec_:
            continue  # ServiceAccount, Role, RoleBinding: nothing selected
        selector = spec_["selector"].get("matchLabels", spec_["selector"])
        assert selector
        assert all(key.startswith("sits.dev/") for key in selector), selector


def test_operator_env_names_are_the_ones_users_may_not_set() -> None:
    """core/pod_validation.py refuses these names: they must cover what is rendered."""
    lora = {"adapters": [{"name": "a", "source": "/a"}]}
    deployment = _deployment(
        render_children(OWNER, spec(variant(lora=lora), variant("v2", "candidate")), SETTINGS),
        "chat-v1",
    )
    vllm_env = {e["name"] for e in _container(deployment, "vllm")["env"]}
    assert vllm_env == set(naming.OWNED_VLLM_ENV)
    for env in _container(deployment, "sits-cache")["env"]:
        assert env["name"].startswith(naming.SIDECAR_ENV_PREFIX)
