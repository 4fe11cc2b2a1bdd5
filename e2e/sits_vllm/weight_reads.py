"""Counting vLLM's reads of LoRA adapter weights from outside the process (Linux inotify).

Why from outside: whether vLLM reloaded an adapter the cache sidecar believed resident is
not visible in vLLM's API or metrics; its worker, however, reads the adapter's weights
file on every load into its CPU cache. The L3 integration tests and the L3 benchmark use
this to check residency decisions against what vLLM really did.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

WEIGHTS = "adapter_model.safetensors"


class WeightReads:
    """Counts loads of each watched adapter by vLLM, from outside (Linux inotify).

    vLLM's worker reads ``adapter_config.json`` and then opens the weights file twice,
    the handles overlapping, on every load into its CPU cache. inotify merges an event
    identical to the unread one before it, so a load shows one or two weight opens
    depending on timing. A load is therefore counted at a weights-file open whose
    directory's previous event was not one: the config read always sits between loads.
    """

    _IN_ACCESS = 0x01
    _IN_CLOSE_WRITE = 0x08
    _IN_CLOSE_NOWRITE = 0x10
    _IN_OPEN = 0x20
    _IN_CLOEXEC = 0o2000000
    _HEADER = struct.Struct("iIII")

    def __init__(self, directories: Mapping[str, Path]) -> None:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self._fd = libc.inotify_init1(self._IN_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        mask = self._IN_OPEN | self._IN_ACCESS | self._IN_CLOSE_WRITE | self._IN_CLOSE_NOWRITE
        self._names: dict[int, str] = {}
        for name, directory in directories.items():
            wd = libc.inotify_add_watch(self._fd, str(directory).encode(), mask)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")
            self._names[wd] = name
        self._last: dict[str, tuple[str, bool]] = {}
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        os.close(self._fd)

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.05)
            if ready:
                self._parse(os.read(self._fd, 1 << 16))

    def _parse(self, buffer: bytes) -> None:
        offset = 0
        while offset < len(buffer):
            wd, mask, _cookie, length = self._HEADER.unpack_from(buffer, offset)
            start = offset + self._HEADER.size
            filename = buffer[start : start + length].rstrip(b"\0").decode()
            offset = start + length
            if wd in self._names:
                self._event(self._names[wd], filename, bool(mask & self._IN_OPEN))

    def _event(self, name: str, filename: str, opened: bool) -> None:
        event = (filename, opened)
        with self._lock:
            if event == (WEIGHTS, True) and self._last.get(name) != event:
                self._counts[name] += 1
            self._last[name] = event
