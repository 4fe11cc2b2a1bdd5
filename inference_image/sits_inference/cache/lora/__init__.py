"""L3 of the sidecar's cache (the ``lora`` tier): which LoRA adapters vLLM holds, managed
through vLLM's runtime API.

``LoraResidency`` decides which adapters vLLM holds (at most ``max_resident``), loads
an adapter when a request needs it (once, however many ask), never unloads one with a
request in flight, keeps pinned ones, and reloads what a restarted vLLM lost. Each
adapter version is served under ``<name>@<digest>``. See ``residency`` for the design
and ``policy`` for the eviction value function.
"""

from .adapter import AdapterLease, AdapterUnavailable
from .residency import LoraResidency
from .spec import AdapterSpec, LoraConfig, parse_adapters

__all__ = [
    "AdapterLease",
    "AdapterSpec",
    "AdapterUnavailable",
    "LoraConfig",
    "LoraResidency",
    "parse_adapters",
]
