"""Render the built-in gateway of one SitsDeployment (router `builtin`).

Pure, like core/render.py: spec + settings in, manifests out. For router builtin the
operator owns, per SitsDeployment, a `sits-gateway --source kubernetes` Deployment, its
PodDisruptionBudget, and the least-privilege identity it reads routing with
(ServiceAccount, Role, RoleBinding); the root Service `<name>` then selects the gateway's
pods instead of every variant's. Other routers get none of these objects, and the
reconciler's plan deletes them when the router changes away from builtin.
"""

from __future__ import annotations

from typing import Any

from sits_operator.core import naming
from sits_operator.core.manifest import TERMINATION_MESSAGE_POLICY, Manifest, metadata, with_hash
from sits_operator.core.naming import Component, PortName
from sits_operator.core.pod_settings import apply_pod_template, merge_maps
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import (
    API_GROUP,
    PLURAL,
    ObjectRef,
    RouterKind,
    SitsDeploymentSpec,
)

CONTAINER = "sits-gateway"
# The root Service targets the port by this name, as it does the sidecar's ("http").
PORT_NAME = PortName.CACHE.value
# Where the gateway reports the routing it applies (sits_inference/gateway/app.py).
ROUTING_PATH = "/sits/v1/routing"
# Requests of a gateway container when spec.traffic.gateway.resources says nothing: an
# aiohttp proxy on one event loop uses about one core at a few thousand requests/s.
DEFAULT_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
# Pod Security Standard "restricted": what a namespace enforcing it admits.
CONTAINER_SECURITY = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def wants_gateway(spec: SitsDeploymentSpec) -> bool:
    return spec.traffic.router is RouterKind.BUILTIN


def root_selector(owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, str]:
    """The root Service's selector: the gateway's pods for builtin, else every variant's.

    gatewayAPI: the user's gateway addresses the per-variant Services; the root Service
    stays a plain all-variants entry point for clients that bypass it, as for none.
    """
    if wants_gateway(spec):
        return naming.gateway_selector_labels(owner.name)
    return {naming.LABEL_DEPLOYMENT: owner.name}


def gateway_labels(owner: ObjectRef) -> dict[str, str]:
    return {
        **naming.common_labels(owner.name),
        naming.LABEL_APP_COMPONENT: Component.GATEWAY.value,
        naming.LABEL_COMPONENT: Component.GATEWAY.value,
    }


def _manifest(owner: ObjectRef, api_version: str, kind: str, body: dict[str, Any]) -> Manifest:
    name = naming.gateway_object_name(owner.name)
    return with_hash(
        {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": metadata(owner, name, gateway_labels(owner)),
            **body,
        }
    )


def role_rules(owner: ObjectRef) -> list[dict[str, Any]]:
    """Exactly what the gateway's Kubernetes source reads, in this namespace only.

    resourceNames narrows list and watch too, because the gateway always lists and
    watches its SitsDeployment with the field selector metadata.name=<name>: the
    authorizer then checks the name (without that selector a list is refused).
    EndpointSlices are named by the EndpointSlice controller (<service>-<random>), so
    they cannot be named here: the Role grants reading every slice of the namespace,
    which only holds addresses and ports.
    """
    return [
        {
            "apiGroups": [API_GROUP],
            "resources": [PLURAL],
            "resourceNames": [owner.name],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list", "watch"],
        },
    ]


def render_service_account(owner: ObjectRef) -> Manifest:
    return _manifest(owner, "v1", "ServiceAccount", {})


def render_role(owner: ObjectRef) -> Manifest:
    return _manifest(owner, "rbac.authorization.k8s.io/v1", "Role", {"rules": role_rules(owner)})


def render_role_binding(owner: ObjectRef) -> Manifest:
    name = naming.gateway_object_name(owner.name)
    body = {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": owner.namespace}],
    }
    return _manifest(owner, "rbac.authorization.k8s.io/v1", "RoleBinding", body)


def _resources(spec: SitsDeploymentSpec) -> dict[str, Any]:
    given = spec.traffic.gateway.resources
    if given is None or (given.cpu is None and given.memory is None):
        return DEFAULT_RESOURCES
    values = {k: v for k, v in (("cpu", given.cpu), ("memory", given.memory)) if v is not None}
    return {"requests": dict(values), "limits": dict(values)}


def _env(owner: ObjectRef, settings: OperatorSettings) -> list[dict[str, Any]]:
    """sits-gateway's SITS_GATEWAY_* variables (gateway/config.py); the namespace comes
    from the downward API, so a pod always reads its own namespace's objects."""
    namespace = {"fieldRef": {"fieldPath": "metadata.namespace"}}
    return [
        {"name": "SITS_GATEWAY_NAMESPACE", "valueFrom": namespace},
        {"name": "SITS_GATEWAY_DEPLOYMENT", "value": owner.name},
        {"name": "SITS_GATEWAY_HOST", "value": "0.0.0.0"},
        {"name": "SITS_GATEWAY_PORT", "value": str(settings.gateway_port)},
    ]


PRE_STOP_SECONDS = 5


def _container(owner: ObjectRef, spec: SitsDeploymentSpec, settings: OperatorSettings) -> Manifest:
    def probe(path: str, **timing: int) -> dict[str, Any]:
        return {"httpGet": {"path": path, "port": PORT_NAME}, **timing}

    return {
        "name": CONTAINER,
        "image": settings.gateway_image,
        "command": ["sits-gateway", "--source", "kubernetes"],
        "env": _env(owner, settings),
        "ports": [{"name": PORT_NAME, "containerPort": settings.gateway_port, "protocol": "TCP"}],
        # /health is 503 until the first SitsDeployment and EndpointSlice lists arrived,
        # so a new pod joins the root Service with a table; liveness asks only that the
        # event loop answers (/v1/models reads memory), never the apiserver's health.
        "readinessProbe": probe("/health", periodSeconds=2, failureThreshold=3),
        "livenessProbe": probe("/v1/models", periodSeconds=10, failureThreshold=3),
        "resources": _resources(spec),
        "securityContext": CONTAINER_SECURITY,
        "terminationMessagePolicy": TERMINATION_MESSAGE_POLICY,
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        # A deleted pod leaves the Service's endpoints while it still listens: kube-proxy
        # and other gateways' clients see the removal within a few seconds, and only then
        # does SIGTERM close the listener and drain what is in flight (the grace period).
        "lifecycle": {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}},
    }


def _anti_affinity(owner: ObjectRef) -> dict[str, Any]:
    """Preferred, not required: one node (the local cluster, a small pool) still runs both."""
    term = {
        "labelSelector": {"matchLabels": naming.gateway_selector_labels(owner.name)},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": term}
            ]
        }
    }


def _pod_template(
    owner: ObjectRef, spec: SitsDeploymentSpec, settings: OperatorSettings
) -> dict[str, Any]:
    annotations = {
        naming.ANNOTATION_SCRAPE: "true",
        naming.ANNOTATION_SCRAPE_PORT: str(settings.gateway_port),
        naming.ANNOTATION_SCRAPE_PATH: "/metrics",
    }
    pod = spec.traffic.gateway.pod
    placement: dict[str, Any] = {
        "nodeSelector": dict(pod.node_selector or {}),
        "tolerations": list(pod.tolerations or ()),
        "priorityClassName": pod.priority_class_name,
        "imagePullSecrets": list(pod.image_pull_secrets or ()),
    }
    template = {
        "metadata": {
            "labels": {**(pod.labels or {}), **gateway_labels(owner)},
            "annotations": {**(pod.annotations or {}), **annotations},
        },
        "spec": {
            "serviceAccountName": naming.gateway_object_name(owner.name),
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [_container(owner, spec, settings)],
            "affinity": merge_maps(_anti_affinity(owner), pod.affinity or {}),
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
            # Long enough for requests in flight (streams) to finish on SIGTERM.
            "terminationGracePeriodSeconds": 30,
            **{key: value for key, value in placement.items() if value},
        },
    }
    return apply_pod_template(template, pod)


def render_gateway_deployment(
    owner: ObjectRef, spec: SitsDeploymentSpec, settings: OperatorSettings
) -> Manifest:
    body = {
        "spec": {
            "replicas": spec.traffic.gateway.replicas,
            "selector": {"matchLabels": naming.gateway_selector_labels(owner.name)},
            # Never below the serving replicas while the gateway itself rolls.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": _pod_template(owner, spec, settings),
        }
    }
    return _manifest(owner, "apps/v1", "Deployment", body)


def render_pod_disruption_budget(owner: ObjectRef, spec: SitsDeploymentSpec) -> Manifest | None:
    """minAvailable 1 with 2 or more replicas; with one, a PDB would block every drain."""
    if spec.traffic.gateway.replicas < 2:
        return None
    body = {
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": naming.gateway_selector_labels(owner.name)},
        }
    }
    return _manifest(owner, "policy/v1", "PodDisruptionBudget", body)


def render_gateway(
    owner: ObjectRef, spec: SitsDeploymentSpec, settings: OperatorSettings
) -> list[Manifest]:
    """The gateway's objects in apply order (identity before the pods that use it); empty
    for routers other than builtin."""
    if not wants_gateway(spec):
        return []
    manifests = [
        render_service_account(owner),
        render_role(owner),
        render_role_binding(owner),
        render_gateway_deployment(owner, spec, settings),
    ]
    pdb = render_pod_disruption_budget(owner, spec)
    return manifests + ([pdb] if pdb is not None else [])
