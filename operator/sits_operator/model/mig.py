"""The MIG profile table: which slices each supported GPU product offers, and how big they are.

Source: NVIDIA MIG User Guide, "Supported MIG Profiles". A100-SXM4-80GB and H100-80GB share
the same profile names (memory scales with the card); H200 (141 GB) has its own. The keys are
the values of the node label ``nvidia.com/gpu.product`` that the GPU feature discovery sets,
and the same strings are the ``gpuProduct`` enum of the SitsDeployment CRD.

Memory sizes the KV cache (slice memory minus model weights), so it must not be more than the
slice has. The profile names round up: on an H200 the driver gives ``1g.18gb`` 16 GiB, not 18,
and 0.9 x 18 GiB would ask vLLM for more memory than the slice holds. Where the driver's own
figure is known (:data:`SLICE_MIB`, read with ``nvidia-smi mig -lgip``) it is used; elsewhere
the nominal figure in the name times 2**30, which on A100/H100 80GB overstates by about 2.5 %
(``2g.20gb`` is 19,968 MiB), within vLLM's ``--gpu-memory-utilization`` headroom. ``+me``
profiles (media extensions: NVDEC/JPEG/OFA) have exactly the memory of their base profile.

This module is part of ``model``: pure data and functions, no I/O. The CRD's ``migProfile``
enum must equal :data:`ALL_PROFILES` (``tests/unit/test_mig.py`` checks it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

A100_40GB: Final = "NVIDIA-A100-SXM4-40GB"
A100_80GB: Final = "NVIDIA-A100-SXM4-80GB"
H100_80GB: Final = "NVIDIA-H100-80GB-HBM3"
H200: Final = "NVIDIA-H200"

RESOURCE_PREFIX: Final = "nvidia.com/mig-"

_PROFILE_RE: Final = re.compile(r"^(?P<compute>[1-7])g\.(?P<gb>[0-9]+)gb(?P<me>\+me)?$")

_GIB: Final = 2**30


PRODUCT_PROFILES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        A100_40GB: ("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
        A100_80GB: ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        H100_80GB: ("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
        H200: ("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    }
)
"""GPU product (``nvidia.com/gpu.product``) -> its MIG profiles, in NVIDIA's order."""

#: Memory of one slice as the driver reports it (`nvidia-smi mig -lgip`, GiB x 1024), by
#: base profile. H200: read on an NVIDIA H200 (143,771 MiB, driver 580.159.04) on
#: 2026-12-04 with scripts/device/gpu_facts.py; its seven profiles matched the table above.
SLICE_MIB: Final[Mapping[str, int]] = MappingProxyType(
    {
        "1g.18gb": 16 * 1024,
        "1g.35gb": 32 * 1024 + 512,
        "2g.35gb": 32 * 1024 + 512,
        "3g.71gb": 69 * 1024 + 768,
        "4g.71gb": 69 * 1024 + 768,
        "7g.141gb": 140 * 1024,
    }
)

GPU_PRODUCTS: Final[tuple[str, ...]] = tuple(PRODUCT_PROFILES)

ALL_PROFILES: Final[frozenset[str]] = frozenset(
    profile for profiles in PRODUCT_PROFILES.values() for profile in profiles
)
"""Every profile any supported product offers: the CRD's ``migProfile`` enum."""


def _parse(profile: str) -> re.Match[str]:
    match = _PROFILE_RE.match(profile)
    if match is None or profile not in ALL_PROFILES:
        raise ValueError(
            f"unknown MIG profile {profile!r}; known profiles: {', '.join(sorted(ALL_PROFILES))}"
        )
    return match


def profile_memory_bytes(profile: str) -> int:
    """Memory of one slice of ``profile`` in bytes: the driver's figure where known
    (:data:`SLICE_MIB`), else nominal GB x 2**30; ``+me`` = its base.

    Raises ``ValueError`` for a profile no supported product offers.
    """
    match = _parse(profile)
    known = SLICE_MIB.get(profile.removesuffix("+me"))
    return known * 2**20 if known is not None else int(match["gb"]) * _GIB


def profile_compute_slices(profile: str) -> int:
    """Number of compute slices (the ``Ng`` part): 1 to 7 of the GPU's seven."""
    return int(_parse(profile)["compute"])


def base_profile(profile: str) -> str:
    """The profile without its media-extension suffix: ``1g.10gb+me`` -> ``1g.10gb``."""
    _parse(profile)
    return profile.removesuffix("+me")


def products_offering(profile: str) -> tuple[str, ...]:
    """GPU products that offer ``profile``, in :data:`GPU_PRODUCTS` order (may be empty)."""
    return tuple(product for product, profiles in PRODUCT_PROFILES.items() if profile in profiles)


def product_offers(product: str, profile: str) -> bool:
    """Whether ``product`` offers ``profile`` (False for an unknown product)."""
    return profile in PRODUCT_PROFILES.get(product, ())


def resource_name(profile: str) -> str:
    """The extended resource the NVIDIA device plugin (mixed strategy) advertises for it."""
    _parse(profile)
    return f"{RESOURCE_PREFIX}{profile}"
