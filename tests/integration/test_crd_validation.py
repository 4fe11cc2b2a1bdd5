"""The CRDs against a real kube-apiserver: what they accept, default, and reject, and why.

Every malformed object must be rejected by the apiserver itself (schema or CEL) with an error
that names the offending field, because that error is all a user running ``kubectl apply`` or
a GitOps tool ever sees. The cases are table-driven: a valid object, one mutation, the field
path (and words) the error must contain.
"""

from __future__ import annotations

import copy
import itertools
import json
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sits_operator.model.policy import DEFAULT_PROMETHEUS_URL

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((REPO / "examples").glob("*.yaml")) + sorted((REPO / "policies").glob("*.yaml"))

Obj = dict[str, Any]
Mutation = Callable[[Obj], None]


# --------------------------------------------------------------- helpers


def sitsd(name: str = "chat") -> Obj:
    """A small valid SitsDeployment: stable v1 and candidate v2, 90/10."""
    return {
        "apiVersion": "sits.dev/v1alpha1",
        "kind": "SitsDeployment",
        "metadata": {"name": name},
        "spec": {
            "variants": [
                {
                    "name": "v1",
                    "role": "stable",
                    "image": "vllm/vllm-openai:v0.11.0",
                    "model": "Qwen/Qwen2.5-0.5B-Instruct",
                    "revision": "r1",
                    "migProfile": "1g.10gb",
                    "gpuProduct": "NVIDIA-A100-SXM4-80GB",
                },
                {
                    "name": "v2",
                    "role": "candidate",
                    "image": "vllm/vllm-openai:v0.11.0",
                    "model": "Qwen/Qwen2.5-0.5B-Instruct",
                    "revision": "r2",
                    "migProfile": "1g.10gb",
                },
            ],
            "traffic": {
                "initialWeights": [
                    {"variant": "v1", "weight": 90},
                    {"variant": "v2", "weight": 10},
                ]
            },
        },
    }


def sitspol(name: str = "strict") -> Obj:
    """A small valid SitsPolicy with one rule."""
    return {
        "apiVersion": "sits.dev/v1alpha1",
        "kind": "SitsPolicy",
        "metadata": {"name": name},
        "spec": {
            "rules": [
                {
                    "name": "success-rate",
                    "sli": "success_rate_5m",
                    "query": 'sum by (variant) (rate(sits_requests_total{outcome="success"}'
                    "[{{window}}]))",
                    "comparison": "<",
                    "threshold": 0.99,
                    "action": {"type": "rollback"},
                }
            ]
        },
    }


def dry_run(cluster: Any, obj: Obj, namespace: str | None, *, verb: str = "apply") -> Any:
    """Send ``obj`` to the apiserver with --dry-run=server; never raises on rejection."""
    args = [verb, "--dry-run=server", "-o", "json", "-f", "-"]
    if namespace is not None:
        args += ["-n", namespace]
    return cluster.kubectl(*args, input=json.dumps(obj), check=False)


def accepted(cluster: Any, obj: Obj, namespace: str | None) -> Obj:
    """The object as the apiserver would create it (defaults applied); fails if rejected.

    The name gets a random suffix: a dry-run create of a name that exists (sits2026 is
    installed by other tests) would fail with AlreadyExists.
    """
    obj = copy.deepcopy(obj)
    obj["metadata"]["name"] += f"-{uuid.uuid4().hex[:6]}"
    result = dry_run(cluster, obj, namespace, verb="create")
    assert result.returncode == 0, result.stderr
    stored: Obj = json.loads(result.stdout)
    return stored


def mutate(base: Callable[[], Obj], mutation: Mutation) -> Obj:
    obj = copy.deepcopy(base())
    mutation(obj)
    return obj


def variant(obj: Obj, i: int) -> Obj:
    v: Obj = obj["spec"]["variants"][i]
    return v


def setter(path: str, value: Any) -> Mutation:
    """A mutation that sets a dotted path (integers index lists), creating dicts on the way."""
    keys: list[str | int] = [int(k) if k.isdigit() else k for k in path.split(".")]

    def apply(obj: Obj) -> None:
        node: Any = obj
        for key in keys[:-1]:
            if isinstance(key, str) and key not in node:
                node[key] = {}
            node = node[key]
        node[keys[-1]] = value

    return apply


def drop_candidate(obj: Obj) -> None:
    obj["spec"]["variants"].pop()
    obj["spec"].pop("traffic")


def chain(*mutations: Mutation) -> Mutation:
    def apply(obj: Obj) -> None:
        for m in mutations:
            m(obj)

    return apply


# ----------------------------------------------- tests without a cluster


def _schema_nodes(node: Obj, path: str) -> list[tuple[str, Obj]]:
    found = [(path, node)]
    for name, child in node.get("properties", {}).items():
        found += _schema_nodes(child, f"{path}.{name}")
    if "items" in node:
        found += _schema_nodes(node["items"], f"{path}[]")
    return found


@pytest.mark.parametrize("crd", sorted((REPO / "crds").glob("*.yaml")), ids=lambda p: p.name)
def test_every_field_has_a_description(crd: Path) -> None:
    doc = yaml.safe_load(crd.read_text())
    (version,) = doc["spec"]["versions"]
    root = version["schema"]["openAPIV3Schema"]
    missing = [
        path
        for path, node in _schema_nodes(root, "")
        if not path.endswith("[]")
        and not path.startswith(".metadata")
        and not node.get("description")
    ]
    # Items are described by their array; the apiserver forbids descriptions on metadata.
    assert missing == []


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_manifests_are_commented_yaml(manifest: Path) -> None:
    text = manifest.read_text()
    assert text.startswith("#"), "each example and policy starts with a comment header"
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    assert docs
    assert all(d["apiVersion"] == "sits.dev/v1alpha1" for d in docs)


def _sitsdeployment_spec_schema() -> Obj:
    doc = yaml.safe_load((REPO / "crds" / "sitsdeployment.yaml").read_text())
    (version,) = doc["spec"]["versions"]
    spec: Obj = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def test_pod_defaults_and_variant_pod_have_one_schema() -> None:
    """The CRD cannot share a schema by reference: the two copies must stay the same."""
    spec = _sitsdeployment_spec_schema()
    defaults = spec["properties"]["podDefaults"]
    per_variant = spec["properties"]["variants"]["items"]["properties"]["pod"]
    assert defaults["properties"] == per_variant["properties"]


def commented_pod_defaults(manifest: Path) -> Obj | None:
    """The example's commented `podDefaults` block, uncommented (None when it has none)."""
    lines = manifest.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line == "  # podDefaults:"), None)
    if start is None:
        return None
    block = [lines[start]]
    block += itertools.takewhile(lambda line: line.startswith("  #   "), lines[start + 1 :])
    uncommented = "\n".join(line[:2] + line[4:] for line in block)
    found: Obj = yaml.safe_load(textwrap.dedent(uncommented))["podDefaults"]
    return found


EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


# ----------------------------------------------- acceptance and defaults


@pytest.mark.cluster
@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_manifest_is_accepted(local_cluster: Any, namespace: str, manifest: Path) -> None:
    result = local_cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", str(manifest), check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.cluster
def test_sitsdeployment_defaults(local_cluster: Any, namespace: str) -> None:
    obj = sitsd()
    variant(obj, 0)["lora"] = {"adapters": [{"name": "support", "source": "/adapters/support"}]}
    spec = accepted(local_cluster, obj, namespace)["spec"]

    v1 = spec["variants"][0]
    assert v1["replicas"] == 1
    assert v1["vllmArgs"] == []
    assert v1["startupTimeout"] == "15m"
    assert "modelRevision" not in v1, "the Hub repository's default branch unless pinned"
    assert v1["cache"] == {
        "semantic": {
            "enabled": True,
            "similarityThreshold": 0.8,
            "ttl": "1h",
            "maxEntries": 100000,
            "cacheNonDeterministic": False,
        },
        "vectorIndex": {"enabled": False, "hotListMinHits": 50, "hotListWindow": "1h"},
        "lora": {"maxResident": 4},
    }
    assert v1["lora"]["enabled"] is True
    assert v1["lora"]["maxLoras"] == 4
    assert v1["lora"]["maxLoraRank"] == 16
    assert v1["lora"]["adapters"] == [
        {"name": "support", "source": "/adapters/support", "pinned": False}
    ]
    assert "lora" not in spec["variants"][1], "lora stays off unless asked for"
    assert spec["traffic"]["router"] == "builtin"
    assert spec["traffic"]["stickySession"] == {"header": "x-session-id", "useOpenAIUser": True}
    assert spec["traffic"]["gateway"] == {"replicas": 2}  # router builtin's gateway
    assert spec["rollout"] == {
        "strategy": "canary",
        "stepWeight": 10,
        "maxWeight": 50,
        "scaleDownDelay": "2m",
    }, "interval has no default: unset, the policy alone paces the steps"
    assert spec["analysis"] == {"policyRef": {"name": "sits2026"}}
    assert "servedModelName" not in spec, "the operator defaults it from metadata.name"


@pytest.mark.cluster
@pytest.mark.parametrize(
    "model",
    [
        pytest.param({"model": "Qwen/Qwen3-1.7B", "modelRevision": "main"}, id="hub-branch"),
        pytest.param(
            {"model": "Qwen/Qwen3-1.7B", "modelRevision": "70d244cc86ccca08cf5af4e1e306ecf9"},
            id="hub-commit",
        ),
        pytest.param({"model": "pvc://models/qwen3-1.7b"}, id="pvc"),
        pytest.param({"model": "/opt/models/qwen3"}, id="path-in-image"),
        pytest.param({"model": "gpt2", "startupTimeout": "1h30m"}, id="long-startup"),
    ],
)
def test_model_sources_are_accepted(
    local_cluster: Any, namespace: str, model: dict[str, str]
) -> None:
    obj = sitsd()
    variant(obj, 1).update(model)
    stored = accepted(local_cluster, obj, namespace)["spec"]["variants"][1]
    assert {k: stored[k] for k in model} == model


@pytest.mark.cluster
def test_sitsdeployment_minimal_spec_gets_every_section(local_cluster: Any, namespace: str) -> None:
    obj = sitsd()
    del obj["spec"]["traffic"]
    spec = accepted(local_cluster, obj, namespace)["spec"]
    assert set(spec) == {"variants", "traffic", "rollout", "analysis"}
    assert "initialWeights" not in spec["traffic"]


@pytest.mark.cluster
def test_a_stable_alone_is_accepted(local_cluster: Any, namespace: str) -> None:
    """What remains once a promotion or a rollback is committed by removing the loser."""
    obj = sitsd()
    drop_candidate(obj)
    assert [v["name"] for v in accepted(local_cluster, obj, namespace)["spec"]["variants"]] == [
        "v1"
    ]


# Every pod setting at once, as a user on a real GPU cluster might write them.
POD_DEFAULTS: Obj = {
    "env": [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
        {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ],
    "envFrom": [{"configMapRef": {"name": "vllm-settings"}, "prefix": "VLLM_"}],
    "imagePullSecrets": [{"name": "registry-credentials"}],
    "serviceAccountName": "inference",
    "nodeSelector": {"topology.kubernetes.io/zone": "eu-west-1a"},
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"team": "ml"}},
                    },
                }
            ]
        }
    },
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    ],
    "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
    "labels": {"team": "ml", "cost-center": "c42"},
    "priorityClassName": "inference-high",
    "podTemplate": {
        "metadata": {"annotations": {"kubectl.kubernetes.io/default-container": "vllm"}},
        "spec": {
            "runtimeClassName": "nvidia",
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}],
            "containers": [
                {
                    "name": "vllm",
                    "resources": {"limits": {"ephemeral-storage": "50Gi"}},
                    "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                    "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                },
                {"name": "log-shipper", "image": "fluent/fluent-bit:3.1", "args": ["-q"]},
            ],
        },
    },
}


@pytest.mark.cluster
def test_pod_settings_are_kept_as_written(local_cluster: Any, namespace: str) -> None:
    obj = sitsd()
    obj["spec"]["podDefaults"] = POD_DEFAULTS
    own = {"tolerations": [], "labels": {"team": "search"}, "podTemplate": {"spec": {}}}
    variant(obj, 1)["pod"] = own
    spec = accepted(local_cluster, obj, namespace)["spec"]
    assert spec["podDefaults"] == POD_DEFAULTS, "nothing pruned, nothing defaulted"
    assert spec["variants"][1]["pod"] == own
    assert "pod" not in spec["variants"][0]


@pytest.mark.cluster
@pytest.mark.parametrize("manifest", EXAMPLES, ids=lambda p: p.name)
def test_commented_pod_defaults_of_examples_are_valid(
    local_cluster: Any, namespace: str, manifest: Path
) -> None:
    """What the examples tell users to uncomment must be accepted as it stands."""
    pod_defaults = commented_pod_defaults(manifest)
    assert pod_defaults is not None, "every example shows podDefaults for a real cluster"
    assert pod_defaults["env"][0]["valueFrom"]["secretKeyRef"]
    assert pod_defaults["tolerations"]
    obj = yaml.safe_load(manifest.read_text())
    obj["spec"]["podDefaults"] = pod_defaults
    assert accepted(local_cluster, obj, namespace)["spec"]["podDefaults"] == pod_defaults


@pytest.mark.cluster
def test_sitspolicy_defaults(local_cluster: Any, crds_installed: object) -> None:
    spec = accepted(local_cluster, sitspol(), None)["spec"]
    assert spec["interval"] == "1m"
    assert spec["minRequests"] == 20
    assert spec["noData"] == {"action": "hold", "after": "10m"}
    assert spec["onError"] == {"action": "freeze"}
    assert spec["promotion"] == {"consecutivePasses": 3}
    assert spec["failingContainers"] == {"periods": 2, "action": "rollback"}
    assert spec["prometheus"] == {"url": DEFAULT_PROMETHEUS_URL, "timeout": "5s"}
    rule = spec["rules"][0]
    assert rule["window"] == "5m"
    assert rule["compareTo"] == "threshold"


@pytest.mark.cluster
def test_sits2026_encodes_the_design(local_cluster: Any, crds_installed: object) -> None:
    doc = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
    spec = accepted(local_cluster, doc, None)["spec"]
    rules = {r["sli"]: r for r in spec["rules"]}
    assert set(rules) == {"success_rate_5m", "latency_p95_ms"}

    success = rules["success_rate_5m"]
    assert (success["comparison"], success["threshold"]) == ("<", 0.95)
    assert success["for"] == {"periods": 2}
    assert success["action"] == {"type": "rollback"}
    assert success["window"] == "5m"

    latency = rules["latency_p95_ms"]
    assert (latency["comparison"], latency["threshold"]) == (">", 200)
    assert latency["for"] == {"duration": "90s"}
    assert latency["action"] == {"type": "setWeight", "weight": 10}
    # A crash-looping candidate is held to the success-rate rule's count: 2 periods.
    assert spec["failingContainers"] == {"periods": 2, "action": "rollback"}

    for rule in rules.values():
        query = rule["query"]
        for placeholder in ("{{namespace}}", "{{deployment_regex}}", "{{window}}"):
            assert placeholder in query
        # one query returns every variant, of every SitsDeployment of a namespace (batched)
        assert "by ({{by}}" in query
        assert "{{variant}}" not in query


@pytest.mark.cluster
def test_status_subresource_and_printer_columns(local_cluster: Any, namespace: str) -> None:
    kubectl = local_cluster.kubectl
    kubectl("apply", "-n", namespace, "-f", str(REPO / "examples" / "chat-canary.yaml"))
    status = {
        "status": {
            "observedGeneration": 1,
            "phase": "Progressing",
            "stableVariant": "v1",
            "candidateVariant": "v2",
            "candidateWeight": 20,
            "candidateSuccessRate": 0.987,
            "candidateLatencyP95Ms": 142.5,
            "conditions": [
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "StepAdvanced",
                    "message": "candidate weight 20",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "variants": [{"name": "v1", "role": "stable", "readyReplicas": 1, "weight": 80}],
            "slis": [{"variant": "v2", "name": "success_rate_5m", "value": None, "window": "5m"}],
            "analysis": {"breaches": {"latency-p95": 1}, "history": [{"decision": "hold"}]},
        }
    }
    kubectl(
        "patch",
        "sitsdeployment",
        "chat",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    table = kubectl("get", "sitsd", "chat", "-n", namespace).stdout.split("\n")
    header, row = table[0].split(), table[1].split()
    assert header == [
        "NAME",
        "PHASE",
        "STABLE",
        "CANDIDATE",
        "WEIGHT",
        "SUCCESS",
        "P95MS",
        "AGE",
    ]
    assert row[:7] == ["chat", "Progressing", "v1", "v2", "20", "0.987", "142.5"]
    message = "variant v2 pod chat-v2-x container vllm: CrashLoopBackOff"
    kubectl(
        "patch",
        "sitsdeployment",
        "chat",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"message": message}}),
    )
    wide = kubectl("get", "sitsd", "chat", "-n", namespace, "-o", "wide").stdout.split("\n")
    assert wide[0].split()[-1] == "MESSAGE", "the phase's reason only in the wide output"
    assert wide[1].rstrip().endswith(message)

    stored = json.loads(kubectl("get", "sitsd", "chat", "-n", namespace, "-o", "json").stdout)
    assert stored["status"]["analysis"]["breaches"] == {"latency-p95": 1}, "kept unpruned"
    assert stored["spec"]["variants"][0]["name"] == "v1"
    # The main resource ignores status, the status subresource ignores spec.
    kubectl(
        "patch",
        "sitsdeployment",
        "chat",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Hacked"}}),
    )
    phase = kubectl(
        "get", "sitsd", "chat", "-n", namespace, "-o", "jsonpath={.status.phase}"
    ).stdout
    assert phase == "Progressing"


@pytest.mark.cluster
def test_categories_and_short_names(local_cluster: Any, namespace: str) -> None:
    kubectl = local_cluster.kubectl
    kubectl("apply", "-n", namespace, "-f", str(REPO / "examples" / "chat-canary.yaml"))
    in_category = kubectl("get", "sits", "-n", namespace, "-o", "name").stdout
    assert "sitsdeployment.sits.dev/chat" in in_category
    assert kubectl("get", "sitsd", "-n", namespace, "-o", "name").stdout.strip() == (
        "sitsdeployment.sits.dev/chat"
    )
    kubectl("get", "sitspol")


# -------------------------------------------- rejections: SitsDeployment

# (id, mutation, substrings the apiserver's error must contain: first the field path)
SITSD_CASES: list[tuple[str, Mutation, tuple[str, ...]]] = [
    (
        "duplicate-variant-names",
        setter("spec.variants.1.name", "v1"),
        ("spec.variants[1]", "Duplicate value"),
    ),
    (
        "variant-name-not-dns-label",
        chain(
            setter("spec.variants.1.name", "V_2"),
            setter("spec.traffic.initialWeights", []),
        ),
        ("spec.variants[1].name", "should match"),
    ),
    (
        "variant-name-too-long",
        setter("spec.variants.1.name", "a" * 21),
        ("spec.variants[1].name", "Too long"),
    ),
    (
        "no-stable-variant",
        setter("spec.variants.0.role", "candidate"),
        ("spec.variants", "exactly one variant with role stable, found none"),
    ),
    (
        "two-stable-variants",
        setter("spec.variants.1.role", "stable"),
        ("spec.variants", "exactly one variant with role stable, found more than one"),
    ),
    (
        "unknown-role",
        setter("spec.variants.1.role", "canary"),
        ("spec.variants[1].role", "Unsupported value"),
    ),
    (
        "no-variants",
        setter("spec.variants", []),
        ("spec.variants", "should have at least 1 items"),
    ),
    (
        "missing-image",
        lambda o: variant(o, 1).pop("image"),
        ("spec.variants[1].image", "Required value"),
    ),
    (
        "unknown-field-typo",
        setter("spec.variants.0.replica", 2),
        ('unknown field "spec.variants[0].replica"',),
    ),
    (
        "weight-over-100",
        chain(
            setter("spec.traffic.initialWeights.0.weight", 110),
            setter("spec.traffic.initialWeights.1.weight", -10),
        ),
        ("spec.traffic.initialWeights[0].weight", "less than or equal to 100"),
    ),
    (
        "weights-not-summing-to-100",
        setter("spec.traffic.initialWeights.0.weight", 80),
        ("spec.traffic.initialWeights", "must sum to 100"),
    ),
    (
        "weight-for-unknown-variant",
        setter("spec.traffic.initialWeights.1.variant", "v3"),
        ("spec.traffic.initialWeights", "must be the name of a variant in spec.variants"),
    ),
    (
        "duplicate-weight-entries",
        setter("spec.traffic.initialWeights.1.variant", "v1"),
        ("spec.traffic.initialWeights[1]", "Duplicate value"),
    ),
    (
        "unknown-mig-profile",
        setter("spec.variants.1.migProfile", "1g.6gb"),
        ("spec.variants[1].migProfile", "Unsupported value"),
    ),
    (
        "mig-profile-not-on-gpu-product",
        chain(
            setter("spec.variants.1.gpuProduct", "NVIDIA-H200"),
            setter("spec.variants.1.migProfile", "1g.10gb"),
        ),
        (
            "spec.variants[1].migProfile",
            "not offered by gpuProduct NVIDIA-H200",
            "1g.18gb, 1g.18gb+me, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb",
        ),
    ),
    (
        "unknown-gpu-product",
        setter("spec.variants.0.gpuProduct", "NVIDIA-B200"),
        ("spec.variants[0].gpuProduct", "Unsupported value"),
    ),
    (
        "negative-replicas",
        setter("spec.variants.0.replicas", -1),
        ("spec.variants[0].replicas", "greater than or equal to 0"),
    ),
    (
        "bad-revision-label",
        setter("spec.variants.0.revision", "v1/beta"),
        ("spec.variants[0].revision", "should match"),
    ),
    (
        "revision-too-long-for-a-label",
        setter("spec.variants.0.revision", "r" * 64),
        ("spec.variants[0].revision", "Too long"),
    ),
    (
        "vllm-args-set-port",
        setter("spec.variants.0.vllmArgs", ["--max-model-len=4096", "--port=9000"]),
        ("spec.variants[0].vllmArgs", "must not set", "found --port"),
    ),
    (
        "vllm-args-set-served-model-name",
        setter("spec.variants.1.vllmArgs", ["--served-model-name", "other"]),
        ("spec.variants[1].vllmArgs", "found --served-model-name"),
    ),
    (
        "vllm-args-set-revision",
        setter("spec.variants.1.vllmArgs", ["--revision=main"]),
        ("spec.variants[1].vllmArgs", "found --revision"),
    ),
    (
        "pvc-model-without-path",
        setter("spec.variants.0.model", "pvc://models"),
        ("spec.variants[0].model", "must name a PersistentVolumeClaim and a path"),
    ),
    (
        "pvc-model-with-empty-path",
        setter("spec.variants.0.model", "pvc://models/"),
        ("spec.variants[0].model", "pvc://<claim>/<path>"),
    ),
    (
        "pvc-model-with-bad-claim",
        setter("spec.variants.0.model", "pvc://Models_1/qwen"),
        ("spec.variants[0].model", "must name a PersistentVolumeClaim and a path"),
    ),
    (
        "pvc-model-leaving-its-claim",
        setter("spec.variants.0.model", "pvc://models/../etc/passwd"),
        ("spec.variants[0].model", "must not contain '..'"),
    ),
    (
        "model-revision-with-pvc-model",
        chain(
            setter("spec.variants.1.model", "pvc://models/qwen"),
            setter("spec.variants.1.modelRevision", "main"),
        ),
        ("spec.variants[1].modelRevision", "Forbidden", "only when model is a Hugging Face"),
    ),
    (
        "model-revision-with-path-in-image",
        chain(
            setter("spec.variants.0.model", "/opt/models/qwen"),
            setter("spec.variants.0.modelRevision", "main"),
        ),
        ("spec.variants[0].modelRevision", "Forbidden"),
    ),
    (
        "model-revision-not-a-git-ref",
        setter("spec.variants.0.modelRevision", "main branch"),
        ("spec.variants[0].modelRevision", "should match"),
    ),
    (
        "startup-timeout-too-short",
        setter("spec.variants.0.startupTimeout", "10s"),
        ("spec.variants[0].startupTimeout", "between 30s and 24h"),
    ),
    (
        "startup-timeout-too-long",
        setter("spec.variants.0.startupTimeout", "48h"),
        ("spec.variants[0].startupTimeout", "between 30s and 24h"),
    ),
    (
        "startup-timeout-not-a-duration",
        setter("spec.variants.0.startupTimeout", "10 minutes"),
        ("spec.variants[0].startupTimeout", "should match"),
    ),
    (
        "bad-model-memory-quantity",
        setter("spec.variants.0.modelMemory", "lots"),
        ("spec.variants[0].modelMemory", "should match"),
    ),
    (
        "bad-cpu-quantity",
        setter("spec.variants.0.resources", {"cpu": "4 cores"}),
        ("spec.variants[0].resources.cpu", "should match"),
    ),
    (
        "malformed-rollout-interval",
        setter("spec.rollout.interval", "1 minute"),
        ("spec.rollout.interval", "should match"),
    ),
    (
        "malformed-scale-down-delay",
        setter("spec.rollout.scaleDownDelay", "2 minutes"),
        ("spec.rollout.scaleDownDelay", "should match"),
    ),
    (
        "malformed-cache-ttl",
        setter("spec.variants.0.cache", {"semantic": {"ttl": "forever"}}),
        ("spec.variants[0].cache.semantic.ttl", "should match"),
    ),
    (
        "similarity-threshold-over-1",
        setter("spec.variants.0.cache", {"semantic": {"similarityThreshold": 1.5}}),
        ("spec.variants[0].cache.semantic.similarityThreshold", "less than or equal to 1"),
    ),
    (
        "vector-index-enabled-without-index",
        setter("spec.variants.0.cache", {"vectorIndex": {"enabled": True}}),
        ("spec.variants[0].cache.vectorIndex.indexRef", "required"),
    ),
    (
        "gateway-api-without-http-route",
        setter("spec.traffic.router", "gatewayAPI"),
        (
            "spec.traffic.httpRoute",
            "Required value",
            "required when spec.traffic.router is gatewayAPI",
        ),
    ),
    (
        "http-route-without-gateway-api",
        setter("spec.traffic.httpRoute", {"name": "chat"}),
        (
            "spec.traffic.httpRoute",
            "Forbidden",
            "only be set when spec.traffic.router is gatewayAPI",
        ),
    ),
    (
        "unknown-router",
        setter("spec.traffic.router", "istio"),
        ("spec.traffic.router", "Unsupported value"),
    ),
    (
        "name-too-long",
        setter("metadata.name", "a" * 43),
        ("metadata.name: Invalid value", "must be at most 42 characters"),
    ),
    (
        "set-weight-step-out-of-range",
        setter("spec.rollout.steps", [{"setWeight": 150}]),
        ("spec.rollout.steps[0].setWeight", "less than or equal to 100"),
    ),
    (
        "step-with-set-weight-and-pause",
        setter("spec.rollout.steps", [{"setWeight": 20}, {"setWeight": 40, "pause": {}}]),
        ("spec.rollout.steps[1]", "exactly one of setWeight or pause"),
    ),
    (
        "empty-step",
        setter("spec.rollout.steps", [{}]),
        ("spec.rollout.steps[0]", "exactly one of setWeight or pause"),
    ),
    (
        "malformed-pause-duration",
        setter("spec.rollout.steps", [{"pause": {"duration": "5 minutes"}}]),
        ("spec.rollout.steps[0].pause.duration", "should match"),
    ),
    (
        "max-weight-below-step-weight",
        setter("spec.rollout", {"stepWeight": 30, "maxWeight": 20}),
        ("spec.rollout.maxWeight", "greater than or equal to spec.rollout.stepWeight"),
    ),
    (
        "unknown-strategy",
        setter("spec.rollout.strategy", "blueGreen"),
        ("spec.rollout.strategy", "Unsupported value"),
    ),
    (
        # No confused deputy: a SitsDeployment may not choose the server nor the Secret.
        "names-its-own-prometheus",
        setter(
            "spec.analysis",
            {"prometheus": {"url": "http://evil.example:9090", "authSecretRef": {"name": "s"}}},
        ),
        ("spec.analysis.prometheus", "not accepted", "SitsPolicy"),
    ),
    (
        "bad-adapter-digest",
        setter(
            "spec.variants.0.lora",
            {"adapters": [{"name": "support", "source": "/a", "digest": "sha256:ABC"}]},
        ),
        ("spec.variants[0].lora.adapters[0].digest", "should match"),
    ),
    (
        "duplicate-adapter-names",
        setter(
            "spec.variants.0.lora",
            {"adapters": [{"name": "a", "source": "/a"}, {"name": "a", "source": "/b"}]},
        ),
        ("spec.variants[0].lora.adapters[1]", "Duplicate value"),
    ),
    (
        "more-pinned-adapters-than-lora-slots",
        setter(
            "spec.variants.0.lora",
            {
                "maxLoras": 1,
                "adapters": [
                    {"name": "a", "source": "/a", "pinned": True},
                    {"name": "b", "source": "/b", "pinned": True},
                ],
            },
        ),
        ("spec.variants[0].lora.adapters", "more adapters are pinned"),
    ),
    (
        "unsupported-lora-rank",
        setter("spec.variants.0.lora", {"maxLoraRank": 24}),
        ("spec.variants[0].lora.maxLoraRank", "Unsupported value"),
    ),
    (
        "bad-served-model-name",
        setter("spec.servedModelName", "chat model!"),
        ("spec.servedModelName", "should match"),
    ),
]


# Pod settings (spec.podDefaults, spec.variants[].pod) may add to the pods, never override
# what the operator owns; the error names the field and what to use instead.
POD_SETTINGS_CASES: list[tuple[str, Mutation, tuple[str, ...]]] = [
    (
        "pod-defaults-env-sets-the-operators-variable",
        setter("spec.podDefaults.env", [{"name": "HF_HUB_DISABLE_TELEMETRY", "value": "0"}]),
        ("spec.podDefaults.env[0].name", "HF_HUB_DISABLE_TELEMETRY is set by the operator"),
    ),
    (
        "variant-env-sets-the-operators-variable",
        setter("spec.variants.1.pod.env", [{"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING"}]),
        ("spec.variants[1].pod.env[0].name", "is set by the operator"),
    ),
    (
        "env-with-value-and-value-from",
        setter(
            "spec.podDefaults.env",
            [
                {
                    "name": "A",
                    "value": "x",
                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                }
            ],
        ),
        ("spec.podDefaults.env[0].valueFrom", "set value or valueFrom, not both"),
    ),
    (
        "env-value-from-two-sources",
        setter(
            "spec.podDefaults.env",
            [
                {
                    "name": "HF_TOKEN",
                    "valueFrom": {
                        "secretKeyRef": {"name": "hf", "key": "token"},
                        "configMapKeyRef": {"name": "hf", "key": "token"},
                    },
                }
            ],
        ),
        ("spec.podDefaults.env[0].valueFrom", "exactly one of secretKeyRef"),
    ),
    (
        "env-secret-key-ref-without-key",
        setter(
            "spec.podDefaults.env",
            [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf"}}}],
        ),
        ("spec.podDefaults.env[0].valueFrom.secretKeyRef.key", "Required value"),
    ),
    (
        "duplicate-env-names",
        setter(
            "spec.variants.0.pod.env", [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
        ),
        ("spec.variants[0].pod.env[1]", "Duplicate value"),
    ),
    (
        "env-from-without-source",
        setter("spec.podDefaults.envFrom", [{"prefix": "HF_"}]),
        ("spec.podDefaults.envFrom[0]", "exactly one of secretRef or configMapRef"),
    ),
    (
        "image-pull-secret-without-name",
        setter("spec.podDefaults.imagePullSecrets", [{}]),
        ("spec.podDefaults.imagePullSecrets[0].name", "Required value"),
    ),
    (
        "bad-service-account-name",
        setter("spec.variants.0.pod.serviceAccountName", "Inference_SA"),
        ("spec.variants[0].pod.serviceAccountName", "should match"),
    ),
    (
        "pod-label-sits-selector",
        setter("spec.podDefaults.labels", {"team": "ml", "sits.dev/variant": "v9"}),
        ("spec.podDefaults.labels", "sits.dev/variant is the operator's"),
    ),
    (
        "pod-label-argo-instance",
        setter("spec.variants.1.pod.labels", {"app.kubernetes.io/instance": "chat"}),
        ("spec.variants[1].pod.labels", "app.kubernetes.io/instance is the operator's"),
    ),
    (
        "pod-label-bad-value",
        setter("spec.podDefaults.labels", {"team": "machine learning"}),
        ("spec.podDefaults.labels.team", "should match"),
    ),
    (
        "pod-annotation-scrape-port",
        setter("spec.podDefaults.annotations", {"prometheus.io/port": "9000"}),
        ("spec.podDefaults.annotations", "prometheus.io/port is the operator's"),
    ),
    (
        "node-selector-gpu-product",
        setter("spec.podDefaults.nodeSelector", {"nvidia.com/gpu.product": "NVIDIA-H200"}),
        ("spec.podDefaults.nodeSelector", "use the variant's gpuProduct"),
    ),
    (
        "toleration-unknown-operator",
        setter("spec.podDefaults.tolerations", [{"key": "gpu", "operator": "In"}]),
        ("spec.podDefaults.tolerations[0].operator", "Unsupported value"),
    ),
    (
        "affinity-typo",
        setter("spec.podDefaults.affinity", {"nodeAfinity": {}}),
        ('unknown field "spec.podDefaults.affinity.nodeAfinity"',),
    ),
    (
        "pod-template-tolerations-would-drop-the-gpu-toleration",
        setter("spec.podDefaults.podTemplate", {"spec": {"tolerations": [{"operator": "Exists"}]}}),
        ("spec.podDefaults.podTemplate.spec.tolerations", "use tolerations"),
    ),
    (
        "pod-template-vllm-args",
        setter(
            "spec.variants.0.pod.podTemplate",
            {"spec": {"containers": [{"name": "vllm", "args": ["--model", "other"]}]}},
        ),
        (
            "spec.variants[0].pod.podTemplate.spec.containers[0]",
            "container vllm: the operator owns",
        ),
    ),
    (
        "pod-template-sidecar-probe",
        setter(
            "spec.podDefaults.podTemplate",
            {
                "spec": {
                    "containers": [{"name": "sits-cache", "readinessProbe": {"periodSeconds": 60}}]
                }
            },
        ),
        ("spec.podDefaults.podTemplate.spec.containers[0]", "container sits-cache"),
    ),
    (
        "pod-template-vllm-port",
        setter(
            "spec.podDefaults.podTemplate",
            {"spec": {"containers": [{"name": "vllm", "ports": [{"containerPort": 9000}]}]}},
        ),
        ("spec.podDefaults.podTemplate.spec.containers[0]", "ports or probes"),
    ),
    (
        "pod-template-mig-limit",
        setter(
            "spec.podDefaults.podTemplate",
            {
                "spec": {
                    "containers": [
                        {"name": "vllm", "resources": {"limits": {"nvidia.com/mig-7g.80gb": 1}}}
                    ]
                }
            },
        ),
        ("spec.podDefaults.podTemplate.spec.containers[0].resources", "comes from migProfile"),
    ),
    (
        "pod-template-sidecar-env",
        setter(
            "spec.podDefaults.podTemplate",
            {
                "spec": {
                    "containers": [
                        {"name": "sits-cache", "env": [{"name": "SITS_CACHE_MODEL", "value": "x"}]}
                    ]
                }
            },
        ),
        ("spec.podDefaults.podTemplate.spec.containers[0].env", "operator's environment"),
    ),
    (
        "pod-template-container-without-name",
        setter("spec.podDefaults.podTemplate", {"spec": {"containers": [{"image": "busybox"}]}}),
        ("spec.podDefaults.podTemplate.spec.containers[0].name", "Required value"),
    ),
    (
        "pod-template-selector-label",
        setter(
            "spec.podDefaults.podTemplate", {"metadata": {"labels": {"sits.dev/deployment": "x"}}}
        ),
        ("spec.podDefaults.podTemplate.metadata.labels", "sits.dev/deployment is the operator's"),
    ),
    (
        "pod-template-node-selector-gpu-product",
        setter(
            "spec.variants.1.pod.podTemplate",
            {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"}}},
        ),
        ("spec.variants[1].pod.podTemplate.spec.nodeSelector", "gpuProduct"),
    ),
    (
        "pod-template-not-a-pod-template",
        setter("spec.podDefaults.podTemplate", {"kind": "Pod"}),
        ('unknown field "spec.podDefaults.podTemplate.kind"',),
    ),
]


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("mutation", "expected"),
    [c[1:] for c in SITSD_CASES + POD_SETTINGS_CASES],
    ids=[c[0] for c in SITSD_CASES + POD_SETTINGS_CASES],
)
def test_malformed_sitsdeployment_is_rejected(
    local_cluster: Any, namespace: str, mutation: Mutation, expected: tuple[str, ...]
) -> None:
    result = dry_run(local_cluster, mutate(sitsd, mutation), namespace)
    assert result.returncode != 0, f"accepted: {result.stdout}"
    missing = [text for text in expected if text not in result.stderr]
    assert not missing, f"error does not mention {missing}: {result.stderr}"


# ------------------------------------------------ rejections: SitsPolicy

SITSPOL_CASES: list[tuple[str, Mutation, tuple[str, ...]]] = [
    (
        "set-weight-action-without-weight",
        setter("spec.rules.0.action", {"type": "setWeight"}),
        ("spec.rules[0].action.weight", "required when action.type is setWeight"),
    ),
    (
        "weight-on-rollback-action",
        setter("spec.rules.0.action", {"type": "rollback", "weight": 10}),
        ("spec.rules[0].action.weight", "Forbidden", "only be set when action.type is setWeight"),
    ),
    (
        "for-with-periods-and-duration",
        setter("spec.rules.0.for", {"periods": 2, "duration": "90s"}),
        ("spec.rules[0].for", "exactly one of periods or duration"),
    ),
    (
        "for-with-zero-periods",
        setter("spec.rules.0.for", {"periods": 0}),
        ("spec.rules[0].for.periods", "greater than or equal to 1"),
    ),
    (
        "bad-comparison",
        setter("spec.rules.0.comparison", "=="),
        ("spec.rules[0].comparison", "Unsupported value"),
    ),
    (
        "threshold-missing",
        lambda o: o["spec"]["rules"][0].pop("threshold"),
        ("spec.rules[0].threshold", "required when compareTo is threshold"),
    ),
    (
        "malformed-window",
        setter("spec.rules.0.window", "5 min"),
        ("spec.rules[0].window", "should match"),
    ),
    (
        "malformed-interval",
        setter("spec.interval", "often"),
        ("spec.interval", "should match"),
    ),
    (
        "no-rules",
        setter("spec.rules", []),
        ("spec.rules", "at least 1 items"),
    ),
    (
        "duplicate-rule-names",
        lambda o: o["spec"]["rules"].append(copy.deepcopy(o["spec"]["rules"][0])),
        ("spec.rules[1]", "Duplicate value"),
    ),
    (
        "unknown-action",
        setter("spec.rules.0.action", {"type": "page"}),
        ("spec.rules[0].action.type", "Unsupported value"),
    ),
    (
        "unknown-no-data-action",
        setter("spec.noData", {"action": "promote"}),
        ("spec.noData.action", "Unsupported value"),
    ),
    (
        "missing-query",
        lambda o: o["spec"]["rules"][0].pop("query"),
        ("spec.rules[0].query", "Required value"),
    ),
    (
        "rule-named-like-the-built-in-one",
        setter("spec.rules.0.name", "containers"),
        ("spec.rules[0].name", "built-in rule for failing containers"),
    ),
    (
        "failing-containers-zero-periods",
        setter("spec.failingContainers", {"periods": 0}),
        ("spec.failingContainers.periods", "greater than or equal to 1"),
    ),
    (
        "prometheus-url-without-scheme",
        setter("spec.prometheus", {"url": "prometheus.monitoring:9090"}),
        ("spec.prometheus.url", "should match"),
    ),
    (
        "prometheus-tls-over-http",
        setter("spec.prometheus", {"url": "http://p:9090", "tls": {"serverName": "p"}}),
        ("spec.prometheus.tls", "needs an https:// url"),
    ),
    (
        "prometheus-token-and-basic-auth",
        setter(
            "spec.prometheus",
            {"bearerTokenSecretRef": {"name": "t"}, "basicAuth": {"secretRef": {"name": "b"}}},
        ),
        ("spec.prometheus.basicAuth", "not both"),
    ),
    (
        "prometheus-authorization-header",
        setter("spec.prometheus", {"headers": [{"name": "authorization", "value": "Bearer x"}]}),
        ("spec.prometheus.headers[0].name", "may not set Authorization"),
    ),
    (
        "prometheus-secret-name",
        setter("spec.prometheus", {"bearerTokenSecretRef": {"name": "Not_A_Name"}}),
        ("spec.prometheus.bearerTokenSecretRef.name", "should match"),
    ),
    (
        "failing-containers-set-weight",
        setter("spec.failingContainers", {"action": "setWeight"}),
        ("spec.failingContainers.action", "Unsupported value"),
    ),
]


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("mutation", "expected"), [c[1:] for c in SITSPOL_CASES], ids=[c[0] for c in SITSPOL_CASES]
)
def test_malformed_sitspolicy_is_rejected(
    local_cluster: Any, crds_installed: object, mutation: Mutation, expected: tuple[str, ...]
) -> None:
    result = dry_run(local_cluster, mutate(sitspol, mutation), None)
    assert result.returncode != 0, f"accepted: {result.stdout}"
    missing = [text for text in expected if text not in result.stderr]
    assert not missing, f"error does not mention {missing}: {result.stderr}"
