"""The built-in gateway's objects (core/gateway.py) per router, as tables."""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.core import naming
from sits_operator.core.render import render_children
from sits_operator.model.settings import OperatorSettings
from tests.unit.factories import OWNER, spec

SETTINGS = OperatorSettings(gateway_image="registry.example/sits-inference:9.9")
GATEWAY_KINDS = {"ServiceAccount", "Role", "RoleBinding", "Deployment", "PodDisruptionBudget"}


def children(**traffic: Any) -> dict[tuple[str, str], dict[str, Any]]:
    if traffic.get("router") == "gatewayAPI":
        traffic.setdefault("httpRoute", {"name": "chat"})
    manifests = render_children(OWNER, spec(traffic=traffic), SETTINGS)
    return {(m["kind"], m["metadata"]["name"]): m for m in manifests}


def gateway_objects(rendered: dict[tuple[str, str], dict[str, Any]]) -> set[str]:
    return {kind for kind, name in rendered if name == "chat-gateway"}


@pytest.mark.parametrize(
    ("traffic", "kinds", "root_selector"),
    [
        pytest.param({}, GATEWAY_KINDS, naming.gateway_selector_labels("chat"), id="default"),
        pytest.param(
            {"router": "builtin"},
            GATEWAY_KINDS,
            naming.gateway_selector_labels("chat"),
            id="builtin",
        ),
        pytest.param(
            {"router": "builtin", "gateway": {"replicas": 1}},
            GATEWAY_KINDS - {"PodDisruptionBudget"},
            naming.gateway_selector_labels("chat"),
            id="builtin-one-replica-no-pdb",
        ),
        pytest.param(
            {"router": "gatewayAPI"}, set(), {naming.LABEL_DEPLOYMENT: "chat"}, id="gatewayAPI"
        ),
        pytest.param({"router": "none"}, set(), {naming.LABEL_DEPLOYMENT: "chat"}, id="none"),
    ],
)
def test_router_decides_gateway_objects_and_root_selector(
    traffic: dict[str, Any], kinds: set[str], root_selector: dict[str, str]
) -> None:
    rendered = children(**traffic)
    assert gateway_objects(rendered) == kinds
    assert rendered[("Service", "chat")]["spec"]["selector"] == root_selector
    # the variants are there whatever the router
    assert {("Deployment", "chat-v1"), ("Deployment", "chat-v2")} <= set(rendered)


@pytest.mark.parametrize("replicas", [2, 3, 5])
def test_replicas_and_pdb(replicas: int) -> None:
    rendered = children(gateway={"replicas": replicas})
    deployment = rendered[("Deployment", "chat-gateway")]
    assert deployment["spec"]["replicas"] == replicas
    pdb = rendered[("PodDisruptionBudget", "chat-gateway")]
    assert pdb["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": naming.gateway_selector_labels("chat")},
    }


def test_the_role_reads_this_deployment_and_endpointslices_and_nothing_more() -> None:
    rendered = children()
    role = rendered[("Role", "chat-gateway")]
    assert role["metadata"]["namespace"] == "prod"
    assert role["rules"] == [
        {
            "apiGroups": ["sits.dev"],
            "resources": ["sitsdeployments"],
            "resourceNames": ["chat"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    binding = rendered[("RoleBinding", "chat-gateway")]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "chat-gateway",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "chat-gateway", "namespace": "prod"}
    ]


def test_every_gateway_object_is_owned_labelled_and_hashed() -> None:
    for (_, name), manifest in children().items():
        if name != "chat-gateway":
            continue
        meta = manifest["metadata"]
        (ref,) = meta["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "SitsDeployment",
            "chat",
            "uid-1",
            True,
        )
        assert meta["labels"][naming.LABEL_APP_COMPONENT] == "gateway"
        assert meta["labels"][naming.LABEL_COMPONENT] == "gateway"
        assert meta["labels"][naming.LABEL_PART_OF] == "chat"
        assert meta["labels"][naming.LABEL_MANAGED_BY] == naming.MANAGED_BY
        assert naming.ANNOTATION_TEMPLATE_HASH in meta["annotations"]


def _pod(rendered: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    template: dict[str, Any] = rendered[("Deployment", "chat-gateway")]["spec"]["template"]
    return template


def test_the_gateway_pod_runs_the_kubernetes_source_locked_down() -> None:
    template = _pod(children(gateway={"resources": {"cpu": "1", "memory": "1Gi"}}))
    pod = template["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/sits-inference:9.9"
    assert container["command"] == ["sits-gateway", "--source", "kubernetes"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env == {
        "SITS_GATEWAY_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "SITS_GATEWAY_DEPLOYMENT": "chat",
        "SITS_GATEWAY_HOST": "0.0.0.0",
        "SITS_GATEWAY_PORT": "8080",
    }
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/v1/models", "port": "http"}
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    security = container["securityContext"]
    assert security["runAsNonRoot"]
    assert not security["allowPrivilegeEscalation"]
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"]
    assert pod["serviceAccountName"] == "chat-gateway"
    terms = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert template["metadata"]["annotations"] == {
        naming.ANNOTATION_SCRAPE: "true",
        naming.ANNOTATION_SCRAPE_PORT: "8080",
        naming.ANNOTATION_SCRAPE_PATH: "/metrics",
    }
    selector = naming.gateway_selector_labels("chat")
    assert selector.items() <= template["metadata"]["labels"].items()


def test_default_resources_when_the_spec_names_none() -> None:
    (container,) = _pod(children())["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}


def test_a_variant_named_gateway_is_refused() -> None:
    from sits_operator.core.validation import semantic_problems
    from tests.unit.factories import variant

    problems = semantic_problems(spec(variant(), variant("gateway", "candidate")), SETTINGS)
    assert any("gateway is reserved" in p for p in problems)


def test_gateway_pod_settings_place_the_pods_and_never_replace_the_operators_fields() -> None:
    pod = {
        "nodeSelector": {"pool": "cpu"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "serving",
        "imagePullSecrets": [{"name": "regcred"}],
        "labels": {"team": "ml", naming.LABEL_COMPONENT: "not-mine"},
        "annotations": {"owner": "ml"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                }
            }
        },
    }
    template = children(gateway={"pod": pod})[("Deployment", "chat-gateway")]["spec"]["template"]
    spec_ = template["spec"]
    assert spec_["nodeSelector"] == {"pool": "cpu"}
    assert spec_["tolerations"] == pod["tolerations"]
    assert spec_["priorityClassName"] == "serving"
    assert spec_["imagePullSecrets"] == [{"name": "regcred"}]
    assert template["metadata"]["labels"]["team"] == "ml"
    assert template["metadata"]["labels"][naming.LABEL_COMPONENT] == "gateway"
    assert template["metadata"]["annotations"]["owner"] == "ml"
    # the user's node affinity is added; the operator's anti-affinity stays
    assert set(spec_["affinity"]) == {"nodeAffinity", "podAntiAffinity"}
    assert spec_["serviceAccountName"] == "chat-gateway"


def test_gateway_without_pod_settings_sets_no_placement() -> None:
    spec_ = children()[("Deployment", "chat-gateway")]["spec"]["template"]["spec"]
    assert not {"nodeSelector", "tolerations", "priorityClassName", "imagePullSecrets"} & set(spec_)


def test_gateway_leaves_the_endpoints_before_it_stops_listening() -> None:
    pod = children()[("Deployment", "chat-gateway")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    sleep = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert 0 < sleep < pod["terminationGracePeriodSeconds"] - 10
