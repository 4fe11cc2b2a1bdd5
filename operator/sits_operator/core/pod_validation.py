"""Users' pod settings may add to a variant's pods, never override what the operator owns.

Why: the operator's fields are what makes a variant work and what the operator relies on
(vLLM's model arguments and port, the MIG limit, the probes its status reads, the labels
its selectors and watches use). A setting that replaced one of them would break the
variant silently, or, for a selector label, detach the pods from their Deployment. The
CRD's CEL rules refuse what they can see; this module checks everything again (the
`podTemplate` patch is mostly schemaless, and an older CRD may be installed), and each
problem names the field, so it reaches the user as the Invalid condition.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from sits_operator.core import naming
from sits_operator.core.naming import Container
from sits_operator.model.spec import PodSettings

# Fields of the operator's containers a podTemplate patch may not set, and why.
OWNED_CONTAINER_FIELDS: Mapping[str, str] = {
    "image": "set the vLLM image with the variant's image; the sidecar's is the operator's",
    "command": "the operator starts vLLM and the sidecar",
    "args": "vLLM's arguments come from model, modelRevision, vllmArgs, lora and migProfile",
    "ports": "the Services, probes and sidecar address these ports by name",
    "startupProbe": "the startup probe follows startupTimeout",
    "readinessProbe": "readiness decides which pods get traffic",
    "livenessProbe": "liveness restarts a hung vLLM on the operator's terms",
}
# Resource names of GPUs and MIG slices: the slice is requested from migProfile.
GPU_RESOURCE_PREFIX = "nvidia.com/"
# Label and annotation keys: [DNS subdomain prefix/]name (the API server's rule), checked
# here so that a typo is an Invalid condition naming the field, not a failed apply.
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
MAX_KEY_PREFIX = 253
TEMPLATE_KEYS = ("metadata", "spec")
TEMPLATE_METADATA_KEYS = ("labels", "annotations")


def pod_settings_problems(field: str, pod: PodSettings) -> list[str]:
    """Every setting of `pod` (at `field`, e.g. spec.podDefaults) that touches the
    operator's own fields."""
    problems = [
        f"{field}.env[{index}].name: {name} is set by the operator; choose another variable"
        for index, name in enumerate(_env_names(pod.env or ()))
        if name in naming.OWNED_VLLM_ENV
    ]
    problems += _label_problems(f"{field}.labels", pod.labels or {})
    problems += _annotation_problems(f"{field}.annotations", pod.annotations or {})
    problems += _node_selector_problems(f"{field}.nodeSelector", pod.node_selector or {})
    if pod.pod_template is not None:
        problems += pod_template_problems(f"{field}.podTemplate", pod.pod_template)
    return problems


def _env_names(env: Any) -> Iterator[str]:
    for item in env if isinstance(env, list | tuple) else ():
        yield str(item.get("name")) if isinstance(item, dict) else ""


def _key_problems(field: str, keys: Mapping[str, Any]) -> list[str]:
    return [
        f"{field}: {key!r} is not a valid key ([prefix/]name, name at most 63 characters)"
        for key in keys
        if not _QUALIFIED_NAME.match(key) or len(key.rpartition("/")[0]) > MAX_KEY_PREFIX
    ]


def _label_problems(field: str, labels: Mapping[str, Any]) -> list[str]:
    return _key_problems(field, labels) + [
        f"{field}: {key!r} is the operator's; labels sits.dev/* and app.kubernetes.io/* "
        "select and track the pods"
        for key in labels
        if naming.is_owned_label(key)
    ]


def _annotation_problems(field: str, annotations: Mapping[str, Any]) -> list[str]:
    return _key_problems(field, annotations) + [
        f"{field}: {key!r} is the operator's (sits.dev/* and the Prometheus scrape annotations)"
        for key in annotations
        if naming.is_owned_annotation(key)
    ]


def _node_selector_problems(field: str, selector: Mapping[str, Any]) -> list[str]:
    if naming.NODE_LABEL_GPU_PRODUCT not in selector:
        return []
    return [
        f"{field}: {naming.NODE_LABEL_GPU_PRODUCT!r} is set from the variant's gpuProduct "
        "(which checks the MIG profile against it); use gpuProduct"
    ]


def pod_template_problems(field: str, patch: Mapping[str, Any]) -> list[str]:
    """What a strategic merge patch of the pod template may not do."""
    problems = list(_directive_problems(field, patch))
    problems += [
        f"{field}.{key}: a pod template patch has only metadata and spec"
        for key in patch
        if key not in TEMPLATE_KEYS
    ]
    metadata = patch.get("metadata") or {}
    spec = patch.get("spec") or {}
    if not isinstance(metadata, dict) or not isinstance(spec, dict):
        return [*problems, f"{field}: metadata and spec must be objects"]
    problems += [
        f"{field}.metadata.{key}: only labels and annotations of a pod template can be set"
        for key in metadata
        if key not in TEMPLATE_METADATA_KEYS
    ]
    problems += _label_problems(f"{field}.metadata.labels", metadata.get("labels") or {})
    problems += _annotation_problems(
        f"{field}.metadata.annotations", metadata.get("annotations") or {}
    )
    return problems + _template_spec_problems(f"{field}.spec", spec)


def _directive_problems(field: str, value: Any) -> Iterator[str]:
    """`$patch` and the other strategic merge directives, anywhere in the patch."""
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).startswith("$"):
                yield f"{field}.{key}: patch directives are not supported"
            else:
                yield from _directive_problems(f"{field}.{key}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _directive_problems(f"{field}[{index}]", item)


def _template_spec_problems(field: str, spec: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    if "tolerations" in spec:
        problems.append(
            f"{field}.tolerations: the patch would replace the operator's GPU toleration; "
            "use tolerations (added after it)"
        )
    problems += _node_selector_problems(f"{field}.nodeSelector", spec.get("nodeSelector") or {})
    containers = spec.get("containers")
    if containers is None:
        return problems
    if not isinstance(containers, list):
        return [*problems, f"{field}.containers: must be a list"]
    for index, container in enumerate(containers):
        problems += _container_problems(f"{field}.containers[{index}]", container)
    return problems


def _container_problems(field: str, container: Any) -> list[str]:
    if not isinstance(container, dict) or not container.get("name"):
        return [f"{field}.name: required (containers merge by name)"]
    name = container["name"]
    if name not in set(Container):
        return []  # a container of the user's own: theirs entirely
    problems = [
        f"{field}.{key}: the operator owns the {key} of container {name} ({why})"
        for key, why in OWNED_CONTAINER_FIELDS.items()
        if key in container
    ]
    problems += [
        f"{field}.env[{index}].name: {env} is set by the operator in container {name}"
        for index, env in enumerate(_env_names(container.get("env")))
        if _owned_env(Container(name), env)
    ]
    return problems + _resource_problems(f"{field}.resources", container.get("resources"))


def _owned_env(container: Container, name: str) -> bool:
    if container is Container.VLLM:
        return name in naming.OWNED_VLLM_ENV
    return name.startswith(naming.SIDECAR_ENV_PREFIX)


def _resource_problems(field: str, resources: Any) -> list[str]:
    if not isinstance(resources, dict):
        return []
    return [
        f"{field}.{kind}: {resource!r} is the operator's: the MIG slice comes from migProfile"
        for kind in ("limits", "requests")
        for resource in resources.get(kind) or {}
        if str(resource).startswith(GPU_RESOURCE_PREFIX)
    ]
