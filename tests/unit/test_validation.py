"""Semantic checks the schema cannot make, and the quantity parser they rely on."""

from __future__ import annotations

import pytest

from sits_operator.core.quantity import parse_bytes
from sits_operator.core.validation import semantic_problems
from sits_operator.model.settings import OperatorSettings
from tests.unit.factories import spec, variant


@pytest.mark.parametrize(
    ("first", "fragment"),
    [
        pytest.param(
            variant(lora={"enabled": False, "adapters": [{"name": "a", "source": "/a"}]}),
            "spec.variants[0].lora: 1 adapter(s) listed but lora.enabled is false",
            id="adapters-with-lora-disabled",
        ),
        pytest.param(
            variant(migProfile="1g.10gb", modelMemory="9Gi"),
            "spec.variants[0].modelMemory: 9Gi of weights leaves",
            id="model-too-big",
        ),
        pytest.param(
            variant(migProfile="1g.18gb", gpuProduct="NVIDIA-A100-SXM4-80GB"),
            "spec.variants[0].migProfile: 1g.18gb is not offered by",
            id="wrong-product",
        ),
        pytest.param(
            variant(modelMemory="lots"), "spec.variants[0].modelMemory: 'lots'", id="bad-quantity"
        ),
        pytest.param(
            variant(
                lora={
                    "adapters": [
                        {"name": "a", "source": "/a", "pinned": True},
                        {"name": "b", "source": "/b", "pinned": True},
                        {"name": "c", "source": "/c"},
                    ]
                },
                cache={"lora": {"maxResident": 2}},
            ),
            "spec.variants[0].cache.lora.maxResident: 2 slot(s) cannot hold 2 pinned",
            id="pinned-fill-every-residency-slot",
        ),
    ],
)
def test_problems_name_the_field(first: dict[str, object], fragment: str) -> None:
    problems = semantic_problems(spec(first, variant("v2", "candidate")), OperatorSettings())
    assert any(fragment in p for p in problems), problems


def test_weight_for_unknown_variant() -> None:
    s = spec(traffic={"initialWeights": [{"variant": "v9", "weight": 100}]})
    assert semantic_problems(s, OperatorSettings()) == [
        "spec.traffic.initialWeights[0].variant: no variant named 'v9'"
    ]


@pytest.mark.parametrize(
    "good",
    [variant(), variant(modelMemory="2Gi"), variant(migProfile="7g.80gb", modelMemory="60Gi")],
)
def test_valid_specs_have_no_problems(good: dict[str, object]) -> None:
    assert semantic_problems(spec(good, variant("v2", "candidate")), OperatorSettings()) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [("512", 512), ("1Ki", 1024), ("1.5Gi", 3 * 2**29), ("2G", 2 * 10**9), ("7Mi", 7 * 2**20)],
)
def test_parse_bytes(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "1.5.3G", "-1Gi", "1gb", "1m"])
def test_parse_bytes_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a memory quantity"):
        parse_bytes(text)
