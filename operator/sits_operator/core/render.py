"""Render a SitsDeployment into the Kubernetes objects it owns.

Pure: spec + settings in, manifests out. Each manifest carries a hash of its own content
in an annotation so that the reconciler can skip a server-side apply when nothing
changed, and a restart of the operator writes nothing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sits_operator.core import naming, volumes
from sits_operator.core.vllm import max_cpu_loras, vllm_args
from sits_operator.model.mig import resource_name
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import (
    API_GROUP,
    API_VERSION,
    KIND,
    ObjectRef,
    SitsDeploymentSpec,
    Variant,
)

Manifest = dict[str, Any]

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def served_model_name(owner: ObjectRef, spec: SitsDeploymentSpec) -> str:
    """All variants serve one model name, so clients and the gateway never see variants."""
    return spec.served_model_name or owner.name


def owner_reference(owner: ObjectRef) -> dict[str, Any]:
    """Controller reference: the garbage collector deletes children with their owner."""
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_hash(manifest: Manifest) -> str:
    """Stable digest of a manifest's content (key order does not matter)."""
    canonical = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _with_hash(manifest: Manifest) -> Manifest:
    digest = template_hash(manifest)
    manifest["metadata"].setdefault("annotations", {})[naming.ANNOTATION_TEMPLATE_HASH] = digest
    return manifest


def _metadata(owner: ObjectRef, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(owner)],
    }


def _variant_labels(owner: ObjectRef, variant: Variant) -> dict[str, str]:
    return {
        **naming.common_labels(owner.name),
        naming.LABEL_VARIANT: variant.name,
        naming.LABEL_REVISION: variant.revision,
        naming.LABEL_ROLE: variant.role.value,
    }


def _http_probe(path: str, port: str, **timing: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": port}, **timing}


def _vllm_container(
    owner: ObjectRef, spec: SitsDeploymentSpec, variant: Variant, settings: OperatorSettings
) -> dict[str, Any]:
    limits: dict[str, str] = {resource_name(variant.mig_profile): "1"}
    requests: dict[str, str] = {}
    if variant.resources is not None:
        for key, value in (("cpu", variant.resources.cpu), ("memory", variant.resources.memory)):
            if value is not None:
                limits[key] = value
                requests[key] = value
    env = [{"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"}]
    if variant.serves_adapters:
        # The sidecar's L3 tier loads and unloads adapters through vLLM's runtime API.
        env.append({"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"})
    resources: dict[str, Any] = {"limits": limits}
    if requests:
        resources["requests"] = requests
    return {
        "name": "vllm",
        "image": variant.image,
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": vllm_args(variant, served_model_name(owner, spec), settings),
        "env": env,
        "ports": [{"name": "vllm", "containerPort": settings.vllm_port, "protocol": "TCP"}],
        "resources": resources,
        # Model loading can take minutes: the startup probe holds liveness off until then.
        "startupProbe": _http_probe("/health", "vllm", periodSeconds=10, failureThreshold=60),
        "readinessProbe": _http_probe("/health", "vllm", periodSeconds=5, failureThreshold=3),
        "livenessProbe": _http_probe("/health", "vllm", periodSeconds=10, failureThreshold=6),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            *volumes.claim_mounts(variant),
        ],
    }


def _cache_env(variant: Variant, served_name: str, settings: OperatorSettings) -> list[Any]:
    cache = variant.cache
    pairs = {
        "SITS_CACHE_LISTEN": f"0.0.0.0:{settings.sidecar_port}",
        "SITS_CACHE_UPSTREAM": f"http://127.0.0.1:{settings.vllm_port}",
        "SITS_CACHE_MODEL": served_name,
        "SITS_CACHE_REVISION": variant.revision,
        "SITS_CACHE_VARIANT": variant.name,
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
        "name": "sits-cache",
        "image": settings.cache_sidecar_image,
        "command": ["sits-cache"],
        "env": _cache_env(variant, served_model_name(owner, spec), settings),
        "ports": [{"name": "http", "containerPort": settings.sidecar_port, "protocol": "TCP"}],
        "readinessProbe": _http_probe("/health", "http", periodSeconds=5),
        "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False},
        "volumeMounts": [
            {"name": volumes.STATE_VOLUME, "mountPath": volumes.STATE_DIR},
            *volumes.claim_mounts(variant),
        ],
    }


def _pod_spec(
    owner: ObjectRef, spec: SitsDeploymentSpec, variant: Variant, settings: OperatorSettings
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "containers": [
            _vllm_container(owner, spec, variant, settings),
            _sidecar_container(owner, spec, variant, settings),
        ],
        "tolerations": [GPU_TOLERATION],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
            {"name": volumes.STATE_VOLUME, "emptyDir": {"sizeLimit": "256Mi"}},
            *volumes.claim_volumes(variant),
        ],
        "terminationGracePeriodSeconds": 60,
    }
    if variant.gpu_product is not None:
        pod["nodeSelector"] = {"nvidia.com/gpu.product": variant.gpu_product}
    return pod


def render_variant_deployment(
    owner: ObjectRef, spec: SitsDeploymentSpec, variant: Variant, settings: OperatorSettings
) -> Manifest:
    """The Deployment of one variant: vLLM plus the cache sidecar on one MIG slice."""
    labels = _variant_labels(owner, variant)
    return _with_hash(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(
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
                "template": {
                    "metadata": {
                        "labels": labels,
                        "annotations": {
                            "prometheus.io/scrape": "true",
                            "prometheus.io/port": str(settings.sidecar_port),
                            "prometheus.io/path": "/metrics",
                            "sits.dev/vllm-metrics-port": str(settings.vllm_port),
                        },
                    },
                    "spec": _pod_spec(owner, spec, variant, settings),
                },
            },
        }
    )


def _service(
    owner: ObjectRef, name: str, labels: dict[str, str], selector: dict[str, str], port: int
) -> Manifest:
    return _with_hash(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _metadata(owner, name, labels),
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
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
        _variant_labels(owner, variant),
        naming.selector_labels(owner.name, variant.name),
        settings.sidecar_port,
    )


def render_root_service(owner: ObjectRef, settings: OperatorSettings) -> Manifest:
    """One Service over every variant, for clients that bypass the weighted router."""
    labels = naming.common_labels(owner.name)
    return _service(
        owner, owner.name, labels, {naming.LABEL_DEPLOYMENT: owner.name}, settings.sidecar_port
    )


def render_children(
    owner: ObjectRef, spec: SitsDeploymentSpec, settings: OperatorSettings
) -> list[Manifest]:
    """Every object the SitsDeployment should own, in apply order."""
    manifests: list[Manifest] = []
    for variant in spec.variants:
        manifests.append(render_variant_deployment(owner, spec, variant, settings))
        manifests.append(render_variant_service(owner, variant, settings))
    manifests.append(render_root_service(owner, settings))
    return manifests
