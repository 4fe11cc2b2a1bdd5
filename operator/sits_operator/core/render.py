"""Render a SitsDeployment into the Kubernetes objects it owns.

Pure: spec + settings in, manifests out. Each manifest carries a hash of its own content
in an annotation so that the reconciler can skip a server-side apply when nothing
changed, and a restart of the operator writes nothing.
"""

from __future__ import annotations

import json
import math
from typing import Any

from sits_operator.core import gateway, naming, volumes
from sits_operator.core.manifest import (
    TERMINATION_MESSAGE_POLICY,
    Manifest,
    metadata,
    owner_reference,
    template_hash,
    with_hash,
)
from sits_operator.core.naming import Container, PortName
from sits_operator.core.pod_settings import (
    apply_pod_template,
    effective_pod_settings,
    pod_spec_fields,
    vllm_container_fields,
)
from sits_operator.core.vllm import max_cpu_loras, vllm_args
from sits_operator.model.durations import parse_duration
from sits_operator.model.mig import resource_name
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import (
    ObjectRef,
    PodSettings,
    SitsDeploymentSpec,
    Variant,
)

# Re-exported: tests and benchmarks have always taken these from here.
__all__ = ["Manifest", "owner_reference", "render_children", "template_hash"]

# The operator's own toleration, first in every pod; users' tolerations come after it.
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
STARTUP_PROBE_PERIOD_SECONDS = 10
# vLLM answers /health on the event loop that also tokenizes and streams: on a busy node
# (CPU inference, a full batch) an answer takes longer than the kubelet's default 1 s,
# which counted healthy-but-busy pods as failing and, through liveness, killed them.
# Readiness (3 s) takes a pod out of its Service only when it is too slow to take new work;
# liveness (5 s, 6 misses 10 s apart) restarts only a vLLM that has really hung.
READINESS_TIMEOUT_SECONDS = 3
LIVENESS_TIMEOUT_SECONDS = 5


def served_model_name(owner: ObjectRef, spec: SitsDeploymentSpec) -> str:
    """All variants serve one model name, so clients and the gateway never see variants."""
    return spec.served_model_name or owner.name


def _variant_labels(owner: ObjectRef, variant: Variant) -> dict[str, str]:
    """Labels of a variant's Deployment and pods: what it is, never its role.

    The role changes when a promotion is committed in Git (the candidate becomes the
    stable); in the pod template it would roll every pod of both variants for nothing.
    Roles live on the Services (below) and in status.
    """
    return {
        **naming.common_labels(owner.name),
        naming.LABEL_VARIANT: variant.name,
        naming.LABEL_REVISION: variant.revision,
    }


def _service_labels(owner: ObjectRef, variant: Variant) -> dict[str, str]:
    return {**_variant_labels(owner, variant), naming.LABEL_ROLE: variant.role.value}


def _http_probe(path: str, port: str, **timing: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, **timing}


def startup_failure_threshold(variant: Variant) -> int:
    """Startup probes vLLM may fail before the kubelet restarts it: the startup budget.

    periodSeconds x failureThreshold covers `startupTimeout` (rounded up), so a large
    model has the time to download and load; the kubelet runs the readiness and liveness
    probes only after the startup probe has passed, so they need no delay of their own.
    """
    seconds = parse_duration(variant.startup_timeout)
    return max(1, math.ceil(seconds / STARTUP_PROBE_PERIOD_SECONDS))


def _vllm_probes(variant: Variant) -> dict[str, Any]:
    return {
        "startupProbe": _http_probe(
            "/health",
            PortName.VLLM.value,
            periodSeconds=STARTUP_PROBE_PERIOD_SECONDS,
            failureThreshold=startup_failure_threshold(variant),
        ),
        "readinessProbe": _http_probe(
            "/health",
            PortName.VLLM.value,
            periodSeconds=5,
            timeoutSeconds=READINESS_TIMEOUT_SECONDS,
            failureThreshold=3,
        ),
        "livenessProbe": _http_probe(
            "/health",
            PortName.VLLM.value,
            periodSeconds=10,
            timeoutSeconds=LIVENESS_TIMEOUT_SECONDS,
            failureThreshold=6,
        ),
    }


def _vllm_env(variant: Variant, pod: PodSettings) -> list[dict[str, Any]]:
    """The operator's variables, then the user's (a gated model's HF_TOKEN, vLLM settings);
    validation keeps the names apart (naming.OWNED_VLLM_ENV)."""
    env: list[dict[str, Any]] = [{"name": naming.ENV_HF_TELEMETRY, "value": "1"}]
    if variant.serves_adapters:
        # The sidecar's L3 tier loads and unloads adapters through vLLM's runtime API.
        env.append({"name": naming.ENV_RUNTIME_LORA, "value": "True"})
    return env + list(pod.env or ())


def _vllm_container(
    owner: ObjectRef,
    spec: SitsDeploymentSpec,
    variant: Variant,
    settings: OperatorSettings,
    pod: PodSettings,
) -> dict[str, Any]:
    limits: dict[str, str] = {resource_name(variant.mig_profile): "1"}
    requests: dict[str, str] = {}
    if variant.resources is not None:
        for key, value in (("cpu", variant.resources.cpu), ("memory", variant.resources.memory)):
            if value is not None:
                limits[key] = value
                requests[key] = value
    resources: dict[str, Any] = {"limits": limits}
    if requests:
        resources["requests"] = requests
    return {
        "name": Container.VLLM.value,
        "image": variant.image,
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": vllm_args(variant, served_model_name(owner, spec), settings),
        "env": _vllm_env(variant, pod),
        **vllm_container_fields(pod),
        "ports": [
            {"name": PortName.VLLM.value, "containerPort": settings.vllm_port, "protocol": "TCP"}
        ],
        "resources": resources,
        # Model loading can take minutes: the startup probe holds liveness off until then.
        **_vllm_probes(variant),
        # A vLLM that exits on a bad argument says why in its last log lines only.
        "terminationMessagePolicy": TERMINATION_MESSAGE_POLICY,
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            *volumes.vllm_claim_mounts(variant),
        ],
    }


def _cache_env(
    owner: ObjectRef, variant: Variant, served_name: str, settings: OperatorSettings
) -> list[Any]:
    cache = variant.cache
    pairs = {
        # Every name starts with naming.SIDECAR_ENV_PREFIX (users may not set those).
        "SITS_CACHE_LISTEN": f"0.0.0.0:{settings.sidecar_port}",
        "SITS_CACHE_UPSTREAM": f"http://127.0.0.1:{settings.vllm_port}",
        "SITS_CACHE_MODEL": served_name,
        "SITS_CACHE_REVISION": variant.revision,
        "SITS_CACHE_VARIANT": variant.name,
        # The request-metric contract's namespace and sits_deployment labels (the sidecar
        # exports it with source="sidecar"); plain values: the operator knows both.
        "SITS_CACHE_NAMESPACE": owner.namespace,
        "SITS_CACHE_DEPLOYMENT": owner.name,
        "SITS_CACHE_SEMANTIC_ENABLED": str(cache.semantic.enabled).lower(),
        "SITS_CACHE_SEMANTIC_THRESHOLD": str(cache.semantic.similarity_threshold),
        "SITS_CACHE_SEMANTIC_TTL": cache.semantic.ttl,
        "SITS_CACHE_SEMANTIC_MAX_ENTRIES": str(cache.semantic.max_entries),
        "SITS_CACHE_SEMANTIC_NON_DETERMINISTIC": str(
            cache.semantic.cache_non_deterministic
        ).lower(),
        "SITS_CACHE_VECTOR_ENABLED": str(cache.vector_index.enabled).lower(),
        "SITS_CACHE_VECTOR_INDEX": volumes.resolve(cache.vector_index.index_ref or ""),
        "SITS_CACHE_VECTOR_HOT_MIN_HITS": str(cache.vector_index.hot_list_min_hits),
        "SITS_CACHE_VECTOR_HOT_WINDOW": cache.vector_index.hot_list_window,
        "SITS_CACHE_LORA_MAX_RESIDENT": str(cache.lora.max_resident),
        "SITS_CACHE_LORA_MAX_CPU_LORAS": str(max_cpu_loras(variant)),
        "SITS_CACHE_LORA_ADAPTERS": json.dumps(
            [
                {
                    **a.model_dump(by_alias=True, exclude_none=True),
                    "source": volumes.resolve(a.source),
                }
                for a in variant.lora.adapters
            ]
            if variant.serves_adapters
            else []
        ),
        # Writable scratch for what must survive a sidecar restart within the pod's life
        # (L2 inverted-list access statistics, so hot lists are preloaded at start).
        "SITS_CACHE_STATE_DIR": volumes.STATE_DIR,
    }
    return [{"name": key, "value": value} for key, value in pairs.items()]


def _sidecar_container(
    owner: ObjectRef, spec: SitsDeploymentSpec, variant: Variant, settings: OperatorSettings
) -> dict[str, Any]:
    return {
        "name": Container.CACHE.value,
        "image": settings.cache_sidecar_image,
        "command": ["sits-cache"],
        "env": _cache_env(owner, variant, served_model_name(owner, spec), settings),
        "ports": [
            {
                "name": PortName.CACHE.value,
                "containerPort": settings.sidecar_port,
                "protocol": "TCP",
            }
        ],
        "readinessProbe": _http_probe("/health", PortName.CACHE.value, periodSeconds=5),
        "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False},
        "terminationMessagePolicy": TERMINATION_MESSAGE_POLICY,
        "volumeMounts": [
            {"name": volumes.STATE_VOLUME, "mountPath": volumes.STATE_DIR},
            *volumes.sidecar_claim_mounts(variant),
        ],
    }


def _pod_spec(
    owner: ObjectRef,
    spec: SitsDeploymentSpec,
    variant: Variant,
    settings: OperatorSettings,
    pod_settings: PodSettings,
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "containers": [
            _vllm_container(owner, spec, variant, settings, pod_settings),
            _sidecar_container(owner, spec, variant, settings),
        ],
        # The operator's GPU toleration first, then the user's (their own nodes' taints).
        "tolerations": [GPU_TOLERATION, *(pod_settings.tolerations or ())],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
            {"name": volumes.STATE_VOLUME, "emptyDir": {"sizeLimit": "256Mi"}},
            *volumes.claim_volumes(variant),
        ],
        "terminationGracePeriodSeconds": 60,
        **pod_spec_fields(pod_settings),
    }
    node_selector = dict(pod_settings.node_selector or {})
    if variant.gpu_product is not None:
        node_selector[naming.NODE_LABEL_GPU_PRODUCT] = variant.gpu_product
    if node_selector:
        pod["nodeSelector"] = node_selector
    return pod


def _pod_template(
    owner: ObjectRef, spec: SitsDeploymentSpec, variant: Variant, settings: OperatorSettings
) -> dict[str, Any]:
    """The pod template: the operator's pod with the user's pod settings, patch last.

    The operator's labels and annotations are written over the user's (validation
    already refuses users' keys that collide with them).
    """
    pod_settings = effective_pod_settings(spec, variant)
    annotations = {
        naming.ANNOTATION_SCRAPE: "true",
        naming.ANNOTATION_SCRAPE_PORT: str(settings.sidecar_port),
        naming.ANNOTATION_SCRAPE_PATH: "/metrics",
        naming.ANNOTATION_VLLM_METRICS_PORT: str(settings.vllm_port),
    }
    template = {
        "metadata": {
            "labels": {**(pod_settings.labels or {}), **_variant_labels(owner, variant)},
            "annotations": {**(pod_settings.annotations or {}), **annotations},
        },
        "spec": _pod_spec(owner, spec, variant, settings, pod_settings),
    }
    return apply_pod_template(template, pod_settings)


def render_variant_deployment(
    owner: ObjectRef, spec: SitsDeploymentSpec, variant: Variant, settings: OperatorSettings
) -> Manifest:
    """The Deployment of one variant: vLLM plus the cache sidecar on one MIG slice."""
    labels = _variant_labels(owner, variant)
    return with_hash(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata(
                owner, naming.variant_object_name(owner.name, variant.name), labels
            ),
            "spec": {
                "replicas": variant.replicas,
                "selector": {"matchLabels": naming.selector_labels(owner.name, variant.name)},
                # A MIG slice is scarce: surge one pod at a time, never drop below capacity.
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                },
                "template": _pod_template(owner, spec, variant, settings),
            },
        }
    )


def _service(
    owner: ObjectRef, name: str, labels: dict[str, str], selector: dict[str, str], port: int
) -> Manifest:
    return with_hash(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata(owner, name, labels),
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [
                    {
                        "name": PortName.CACHE.value,
                        "port": port,
                        "targetPort": PortName.CACHE.value,
                        "protocol": "TCP",
                    }
                ],
            },
        }
    )


def render_variant_service(
    owner: ObjectRef, variant: Variant, settings: OperatorSettings
) -> Manifest:
    """Per-variant Service: what routers (gateway, HTTPRoute backendRefs) address."""
    return _service(
        owner,
        naming.variant_object_name(owner.name, variant.name),
        _service_labels(owner, variant),
        naming.selector_labels(owner.name, variant.name),
        settings.sidecar_port,
    )


def render_root_service(
    owner: ObjectRef, spec: SitsDeploymentSpec, settings: OperatorSettings
) -> Manifest:
    """The Service `<name>` clients call: the gateway's pods for router builtin (which
    split by weight), else one Service over every variant (core/gateway.root_selector)."""
    labels = naming.common_labels(owner.name)
    selector = gateway.root_selector(owner, spec)
    return _service(owner, owner.name, labels, selector, settings.sidecar_port)


def render_children(
    owner: ObjectRef, spec: SitsDeploymentSpec, settings: OperatorSettings
) -> list[Manifest]:
    """Every object the SitsDeployment should own, in apply order."""
    manifests: list[Manifest] = []
    for variant in spec.variants:
        manifests.append(render_variant_deployment(owner, spec, variant, settings))
        manifests.append(render_variant_service(owner, variant, settings))
    manifests += gateway.render_gateway(owner, spec, settings)
    manifests.append(render_root_service(owner, spec, settings))
    return manifests
