"""Building the three tiers from the sidecar's settings, and holding an adapter lease.

Why here and not in the app: each tier is optional (L1 can be disabled, L2 needs an index
directory, L3 needs adapters), each pulls in heavy imports (torch for L1, faiss for L2)
only when it is used, and a tier's own configuration error must stop the sidecar with
the name of the variable that caused it, like every other setting.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .metrics import CacheMetrics
from .settings import ENV_PREFIX, SettingsError, SidecarSettings

if TYPE_CHECKING:
    from .embedding import Embedder
    from .lora import AdapterLease, LoraResidency
    from .semantic import SemanticCache
    from .vector import VectorService

log = logging.getLogger("sits_inference.cache.tiers")


@dataclass
class Tiers:
    """The sidecar's cache tiers, each None when off: L1 ``semantic``, L2 ``vector``
    (the vector index), L3 ``lora`` (adapter residency in vLLM)."""

    semantic: SemanticCache | None = None
    vector: VectorService | None = None
    lora: LoraResidency | None = None


def build_semantic(
    settings: SidecarSettings, metrics: CacheMetrics, embedder: Embedder | None = None
) -> SemanticCache | None:
    """L1, with the embedder loaded and warmed (the first call pays torch's lazy set-up);
    None when disabled, so a disabled cache costs no model in memory."""
    if not settings.semantic_enabled:
        return None
    from .embedding import default_embedder
    from .semantic import SemanticCache, SemanticConfig

    overrides: dict[str, object] = {
        "ttl_seconds": settings.semantic_ttl_s,
        "max_bytes": settings.semantic_max_bytes,
        "cache_non_deterministic": settings.semantic_non_deterministic,
    }
    if settings.semantic_threshold is not None:
        overrides["threshold"] = settings.semantic_threshold
    if settings.semantic_max_entries is not None:
        overrides["max_entries"] = settings.semantic_max_entries
    try:
        config = SemanticConfig(**overrides)  # type: ignore[arg-type]
    except ValueError as err:
        raise SettingsError(f"{ENV_PREFIX}SEMANTIC_*: {err}") from None
    embedder = embedder or default_embedder()
    embedder.embed(["warm-up"])
    return SemanticCache(config, metrics=metrics, embedder=embedder)


def build_vector(
    settings: SidecarSettings, metrics: CacheMetrics, embedder: Embedder | None = None
) -> VectorService | None:
    if not settings.vector_enabled or settings.vector_index is None:
        return None
    if not settings.vector_index.is_dir():
        # Not fatal: L2 answers 503 and keeps trying to open it (a volume still filling).
        log.warning("%sVECTOR_INDEX=%s is not a directory yet", ENV_PREFIX, settings.vector_index)
    from .vector import VectorConfig, VectorService

    config = VectorConfig(
        index_dir=settings.vector_index,
        hot_min_hits=settings.vector_hot_min_hits,
        hot_window_seconds=settings.vector_hot_window_s,
        stats_path=settings.vector_stats_path,
    )
    return VectorService(config, metrics=metrics, embedder=embedder)


def build_lora(settings: SidecarSettings, metrics: CacheMetrics) -> LoraResidency | None:
    if not settings.lora_adapters:
        return None
    from .lora import AdapterSpec, LoraConfig, LoraResidency

    try:
        specs = tuple(
            AdapterSpec(a.name, a.source, a.digest, a.pinned) for a in settings.lora_adapters
        )
        config = LoraConfig(
            max_resident=settings.lora_max_resident,
            adapters=specs,
            upstream_cpu_loras=settings.lora_max_cpu_loras,
        )
    except ValueError as err:
        raise SettingsError(f"{ENV_PREFIX}LORA_ADAPTERS: {err}") from None
    return LoraResidency(config, upstream=settings.upstream, metrics=metrics)


def build_tiers(
    settings: SidecarSettings, metrics: CacheMetrics, embedder: Embedder | None = None
) -> Tiers:
    """Blocking (loads the embedding model, reads index files): call it in a thread."""
    semantic = build_semantic(settings, metrics, embedder)
    shared = embedder
    if semantic is not None and shared is None:
        from .embedding import default_embedder

        shared = default_embedder()  # one model per process, shared by L1 and L2
    return Tiers(
        semantic=semantic,
        vector=build_vector(settings, metrics, shared),
        lora=build_lora(settings, metrics),
    )


@asynccontextmanager
async def lease_for(lora: LoraResidency | None, model: str) -> AsyncIterator[AdapterLease | None]:
    """The adapter lease for ``model`` when it is one of L3's adapters, else None.

    The lease is held for the whole ``async with``: the sidecar leaves it only after the
    last byte of the response, so L3 never unloads an adapter whose sequences are alive.
    """
    if lora is None or not lora.is_adapter(model):
        yield None
        return
    async with lora.acquire(model) as lease:
        yield lease
