"""One opened index directory: the index, its documents and filters, access statistics
and resident lists. Everything here blocks (file reads, faiss); the service calls it from
worker threads."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .base import OpenIndex, Vector
from .docs import DocStore, Document, FilterIndex
from .hnsw import HnswIndex
from .hotlists import Change, HotLists
from .ivfpq import IvfPqIndex
from .manifest import Manifest, read_manifest
from .telemetry import VectorMetrics
from .window import AccessWindow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """The parts of VectorConfig an opened index needs."""

    hot_min_hits: int
    hot_window_seconds: float
    lock_memory: bool
    max_resident_bytes: int | None
    warmup_queries: int


@dataclass(frozen=True)
class Retrieved:
    documents: list[Document]
    scores: list[float]
    hit: bool
    lists: int  # inverted lists touched (0 for HNSW)


class LoadedIndex:
    def __init__(
        self,
        directory: Path,
        options: Options,
        metrics: VectorMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.manifest: Manifest = read_manifest(directory)
        self._options = options
        self._metrics = metrics
        self.docs = DocStore(directory)
        try:
            self.filters = FilterIndex(directory)
            self.index: OpenIndex = (
                IvfPqIndex(directory, self.manifest, self.docs)
                if self.manifest.kind == "ivfpq"
                else HnswIndex(directory, self.manifest)
            )
        except BaseException:
            self.docs.close()
            raise
        self.window: AccessWindow | None = None
        self.hot: HotLists | None = None
        if self.index.nlist:
            self.window = AccessWindow(self.index.nlist, options.hot_window_seconds, clock=clock)
            self.hot = HotLists(
                self.index,
                metrics,
                lock_memory=options.lock_memory,
                max_bytes=options.max_resident_bytes,
            )
        self.warmed = False

    @property
    def digest(self) -> str:
        return self.manifest.digest

    def warm_up(self, stats_path: Path | None) -> None:
        """HNSW: read (and lock) the whole file, then run synthetic queries. IVF-PQ: load
        the saved access statistics and preload the lists they make hot."""
        started = time.monotonic()
        if self.hot is None or self.window is None:
            resident = locked = 0
            for mapped in self.index.files():
                resident += mapped.warm()
                if self._options.lock_memory and mapped.lock():
                    locked += mapped.size
            self.index.exercise(self._options.warmup_queries)
            self._metrics.residency(0, resident, locked)
            phase = "hnsw"
        else:
            taken = self.window.load(stats_path, self.digest) if stats_path else 0
            change = self.hot.apply(self.window.hot(self._options.hot_min_hits))
            self._metrics.preloaded_lists.set(change.promoted)
            self.index.exercise(self._options.warmup_queries)
            log.info("preloaded %d hot lists from %d saved accesses", change.promoted, taken)
            phase = "preload"
        self._metrics.warmup_seconds.labels(phase).set(time.monotonic() - started)
        self.warmed = True

    def refresh(self) -> Change | None:
        """Follow the access window: promote lists that became hot, demote cooled ones."""
        if self.hot is None or self.window is None:
            return None
        change = self.hot.apply(self.window.hot(self._options.hot_min_hits))
        if change.promoted:
            self._metrics.promotions.inc(change.promoted)
        return change

    def save_stats(self, path: Path) -> None:
        if self.window is not None:
            self.window.save(path, self.digest)

    def query(self, vector: Vector, k: int, conditions: Mapping[str, Any]) -> Retrieved:
        """Search, count the lists touched, fetch the documents. Raises FilterError."""
        allowed = self.filters.match(conditions) if conditions else None
        started = time.perf_counter()
        hits = self.index.search(vector, k, allowed)
        elapsed = time.perf_counter() - started
        touched = 0
        if hits.lists is not None and self.hot is not None and self.window is not None:
            lists = hits.lists[hits.lists >= 0]
            touched = int(lists.size)
            self.window.record(lists)
            resident = int(np.count_nonzero(self.hot.resident[lists]))
            self._metrics.list_accesses.labels("resident").inc(resident)
            self._metrics.list_accesses.labels("cold").inc(touched - resident)
            hit = resident == touched
        else:
            hit = self.warmed
        self._metrics.query(hit, elapsed)
        documents = self.docs.get(int(i) for i in hits.ids)
        return Retrieved(documents, [float(s) for s in hits.scores], hit, touched)

    def close(self) -> None:
        if self.hot is not None:
            self.hot.release()
        self.index.close()
        self.docs.close()
