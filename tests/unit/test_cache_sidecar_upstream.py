"""The model fingerprint: what counts as "vLLM now serves other weights"."""

from __future__ import annotations

from typing import Any

import pytest

from sits_inference.cache.upstream import CameUp, fingerprint_of

BASE = {"id": "chat", "object": "model", "root": "/models/llama-3", "parent": None}
ADAPTER = {"id": "support@3f2a9c1d04e7", "object": "model", "root": "/loras/s", "parent": "chat"}


@pytest.mark.parametrize(
    ("models", "expected"),
    [
        ({"data": [BASE]}, (("chat", "/models/llama-3"),)),
        ({"data": [ADAPTER, BASE]}, (("chat", "/models/llama-3"),)),  # L3 loads come and go
        ({"data": [{"id": "b"}, {"id": "a", "root": 7}]}, (("a", ""), ("b", ""))),
        ({"data": []}, ()),
        ({"object": "list"}, None),
        (["chat"], None),
        ({"data": "chat"}, None),
    ],
)
def test_fingerprint_is_the_base_models(models: Any, expected: Any) -> None:
    assert fingerprint_of(models) == expected


@pytest.mark.parametrize(
    ("previous", "current", "changed"),
    [
        ((("chat", "/m1"),), (("chat", "/m1"),), False),
        ((("chat", "/m1"),), (("chat", "/m2"),), True),
        ((("chat", "/m1"),), (("other", "/m1"),), True),
        (None, (("chat", "/m1"),), False),  # first sight: nothing to compare with
        ((("chat", "/m1"),), None, False),  # /v1/models failed: unknown is not "changed"
    ],
)
def test_only_a_known_difference_is_a_model_change(
    previous: Any, current: Any, changed: bool
) -> None:
    assert CameUp(first=False, previous=previous, current=current).model_changed is changed
