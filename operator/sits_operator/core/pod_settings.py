"""Users' pod settings: `spec.podDefaults` merged under each variant's `pod`, and where each
setting lands in the rendered pod template.

Why defaults and per-variant settings: on a real cluster every variant needs the same
things (the Hugging Face token of a gated model, an image pull secret, the tolerations of
the GPU nodes' taints), and once in a while one variant needs something else (a node
affinity for its larger slice). Merge rule: a variant's own value wins; maps (nodeSelector,
affinity, annotations, labels) merge key by key, recursively; lists (env, envFrom,
imagePullSecrets, tolerations) are replaced whole, so a variant can also clear a default
list with `[]`; the variant's `podTemplate` patch is merged over the defaults' patch by the
same strategic merge that applies it to the pod template.

What the operator owns (model arguments, the MIG limit, probes, container names and
ports, its labels) cannot be overridden here: core/pod_validation.py rejects such settings
before anything is rendered.
"""

from __future__ import annotations

from typing import Any

from sits_operator.core.strategic_merge import strategic_merge
from sits_operator.model.spec import PodSettings, SitsDeploymentSpec, Variant

POD_TEMPLATE_FIELD = "podTemplate"


def effective_pod_settings(spec: SitsDeploymentSpec, variant: Variant) -> PodSettings:
    """The pod settings of one variant: its own over the SitsDeployment's defaults."""
    return merge_pod_settings(spec.pod_defaults, variant.pod)


def merge_pod_settings(defaults: PodSettings, own: PodSettings) -> PodSettings:
    merged = defaults.model_dump(by_alias=True, exclude_none=True)
    for key, value in own.model_dump(by_alias=True, exclude_none=True).items():
        if key not in merged:
            merged[key] = value
        elif key == POD_TEMPLATE_FIELD:
            merged[key] = strategic_merge(merged[key], value)
        else:
            merged[key] = merge_maps(merged[key], value)
    return PodSettings.model_validate(merged)


def merge_maps(default: Any, own: Any) -> Any:
    """Maps merge key by key (recursively), anything else is replaced by `own`."""
    if not (isinstance(default, dict) and isinstance(own, dict)):
        return own
    merged = dict(default)
    for key, value in own.items():
        merged[key] = merge_maps(merged[key], value) if key in merged else value
    return merged


def vllm_container_fields(settings: PodSettings) -> dict[str, Any]:
    """envFrom of the vLLM container (its env is added to the operator's by the caller).

    env and envFrom go to vLLM only: it is the container that downloads the model (a gated
    model's HF_TOKEN) and reads vLLM_* settings; the sidecar's settings are the operator's.
    """
    return {"envFrom": list(settings.env_from)} if settings.env_from else {}


def pod_spec_fields(settings: PodSettings) -> dict[str, Any]:
    """Pod-level fields the operator sets nothing for of its own: taken as they are."""
    fields: dict[str, Any] = {
        "imagePullSecrets": list(settings.image_pull_secrets or ()),
        "serviceAccountName": settings.service_account_name,
        "affinity": settings.affinity,
        "priorityClassName": settings.priority_class_name,
    }
    return {key: value for key, value in fields.items() if value}


def apply_pod_template(template: dict[str, Any], settings: PodSettings) -> dict[str, Any]:
    """The rendered pod template with the user's strategic merge patch applied, last."""
    if not settings.pod_template:
        return template
    patched: dict[str, Any] = strategic_merge(template, settings.pod_template)
    return patched
