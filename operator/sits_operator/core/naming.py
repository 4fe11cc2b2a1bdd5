"""Names and labels of the objects a SitsDeployment owns.

One place so that rendering, observation (label selectors), validation of what users may
set on pods, and the gateway agree.
"""

from __future__ import annotations

from enum import StrEnum

LABEL_DEPLOYMENT = "sits.dev/deployment"
LABEL_VARIANT = "sits.dev/variant"
LABEL_REVISION = "sits.dev/revision"
LABEL_ROLE = "sits.dev/role"
LABEL_NAME = "app.kubernetes.io/name"
# Not app.kubernetes.io/instance: Argo CD tracks an application's resources by that label,
# and a child carrying the SitsDeployment's name there could be taken for (and pruned as)
# a resource of an Argo CD application of the same name.
LABEL_PART_OF = "app.kubernetes.io/part-of"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
# Tells a SitsDeployment's gateway pods from its variants' pods (which carry neither):
# the recommended label for people and tools, the sits.dev/ one for selectors (below).
LABEL_APP_COMPONENT = "app.kubernetes.io/component"
LABEL_COMPONENT = "sits.dev/component"
APP_NAME = "sits-inference"
MANAGED_BY = "sits-operator"
ANNOTATION_TEMPLATE_HASH = "sits.dev/template-hash"

# Label (and annotation) key prefixes the operator owns on pods: selectors, observation and
# the recommended labels; users' pod labels may not use them.
OWNED_LABEL_PREFIXES = ("sits.dev/", "app.kubernetes.io/")
OWNED_ANNOTATION_PREFIXES = ("sits.dev/",)
# Pod annotations the operator sets so Prometheus scrapes the sidecar.
ANNOTATION_SCRAPE = "prometheus.io/scrape"
ANNOTATION_SCRAPE_PORT = "prometheus.io/port"
ANNOTATION_SCRAPE_PATH = "prometheus.io/path"
ANNOTATION_VLLM_METRICS_PORT = "sits.dev/vllm-metrics-port"
OWNED_ANNOTATIONS = (ANNOTATION_SCRAPE, ANNOTATION_SCRAPE_PORT, ANNOTATION_SCRAPE_PATH)
# Node label of the GPU product; the operator sets it from a variant's gpuProduct.
NODE_LABEL_GPU_PRODUCT = "nvidia.com/gpu.product"
# Environment of the vLLM container the operator sets; users' env may not name these.
ENV_HF_TELEMETRY = "HF_HUB_DISABLE_TELEMETRY"
ENV_RUNTIME_LORA = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
OWNED_VLLM_ENV = (ENV_HF_TELEMETRY, ENV_RUNTIME_LORA)
# Every variable of the sidecar's environment starts with this: all are the operator's.
SIDECAR_ENV_PREFIX = "SITS_CACHE_"


class Container(StrEnum):
    """The containers of a variant's pod; users' pod template patches merge by these names."""

    VLLM = "vllm"
    CACHE = "sits-cache"


class Component(StrEnum):
    """Values of LABEL_COMPONENT on the children that are not a variant's."""

    GATEWAY = "gateway"


class PortName(StrEnum):
    """Named container ports: the probes and the Services refer to them by name."""

    VLLM = "vllm"
    CACHE = "http"


def variant_object_name(deployment: str, variant: str) -> str:
    """Deployment and Service name of one variant; the CRD bounds both parts' lengths."""
    return f"{deployment}-{variant}"


def selector_labels(deployment: str, variant: str) -> dict[str, str]:
    """Labels a variant's Deployment selects on; immutable, so revision is not among them.

    Only sits.dev/* labels, which no release of the operator renames: a Deployment's
    selector cannot change after creation, so an upgrade must never touch it.
    """
    return {LABEL_DEPLOYMENT: deployment, LABEL_VARIANT: variant}


def gateway_object_name(deployment: str) -> str:
    """Name of the gateway's Deployment, ServiceAccount, Role, RoleBinding and PDB.

    "gateway" can never be a variant's name suffix clash: the CRD forbids a variant named
    gateway (see crds/sitsdeployment.yaml, variants[].name).
    """
    return f"{deployment}-{Component.GATEWAY.value}"


def gateway_selector_labels(deployment: str) -> dict[str, str]:
    """Labels the gateway's Deployment, PDB and the root Service select on (immutable)."""
    return {LABEL_DEPLOYMENT: deployment, LABEL_COMPONENT: Component.GATEWAY.value}


def common_labels(deployment: str) -> dict[str, str]:
    """Labels on every child (and pod) of one SitsDeployment."""
    return {
        LABEL_NAME: APP_NAME,
        LABEL_PART_OF: deployment,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_DEPLOYMENT: deployment,
    }


def is_owned_label(key: str) -> bool:
    return key.startswith(OWNED_LABEL_PREFIXES)


def is_owned_annotation(key: str) -> bool:
    return key in OWNED_ANNOTATIONS or key.startswith(OWNED_ANNOTATION_PREFIXES)
