"""Operator-wide settings (not per SitsDeployment): images, names, intervals."""

from __future__ import annotations

from dataclasses import dataclass, field

from sits_operator.model.notifications import NotificationSettings


@dataclass(frozen=True)
class OperatorSettings:
    """Values the platform team sets once for the whole operator install."""

    field_manager: str = "sits-operator"
    cache_sidecar_image: str = "ghcr.io/sits-dev/sits-inference:0.1.0"
    # The image of sits-gateway (router builtin); the same data-plane image by default.
    gateway_image: str = "ghcr.io/sits-dev/sits-inference:0.1.0"
    gateway_port: int = 8080
    vllm_port: int = 8000
    sidecar_port: int = 8080
    # Fraction of a MIG slice's memory vLLM may use in total (weights + KV cache).
    gpu_memory_utilization: float = 0.9
    # KV-cache share of the slice when the spec does not say how large the weights are.
    default_kv_cache_fraction: float = 0.4
    resync_seconds: float = 60.0
    # Webhooks told of decisions and phase changes (model/notifications.py).
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
