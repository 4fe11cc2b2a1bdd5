"""The vLLM server command line for one variant, sized to its MIG slice."""

from __future__ import annotations

from sits_operator.core import volumes
from sits_operator.core.quantity import parse_bytes
from sits_operator.model.mig import profile_memory_bytes
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import Variant

# vLLM refuses a KV cache too small to hold one sequence; below this we call the spec wrong.
MIN_KV_CACHE_BYTES = 256 * 2**20


def kv_cache_bytes(variant: Variant, settings: OperatorSettings) -> int:
    """KV-cache budget on the variant's slice.

    With `modelMemory` given: what is left of the usable slice after the weights.
    Without it: a fixed share of the slice, because the weights' size is unknown.
    """
    slice_bytes = profile_memory_bytes(variant.mig_profile)
    if variant.model_memory is None:
        return int(slice_bytes * settings.default_kv_cache_fraction)
    usable = int(slice_bytes * settings.gpu_memory_utilization)
    return usable - parse_bytes(variant.model_memory)


def max_cpu_loras(variant: Variant) -> int:
    """vLLM's CPU-side adapter cache: at least the GPU slots, at least the sidecar's residency.

    vLLM 0.32 keeps unloaded adapters' weights in an LRU of this size; the sidecar's L3
    tier keeps that LRU aligned with its own choice of resident adapters, which only works
    when the LRU can hold every adapter the sidecar keeps resident.
    """
    return max(variant.lora.max_loras, variant.cache.lora.max_resident)


def model_revision_args(variant: Variant) -> list[str]:
    """`--revision <git ref>` for a pinned Hugging Face model; nothing otherwise.

    The variant's `revision` is the rollout's label, not a git ref: passing it made vLLM
    look for a branch called e.g. `qwen3-1.7b` and fail the download. vLLM pins the
    tokenizer to the same ref when --tokenizer-revision is absent, so one flag suffices.
    """
    if variant.model_revision is None:
        return []
    return ["--revision", variant.model_revision]


def vllm_args(variant: Variant, served_model_name: str, settings: OperatorSettings) -> list[str]:
    """Arguments for `python -m vllm.entrypoints.openai.api_server`.

    The operator owns model identity, port and memory sizing; the user's extra arguments
    come last (the CRD forbids them from overriding the owned ones). A pvc:// model is
    loaded from where its claim is mounted.
    """
    args = [
        "--model",
        volumes.resolve(variant.model),
        "--served-model-name",
        served_model_name,
        *model_revision_args(variant),
        "--port",
        str(settings.vllm_port),
        "--kv-cache-memory-bytes",
        str(kv_cache_bytes(variant, settings)),
    ]
    if variant.serves_adapters:
        args += [
            "--enable-lora",
            "--max-loras",
            str(variant.lora.max_loras),
            "--max-lora-rank",
            str(variant.lora.max_lora_rank),
            "--max-cpu-loras",
            str(max_cpu_loras(variant)),
        ]
    return args + list(variant.vllm_args)
