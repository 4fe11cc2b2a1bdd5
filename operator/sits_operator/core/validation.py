"""Checks the CRD schema cannot express: they need arithmetic across fields or units, or
look into the schemaless parts (a pod template patch).

Problems found here put the resource in the Invalid condition with a message; the
operator then changes nothing in the cluster, so a typo never deletes running pods.
"""

from __future__ import annotations

from sits_operator.core import naming, volumes
from sits_operator.core.pod_validation import pod_settings_problems
from sits_operator.core.quantity import parse_bytes
from sits_operator.core.vllm import MIN_KV_CACHE_BYTES, kv_cache_bytes
from sits_operator.model.durations import parse_duration
from sits_operator.model.mig import products_offering
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import SitsDeploymentSpec, Variant

# Bounds of a variant's startupTimeout (the CRD's CEL rule says the same).
MIN_STARTUP_TIMEOUT = "30s"
MAX_STARTUP_TIMEOUT = "24h"


def _variant_problems(index: int, variant: Variant, settings: OperatorSettings) -> list[str]:
    field = f"spec.variants[{index}]"
    problems: list[str] = []
    if variant.lora.adapters and not variant.lora.enabled:
        problems.append(
            f"{field}.lora: {len(variant.lora.adapters)} adapter(s) listed but lora.enabled is "
            "false; enable LoRA or remove the adapters"
        )
    problems += _model_problems(field, variant)
    problems += _startup_problems(field, variant)
    problems += _reference_problems(field, variant)
    problems += _residency_problems(field, variant)
    problems += pod_settings_problems(f"{field}.pod", variant.pod)
    if variant.gpu_product and variant.gpu_product not in products_offering(variant.mig_profile):
        problems.append(
            f"{field}.migProfile: {variant.mig_profile} is not offered by {variant.gpu_product}"
        )
    if variant.model_memory is not None:
        try:
            parse_bytes(variant.model_memory)
        except ValueError:
            problems.append(f"{field}.modelMemory: {variant.model_memory!r} is not a quantity")
            return problems
        kv = kv_cache_bytes(variant, settings)
        if kv < MIN_KV_CACHE_BYTES:
            problems.append(
                f"{field}.modelMemory: {variant.model_memory} of weights leaves "
                f"{max(kv, 0) // 2**20} MiB of KV cache on a {variant.mig_profile} slice "
                f"(need at least {MIN_KV_CACHE_BYTES // 2**20} MiB); choose a larger profile"
            )
    return problems


def _model_problems(field: str, variant: Variant) -> list[str]:
    """The model must be loadable; a git ref only pins a Hugging Face repository."""
    problem = volumes.model_problem(variant.model)
    if problem:
        return [f"{field}.model: {problem}"]
    if variant.model_revision is not None and not volumes.is_hub_model(variant.model):
        return [
            f"{field}.modelRevision: {variant.model_revision!r} is a Hugging Face git ref; "
            f"model {variant.model!r} is not a Hugging Face repository id, remove modelRevision"
        ]
    return []


def _startup_problems(field: str, variant: Variant) -> list[str]:
    """Too short a budget restarts vLLM before any model loads; too long hides a hang."""
    try:
        seconds = parse_duration(variant.startup_timeout)
    except ValueError:
        return [f"{field}.startupTimeout: {variant.startup_timeout!r} is not a duration"]
    if parse_duration(MIN_STARTUP_TIMEOUT) <= seconds <= parse_duration(MAX_STARTUP_TIMEOUT):
        return []
    return [
        f"{field}.startupTimeout: {variant.startup_timeout} must be between "
        f"{MIN_STARTUP_TIMEOUT} and {MAX_STARTUP_TIMEOUT}"
    ]


def _residency_problems(field: str, variant: Variant) -> list[str]:
    """Pinned adapters take L3 slots for good; the others need at least one slot left."""
    if not variant.serves_adapters:
        return []
    adapters = variant.lora.adapters
    pinned = sum(1 for a in adapters if a.pinned)
    slots = variant.cache.lora.max_resident
    needed = pinned + (1 if pinned < len(adapters) else 0)
    if needed <= slots:
        return []
    return [
        f"{field}.cache.lora.maxResident: {slots} slot(s) cannot hold {pinned} pinned "
        f"adapter(s) and still load the {len(adapters) - pinned} unpinned one(s); raise "
        "maxResident or pin fewer"
    ]


def _reference_problems(field: str, variant: Variant) -> list[str]:
    problems: list[str] = []
    for index, adapter in enumerate(variant.lora.adapters):
        problem = volumes.reference_problem(adapter.source, allow_hub_id=True)
        if problem:
            problems.append(f"{field}.lora.adapters[{index}].source: {problem}")
    index_ref = variant.cache.vector_index.index_ref
    if variant.cache.vector_index.enabled and index_ref:
        problem = volumes.reference_problem(index_ref, allow_hub_id=False)
        if problem:
            problems.append(f"{field}.cache.vectorIndex.indexRef: {problem}")
    return problems


def semantic_problems(spec: SitsDeploymentSpec, settings: OperatorSettings) -> list[str]:
    """Every reason the spec cannot be served as written, each naming its field."""
    problems = pod_settings_problems("spec.podDefaults", spec.pod_defaults)
    problems += pod_settings_problems("spec.traffic.gateway.pod", spec.traffic.gateway.pod)
    for index, variant in enumerate(spec.variants):
        problems += _variant_problems(index, variant, settings)
    names = {v.name for v in spec.variants}
    for index, variant in enumerate(spec.variants):
        if variant.name == naming.Component.GATEWAY.value:  # the CRD refuses it too
            problems.append(
                f"spec.variants[{index}].name: gateway is reserved for the built-in gateway"
            )
    for index, entry in enumerate(spec.traffic.initial_weights):
        if entry.variant not in names:
            problems.append(
                f"spec.traffic.initialWeights[{index}].variant: no variant named {entry.variant!r}"
            )
    return problems
