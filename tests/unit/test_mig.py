"""The MIG profile table, and its agreement with the SitsDeployment CRD.

The CRD repeats the table twice (the migProfile/gpuProduct enums and the CEL rule that checks
a profile against its product); these tests keep the three copies equal.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from sits_operator.model import mig

CRD = Path(__file__).resolve().parents[2] / "crds" / "sitsdeployment.yaml"
GIB = 2**30


@pytest.fixture(scope="module")
def variant_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    root = version["schema"]["openAPIV3Schema"]
    items: dict[str, Any] = root["properties"]["spec"]["properties"]["variants"]["items"]
    return items


def test_crd_mig_profile_enum_equals_all_profiles(variant_schema: dict[str, Any]) -> None:
    enum = variant_schema["properties"]["migProfile"]["enum"]
    assert len(enum) == len(set(enum)), "duplicate profile in the CRD enum"
    assert set(enum) == mig.ALL_PROFILES


def test_crd_gpu_product_enum_equals_table(variant_schema: dict[str, Any]) -> None:
    assert tuple(variant_schema["properties"]["gpuProduct"]["enum"]) == mig.GPU_PRODUCTS


def _cel_product_lists(expression: str) -> dict[str, tuple[str, ...]]:
    """The product -> profiles map literal of a CEL expression (lists, or ", "-joined strings)."""
    lists = re.findall(r"'(NVIDIA-[^']+)':\s*\[([^\]]*)\]", expression)
    if lists:
        return {product: tuple(re.findall(r"'([^']+)'", items)) for product, items in lists}
    joined = re.findall(r"'(NVIDIA-[^']+)':\s*'([^']*)'", expression)
    return {product: tuple(items.split(", ")) for product, items in joined}


def test_crd_cel_product_table_equals_table(variant_schema: dict[str, Any]) -> None:
    rules = variant_schema["x-kubernetes-validations"]
    (rule,) = [r for r in rules if r.get("fieldPath") == ".migProfile"]
    assert _cel_product_lists(rule["rule"]) == dict(mig.PRODUCT_PROFILES)
    assert _cel_product_lists(rule["messageExpression"]) == dict(mig.PRODUCT_PROFILES)


@pytest.mark.parametrize(
    ("profile", "gib"),
    [
        ("1g.5gb", 5),
        ("1g.5gb+me", 5),
        ("1g.10gb", 10),
        ("2g.20gb", 20),
        ("3g.40gb", 40),
        ("7g.80gb", 80),
        # H200: what its driver gives a slice (nvidia-smi mig -lgip), not the name's figure.
        ("1g.18gb", 16),
        ("1g.18gb+me", 16),
        ("1g.35gb", 32.5),
        ("2g.35gb", 32.5),
        ("3g.71gb", 69.75),
        ("4g.71gb", 69.75),
        ("7g.141gb", 140),
    ],
)
def test_profile_memory_bytes(profile: str, gib: float) -> None:
    assert mig.profile_memory_bytes(profile) == gib * GIB


def test_no_slice_is_sized_above_what_its_name_says() -> None:
    """The names round up: a measured slice is never larger than its nominal size, and an
    H200's smallest slice leaves room for 0.9 of it (the operator's memory utilization)."""
    for profile, mib in mig.SLICE_MIB.items():
        assert mib * 2**20 <= int(profile.split(".")[1].removesuffix("gb")) * GIB, profile
    assert 0.9 * mig.profile_memory_bytes("1g.18gb") < 16 * GIB


@pytest.mark.parametrize("profile", sorted(mig.ALL_PROFILES))
def test_me_profiles_share_memory_with_base(profile: str) -> None:
    base = mig.base_profile(profile)
    assert mig.profile_memory_bytes(profile) == mig.profile_memory_bytes(base)
    assert base in mig.ALL_PROFILES


@pytest.mark.parametrize(
    "profile", ["", "1g.6gb", "8g.80gb", "1g.10GB", "mig-1g.10gb", "1g.10gb+mx"]
)
def test_unknown_profiles_are_rejected(profile: str) -> None:
    assert profile not in mig.ALL_PROFILES
    with pytest.raises(ValueError, match="unknown MIG profile"):
        mig.profile_memory_bytes(profile)
    with pytest.raises(ValueError, match="unknown MIG profile"):
        mig.resource_name(profile)


def test_products_offering() -> None:
    assert mig.products_offering("1g.10gb") == (mig.A100_40GB, mig.A100_80GB, mig.H100_80GB)
    assert mig.products_offering("1g.5gb") == (mig.A100_40GB,)
    assert mig.products_offering("2g.35gb") == (mig.H200,)
    assert mig.products_offering("9g.1tb") == ()


def test_product_offers() -> None:
    assert mig.product_offers(mig.H200, "1g.18gb+me")
    assert not mig.product_offers(mig.H200, "1g.10gb")
    assert not mig.product_offers("NVIDIA-B200", "1g.10gb")


def test_resource_name() -> None:
    assert mig.resource_name("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert mig.resource_name("1g.18gb+me") == "nvidia.com/mig-1g.18gb+me"


def test_compute_slices() -> None:
    slices = [mig.profile_compute_slices(p) for p in mig.PRODUCT_PROFILES[mig.H200]]
    assert slices == [1, 1, 1, 2, 3, 4, 7]


def test_every_product_offers_seven_profiles_small_to_large() -> None:
    for product, profiles in mig.PRODUCT_PROFILES.items():
        assert len(profiles) == 7, product
        sizes = [mig.profile_memory_bytes(p) for p in profiles]
        assert sizes == sorted(sizes), product
