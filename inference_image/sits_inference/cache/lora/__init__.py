"""L3 of the sidecar's cache: LoRA adapter residency in vLLM through its runtime API.

``AdapterResidency`` decides which adapters vLLM holds (at most ``max_resident``), loads
an adapter when a request needs it (once, however many ask), never unloads one with a
request in flight, keeps pinned ones, and reloads what a restarted vLLM lost. Each
adapter version is served under ``<name>@<digest>``. See ``residency`` for the design
and ``policy`` for the eviction value function.
"""

from .model import AdapterLease, AdapterUnavailable
from .residency import AdapterResidency
from .spec import AdapterSpec, ResidencyConfig, parse_adapters

__all__ = [
    "AdapterLease",
    "AdapterResidency",
    "AdapterSpec",
    "AdapterUnavailable",
    "ResidencyConfig",
    "parse_adapters",
]
