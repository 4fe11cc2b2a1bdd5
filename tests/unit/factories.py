"""Small builders for specs used across the unit tables."""

from __future__ import annotations

from typing import Any

from sits_operator.model.spec import ObjectRef, SitsDeploymentSpec, parse_spec

OWNER = ObjectRef(name="chat", namespace="prod", uid="uid-1", generation=3)


def variant(name: str = "v1", role: str = "stable", **extra: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": name,
        "role": role,
        "image": "vllm/vllm-openai:v0.11.0",
        "model": "/models/llama",
        "revision": "r1",
        "migProfile": "1g.10gb",
    }
    raw.update(extra)
    return raw


def spec(*variants: dict[str, Any], **extra: Any) -> SitsDeploymentSpec:
    raw: dict[str, Any] = {
        "variants": list(variants) or [variant(), variant("v2", "candidate", revision="r2")]
    }
    raw.update(extra)
    return parse_spec(raw)
