"""Operator settings from the environment (the Helm chart sets these variables)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from sits_operator.adapters.notification_settings import notifications_from_env
from sits_operator.model.settings import OperatorSettings


def settings_from_env(env: Mapping[str, str] | None = None) -> OperatorSettings:
    """Read SITS_* variables; anything unset keeps the built-in default."""
    env = os.environ if env is None else env
    defaults = OperatorSettings()
    sidecar_image = env.get("SITS_CACHE_SIDECAR_IMAGE", defaults.cache_sidecar_image)
    return OperatorSettings(
        field_manager=env.get("SITS_FIELD_MANAGER", defaults.field_manager),
        cache_sidecar_image=sidecar_image,
        # One data-plane image carries both: the gateway follows the sidecar's unless set.
        gateway_image=env.get("SITS_GATEWAY_IMAGE") or sidecar_image,
        resync_seconds=float(env.get("SITS_RESYNC_SECONDS", defaults.resync_seconds)),
        default_kv_cache_fraction=float(
            env.get("SITS_DEFAULT_KV_CACHE_FRACTION", defaults.default_kv_cache_fraction)
        ),
        notifications=notifications_from_env(env),
    )
