"""A model of vLLM's worker-side adapter cache, so the sidecar's evictions are vLLM's too.

vLLM 0.32's ``/v1/unload_lora_adapter`` only forgets the adapter's name; its weights stay
in the worker's CPU cache, an LRU of ``--max-cpu-loras`` entries that every engine step
touches for the adapters in the batch, until that LRU needs room. A reload registers a
new entry (a new internal id); the old one stays until evicted. So when the sidecar
loads adapter X after unloading V, the worker evicts its least recently used entry, which
may be a popular resident adapter that was idle a few seconds rather than V: vLLM then
rereads that adapter from disk on its next request, behind the sidecar's back, and the
worker behaves like plain LRU whatever the sidecar decided.

``WorkerLru`` tracks the unloaded-but-cached entries and, before a load that will make
the worker evict, names the resident idle adapters used no later than the oldest of
them; the residency manager refreshes those with a one-token request each, which moves
them ahead in the worker's LRU, so the worker's eviction falls on an unloaded entry.
"""

from __future__ import annotations

from collections.abc import Iterable

from .adapter import Adapter, State


class WorkerLru:
    """Unloaded adapters whose weights vLLM's worker probably still caches."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._unloaded: list[tuple[float, str]] = []  # (last use, served name)

    def unloaded(self, adapter: Adapter) -> None:
        """``adapter`` was just unloaded: its entry stays in the worker for now."""
        self._unloaded.append((adapter.last_used, adapter.served_name))

    def restarted(self) -> None:
        """A restarted vLLM starts with an empty worker cache."""
        self._unloaded.clear()

    def to_refresh(self, occupied: int, adapters: Iterable[Adapter]) -> list[Adapter]:
        """Before a load: the idle resident adapters the worker would evict first.

        ``occupied`` counts the adapters loaded or loading (the new one included). When
        the worker has room, nothing; else its eviction goes to the oldest unloaded entry
        once every resident adapter older than that entry has been refreshed.
        """
        if not self._unloaded or occupied + len(self._unloaded) <= self.capacity:
            return []
        self._unloaded.sort()
        oldest, _ = self._unloaded.pop(0)  # what the worker will evict, once aligned
        return [
            a
            for a in adapters
            if a.state is State.RESIDENT and a.in_flight == 0 and a.last_used <= oldest
        ]
