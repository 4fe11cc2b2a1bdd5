"""Page-level control over memory-mapped index files: warm, lock, ask, evict.

Why pages and not copies: faiss reads the inverted lists (and HNSW vectors) through its
own `mmap` of the index file. Whatever makes those reads fast has to act on the kernel's
page cache for that file, which every mapping of the file shares. So a second, read-only
mapping here can

- warm a byte range: `madvise(MADV_WILLNEED)` starts the read-ahead, then one byte per
  page is read so that the call returns only once the pages are in memory;
- lock it: `mlock` keeps those page-cache pages from being evicted under memory pressure
  (needs CAP_IPC_LOCK or a large enough RLIMIT_MEMLOCK; without either, warming still
  works and `lock` reports False);
- count how much of it is resident (`mincore`), which tests and the benchmark use to check
  that "cold" really means "not in memory".

Copying lists into anonymous memory would need a second faiss index to read them from;
locking the shared pages keeps one index and one code path for hot and cold lists.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

PAGE: Final = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.munlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


class MappedFile:
    """A read-only mapping of one file; ranges are byte offsets, widened to whole pages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("rb")
        self.size = os.fstat(self._file.fileno()).st_size
        self._map: mmap.mmap | None = None
        self._view: npt.NDArray[np.uint8] = np.zeros(0, dtype=np.uint8)
        if self.size:
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            self._view = np.frombuffer(self._map, dtype=np.uint8)
        self._address = int(self._view.ctypes.data) if self.size else 0

    def view(self) -> npt.NDArray[np.uint8]:
        """The whole file as bytes (no copy; reading it faults pages in)."""
        return self._view

    def read(self, start: int, end: int) -> bytes:
        return self._view[start:end].tobytes()

    def _pages(self, start: int, end: int) -> tuple[int, int]:
        first = max(0, start) // PAGE * PAGE
        last = min(self.size, -(-end // PAGE) * PAGE)
        return first, max(first, last)

    def warm(self, start: int = 0, end: int | None = None) -> int:
        """Bring [start, end) into the page cache; returns the bytes covered."""
        first, last = self._pages(start, self.size if end is None else end)
        if last <= first or self._map is None:
            return 0
        self._map.madvise(mmap.MADV_WILLNEED, first, last - first)
        # Summing one byte per page makes the kernel fault each page in now, not later.
        int(self._view[first:last:PAGE].sum())
        return last - first

    def lock(self, start: int = 0, end: int | None = None) -> bool:
        """mlock the pages of [start, end); False when the process may not lock memory."""
        first, last = self._pages(start, self.size if end is None else end)
        if last <= first:
            return True
        return bool(_libc.mlock(self._address + first, last - first) == 0)

    def unlock(self, start: int = 0, end: int | None = None) -> None:
        """munlock only the pages wholly inside [start, end): mlock does not nest, and a
        page shared with a neighbouring range that is still locked must stay locked."""
        end = self.size if end is None else end
        first = -(-max(0, start) // PAGE) * PAGE
        last = end // PAGE * PAGE if end < self.size else self._pages(start, end)[1]
        if last > first:
            _libc.munlock(self._address + first, last - first)

    def resident_bytes(self, start: int = 0, end: int | None = None) -> int:
        """Bytes of [start, end) whose pages are in the page cache (mincore; no faults)."""
        first, last = self._pages(start, self.size if end is None else end)
        if last <= first:
            return 0
        pages = (last - first) // PAGE + (1 if (last - first) % PAGE else 0)
        status = np.zeros(pages, dtype=np.uint8)
        if _libc.mincore(self._address + first, last - first, status.ctypes.data) != 0:
            raise OSError(ctypes.get_errno(), "mincore failed", str(self.path))
        return int(np.count_nonzero(status & 1)) * PAGE

    def close(self) -> None:
        """Unmap (which also drops this mapping's locks) and close the file."""
        self._view = np.zeros(0, dtype=np.uint8)
        if self._map is not None:
            self._map.close()
            self._map = None
        self._file.close()


def evict(path: Path) -> None:
    """Ask the kernel to drop the file's clean, unmapped pages from the page cache.

    posix_fadvise(DONTNEED) only evicts pages no process has mapped, so close every
    mapping of the file first. Used by the benchmark to make a cold start really cold
    without dropping the whole machine's caches.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
