"""Names and labels of the objects a SitsDeployment owns.

One place so that rendering, observation (label selectors) and the gateway agree.
"""

from __future__ import annotations

LABEL_DEPLOYMENT = "sits.dev/deployment"
LABEL_VARIANT = "sits.dev/variant"
LABEL_REVISION = "sits.dev/revision"
LABEL_ROLE = "sits.dev/role"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "sits-operator"
ANNOTATION_TEMPLATE_HASH = "sits.dev/template-hash"


def variant_object_name(deployment: str, variant: str) -> str:
    """Deployment and Service name of one variant; the CRD bounds both parts' lengths."""
    return f"{deployment}-{variant}"


def selector_labels(deployment: str, variant: str) -> dict[str, str]:
    """Labels a variant's Deployment selects on; immutable, so revision is not among them."""
    return {LABEL_DEPLOYMENT: deployment, LABEL_VARIANT: variant}


def common_labels(deployment: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "sits-inference",
        "app.kubernetes.io/instance": deployment,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_DEPLOYMENT: deployment,
    }
