"""Keeping the hot inverted lists of an IVF index resident.

A list is resident when its three extents (codes+ids in index.faiss, its float16 vectors,
its documents) have been read into the page cache and, where the process may, locked
there with mlock (see pages.py for why pages rather than copies). The set follows the
access window: lists accessed at least `min_hits` times within it are promoted, lists that
dropped below are demoted (unlocked; the kernel may then reclaim their pages). An
optional byte budget keeps the most accessed lists first.

Unlocked resident lists (no CAP_IPC_LOCK) are re-touched on every refresh: touching
pages already in memory costs microseconds, and brings back any the kernel reclaimed.

`resident[list]` is flipped to True only after a list's pages are in memory, so a query
counted as a hit really found them there.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .base import Extent, OpenIndex
from .telemetry import VectorMetrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Change:
    promoted: int
    demoted: int


class HotLists:
    def __init__(
        self,
        index: OpenIndex,
        metrics: VectorMetrics,
        *,
        lock_memory: bool = True,
        max_bytes: int | None = None,
    ) -> None:
        self._index = index
        self._metrics = metrics
        self._may_lock = lock_memory
        self._max_bytes = max_bytes
        self.resident = np.zeros(index.nlist, dtype=bool)
        self._locked = np.zeros(index.nlist, dtype=bool)
        self._extents: dict[int, list[Extent]] = {}
        self._bytes = 0
        self._locked_bytes = 0
        self._mutex = threading.Lock()  # one apply() at a time; queries only read `resident`

    def is_hit(self, lists: npt.NDArray[np.int64]) -> bool:
        lists = lists[lists >= 0]
        return bool(self.resident[lists].all())

    def _list_bytes(self, list_no: int) -> int:
        return sum(extent.size for extent in self._extents_of(list_no))

    def _extents_of(self, list_no: int) -> list[Extent]:
        if list_no not in self._extents:
            self._extents[list_no] = self._index.extents(list_no)
        return self._extents[list_no]

    def _within_budget(self, wanted: npt.NDArray[np.int64]) -> list[int]:
        if self._max_bytes is None:
            return [int(x) for x in wanted]
        kept: list[int] = []
        total = 0
        for list_no in (int(x) for x in wanted):
            size = self._list_bytes(list_no)
            if total + size > self._max_bytes:
                continue
            kept.append(list_no)
            total += size
        return kept

    def _promote(self, list_no: int) -> None:
        locked = self._may_lock
        for extent in self._extents_of(list_no):
            extent.file.warm(extent.start, extent.end)
            if locked and not extent.file.lock(extent.start, extent.end):
                locked = False
                self._may_lock = False
                log.warning(
                    "mlock refused (no CAP_IPC_LOCK, RLIMIT_MEMLOCK too small): hot lists are "
                    "kept warm by re-touching their pages instead of being locked"
                )
        size = self._list_bytes(list_no)
        self._locked[list_no] = locked
        self._bytes += size
        self._locked_bytes += size if locked else 0
        self.resident[list_no] = True

    def _demote(self, list_no: int) -> None:
        self.resident[list_no] = False
        size = self._list_bytes(list_no)
        # Unlock even when the list does not count as locked: a refused mlock may have
        # come after another extent of the same list was locked.
        for extent in self._extents_of(list_no):
            extent.file.unlock(extent.start, extent.end)
        if self._locked[list_no]:
            self._locked_bytes -= size
            self._locked[list_no] = False
        self._bytes -= size

    def apply(self, wanted: npt.NDArray[np.int64]) -> Change:
        """Make exactly `wanted` (most accessed first; trimmed to the budget) resident."""
        with self._mutex:
            keep = self._within_budget(wanted)
            target = np.zeros(len(self.resident), dtype=bool)
            target[keep] = True
            demote = np.flatnonzero(self.resident & ~target)
            for cooled in demote:
                self._demote(int(cooled))
            promoted = 0
            for list_no in keep:
                if not self.resident[list_no]:
                    self._promote(list_no)
                    promoted += 1
            self._retouch_unlocked()
            self._metrics.residency(int(self.resident.sum()), self._bytes, self._locked_bytes)
            self._metrics.demoted(len(demote))
            return Change(promoted, len(demote))

    def _retouch_unlocked(self) -> None:
        for list_no in np.flatnonzero(self.resident & ~self._locked):
            for extent in self._extents_of(int(list_no)):
                extent.file.warm(extent.start, extent.end)

    def release(self) -> None:
        """Unlock everything (the mappings are closed by the index's owner)."""
        with self._mutex:
            for list_no in np.flatnonzero(self.resident):
                self._demote(int(list_no))
            self._metrics.residency(0, 0, 0)
