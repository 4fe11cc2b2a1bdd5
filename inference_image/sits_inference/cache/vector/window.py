"""Inverted-list accesses counted over a sliding time window, persisted across restarts.

Why time buckets: the seed keeps the lists hit 50 times or more "in the last hour". A
per-access timestamp log would grow with traffic; a ring of `buckets` count arrays (one
per window/buckets seconds) costs nlist integers per bucket, and expiring a bucket is one
subtraction from the running total. The window is therefore exact to one bucket width
(one minute for the default hour).

Why wall-clock time: the counts are saved when the sidecar stops and read when it starts
again, so bucket times must mean the same thing in two processes; a monotonic clock does
not. The saved file names the index digest: list numbers of another index (a rebuilt one)
mean other lists, and its counts are ignored.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

FORMAT: Final = 1
Counts = npt.NDArray[np.int64]


class AccessWindow:
    """Thread-safe counts of list accesses within the last `window_s` seconds."""

    def __init__(
        self,
        nlist: int,
        window_s: float,
        *,
        buckets: int = 60,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if nlist <= 0 or window_s <= 0 or buckets <= 0:
            raise ValueError("nlist, window_s and buckets must be positive")
        self.nlist = nlist
        self.window_s = window_s
        self._width = window_s / buckets
        self._nbuckets = buckets
        self._clock = clock
        self._buckets: dict[int, Counts] = {}
        self._total: Counts = np.zeros(nlist, dtype=np.int64)
        self._lock = threading.Lock()

    def _bucket_of(self, when: float) -> int:
        return math.floor(when / self._width)

    def _expire(self, now_bucket: int) -> None:
        oldest = now_bucket - self._nbuckets + 1
        for bucket in [b for b in self._buckets if b < oldest]:
            self._total -= self._buckets.pop(bucket)

    def _add(self, bucket: int, lists: npt.NDArray[np.int64], counts: Counts | int) -> None:
        row = self._buckets.get(bucket)
        if row is None:
            row = self._buckets[bucket] = np.zeros(self.nlist, dtype=np.int64)
        np.add.at(row, lists, counts)
        np.add.at(self._total, lists, counts)

    def record(self, lists: npt.ArrayLike) -> None:
        """Count one access to each list number given (negative numbers are skipped)."""
        flat = np.asarray(lists, dtype=np.int64).ravel()
        flat = flat[(flat >= 0) & (flat < self.nlist)]
        if flat.size == 0:
            return
        now = self._bucket_of(self._clock())
        with self._lock:
            self._expire(now)
            self._add(now, flat, 1)

    def counts(self) -> Counts:
        """Accesses per list within the window (a copy)."""
        with self._lock:
            self._expire(self._bucket_of(self._clock()))
            return self._total.copy()

    def hot(self, min_hits: int) -> npt.NDArray[np.int64]:
        """Lists accessed at least `min_hits` times, most accessed first."""
        counts = self.counts()
        hot = np.flatnonzero(counts >= min_hits)
        return hot[np.argsort(-counts[hot], kind="stable")].astype(np.int64)

    def to_json(self, digest: str) -> dict[str, Any]:
        with self._lock:
            self._expire(self._bucket_of(self._clock()))
            buckets = []
            for bucket, row in sorted(self._buckets.items()):
                lists = np.flatnonzero(row)
                buckets.append(
                    {
                        "start": bucket * self._width,
                        "lists": lists.tolist(),
                        "counts": row[lists].tolist(),
                    }
                )
        return {"format": FORMAT, "digest": digest, "nlist": self.nlist, "buckets": buckets}

    def load_json(self, data: dict[str, Any], digest: str) -> int:
        """Merge saved buckets still inside the window; returns the accesses taken over.

        Counts saved for another index (digest or list count differ) are ignored, as are
        malformed files: losing the statistics costs a slower warm-up, not correctness.
        """
        if data.get("format") != FORMAT or data.get("digest") != digest:
            return 0
        if data.get("nlist") != self.nlist:
            return 0
        taken = 0
        now = self._bucket_of(self._clock())
        with self._lock:
            for entry in data.get("buckets", []):
                bucket = self._bucket_of(float(entry["start"]))
                if bucket > now or bucket <= now - self._nbuckets:
                    continue
                lists = np.asarray(entry["lists"], dtype=np.int64)
                counts = np.asarray(entry["counts"], dtype=np.int64)
                if lists.shape != counts.shape:
                    continue
                keep = (lists >= 0) & (lists < self.nlist) & (counts > 0)
                self._add(bucket, lists[keep], counts[keep])
                taken += int(counts[keep].sum())
        return taken

    def save(self, path: Path, digest: str) -> None:
        """Write atomically (a crash mid-write must not leave half a file to load)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(digest), separators=(",", ":")))
        tmp.replace(path)

    def load(self, path: Path, digest: str) -> int:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as err:
            log.warning("ignoring unreadable list statistics %s: %s", path, err)
            return 0
        if not isinstance(data, dict):
            return 0
        try:
            return self.load_json(data, digest)
        except (KeyError, TypeError, ValueError) as err:
            log.warning("ignoring malformed list statistics %s: %s", path, err)
            return 0
