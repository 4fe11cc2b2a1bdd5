"""What the sidecar is told about adapters, and the versioned names they are loaded under.

Why a versioned name (``support-bot@3f2a9c1d04e7``): vLLM keys its prefix cache (and its
adapter bookkeeping) on the LoRA name. Were a new version of ``support-bot`` loaded under
the old name, requests to it could reuse KV blocks computed by the old weights. Naming
every version after its content digest makes a new version a different adapter to vLLM,
so nothing computed by the old weights is ever served for the new one. ``@`` is not used
by vLLM in model names and is accepted in ``lora_name`` and in a request's ``model``.

Why the digest covers the directory content (relative paths and bytes) rather than
mtimes: the same files copied to another pod or volume must give the same name, and a
rewritten file with equal bytes is the same adapter.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

DIGEST_CHARS: Final = 12
VERSION_SEPARATOR: Final = "@"
_HEX = re.compile(r"^[0-9a-f]+$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
_READ_CHUNK: Final = 1 << 20
WEIGHT_FILES: Final = ("adapter_model.safetensors", "adapter_model.bin")


@dataclass(frozen=True)
class AdapterSpec:
    """One adapter the sidecar may load: client-facing name, local directory, version.

    The version (the ``@digest`` of the served name) is the digest of the directory's
    content, computed at ``LoraResidency.start`` in a worker thread, so any change
    (weights or ``adapter_config.json``) gives a new name. ``digest`` (``sha256:<hex>``,
    as the CRD writes it) is the *expected* sha256 of the weights file: when the
    directory is readable it is verified and a mismatch makes the adapter unavailable;
    when it is not (a source only vLLM can reach) it is used as the version instead.
    """

    name: str
    source: str
    digest: str | None = None
    pinned: bool = False

    def __post_init__(self) -> None:
        if not _NAME.match(self.name) or VERSION_SEPARATOR in self.name:
            raise ValueError(
                f"adapter name {self.name!r}: use letters, digits, '.', '_', '-', '/' "
                f"(at most 128, no {VERSION_SEPARATOR!r})"
            )
        if not self.source:
            raise ValueError(f"adapter {self.name!r}: empty source")
        if self.digest is not None:
            short_digest(self.digest)  # validate early: a config error, not a load error


@dataclass(frozen=True)
class LoraConfig:
    """How many adapters vLLM may hold at once (``max_resident``), and which ones exist.

    ``max_resident`` maps to vLLM's ``--max-cpu-loras`` (vLLM's CPU-side adapter cache,
    which defaults to ``--max-loras``): runtime-loaded adapters beyond that number are
    silently dropped by vLLM's own LRU and re-read from disk on the next request, so the
    sidecar's notion of "resident" would be a lie. Keep ``max_resident <= --max-cpu-loras``
    (equal is the intent). ``--max-loras`` is the number of distinct adapters in one batch
    (device slots); it may be smaller, at the price of requests for different adapters
    queueing inside vLLM.

    The rest are operational knobs: ``slot_wait_s`` bounds how long a request waits for a
    slot when every resident adapter is busy (then 503); ``load_timeout_s`` bounds one
    load call; failed loads back off from ``backoff_initial_s`` doubling to
    ``backoff_max_s``; ``half_life_s`` is the eviction policy's memory;
    ``reconcile_interval_s`` is how often vLLM's ``/v1/models`` is compared with what the
    sidecar believes is loaded (0 disables; restarts are then only noticed through
    ``upstream_restarted()``); ``upstream_cpu_loras`` is vLLM's ``--max-cpu-loras`` (None:
    equal to ``max_resident``), the capacity of the worker LRU the manager keeps aligned;
    ``eviction_patience_s`` is how long a load may wait for a less valuable adapter that
    is busy, rather than evict a more valuable idle one (0: never wait).
    """

    max_resident: int
    adapters: tuple[AdapterSpec, ...]
    slot_wait_s: float = 30.0
    load_timeout_s: float = 120.0
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 60.0
    half_life_s: float = 600.0
    reconcile_interval_s: float = 10.0
    upstream_cpu_loras: int | None = None
    eviction_patience_s: float = 0.25

    def __post_init__(self) -> None:
        if self.max_resident < 1:
            raise ValueError("max_resident must be at least 1")
        names = [spec.name for spec in self.adapters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"adapter names listed more than once: {duplicates}")
        pinned = sum(1 for spec in self.adapters if spec.pinned)
        unpinned = len(self.adapters) - pinned
        if pinned > self.max_resident or (pinned == self.max_resident and unpinned):
            raise ValueError(
                f"{pinned} pinned adapters leave no slot of max_resident={self.max_resident} "
                f"for the {unpinned} others"
            )
        for field in ("slot_wait_s", "load_timeout_s", "backoff_initial_s", "half_life_s"):
            if getattr(self, field) <= 0:
                raise ValueError(f"{field} must be positive")
        if self.eviction_patience_s < 0:
            raise ValueError("eviction_patience_s must not be negative")
        if self.upstream_cpu_loras is not None and self.upstream_cpu_loras < self.max_resident:
            raise ValueError("upstream_cpu_loras (vLLM --max-cpu-loras) must be >= max_resident")
        if self.backoff_max_s < self.backoff_initial_s or self.reconcile_interval_s < 0:
            raise ValueError("backoff_max_s >= backoff_initial_s and reconcile_interval_s >= 0")


def short_digest(digest: str) -> str:
    """``sha256:ABC…`` or ``abc…`` -> the first ``DIGEST_CHARS`` lowercase hex digits."""
    value = digest.split(":", 1)[-1].strip().lower()
    if len(value) < DIGEST_CHARS or not _HEX.match(value):
        raise ValueError(f"digest {digest!r}: expected at least {DIGEST_CHARS} hex digits")
    return value[:DIGEST_CHARS]


def versioned_name(name: str, digest: str) -> str:
    """The name vLLM knows this version by: ``<name>@<short digest>``."""
    return f"{name}{VERSION_SEPARATOR}{short_digest(digest)}"


def split_versioned(served_name: str) -> tuple[str, str] | None:
    """``name@digest`` -> (name, digest), or None for a name this sidecar did not make."""
    name, sep, digest = served_name.rpartition(VERSION_SEPARATOR)
    if not sep or not name or len(digest) != DIGEST_CHARS or not _HEX.match(digest):
        return None
    return name, digest


def directory_digest(path: Path) -> str:
    """SHA-256 over every regular file below ``path``: relative path, length, bytes.

    Blocking (reads the whole adapter): call it in a worker thread.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"adapter directory {root} does not exist")
    hasher = hashlib.sha256()
    for file in _files(root):
        rel = file.relative_to(root).as_posix().encode()
        hasher.update(len(rel).to_bytes(4, "big") + rel)
        hasher.update(file.stat().st_size.to_bytes(8, "big"))
        with file.open("rb") as handle:
            while chunk := handle.read(_READ_CHUNK):
                hasher.update(chunk)
    return hasher.hexdigest()


def weights_digest(path: Path) -> str | None:
    """SHA-256 of the weights file (``adapter_model.safetensors``, else ``.bin``), or None.

    This is what the CRD's ``digest`` field promises ("sha256 of the adapter weights"):
    what ``sha256sum adapter_model.safetensors`` prints, so users can compute it by hand.
    """
    for name in WEIGHT_FILES:
        file = Path(path) / name
        if file.is_file():
            hasher = hashlib.sha256()
            with file.open("rb") as handle:
                while chunk := handle.read(_READ_CHUNK):
                    hasher.update(chunk)
            return hasher.hexdigest()
    return None


def directory_bytes(path: Path) -> int:
    """Total size of the adapter's files: the tier's ``bytes`` gauge."""
    return sum(file.stat().st_size for file in _files(Path(path)))


def _files(root: Path) -> Iterable[Path]:
    """Regular files in a stable order (sorted walk; symlinked files are followed)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            file = Path(dirpath) / name
            if file.is_file():
                yield file


def parse_adapters(text: str) -> tuple[AdapterSpec, ...]:
    """``SITS_CACHE_LORA_ADAPTERS`` (a JSON list of {"name","source","digest"?,"pinned"?})."""
    raw: Any = json.loads(text) if text.strip() else []
    if not isinstance(raw, list):
        raise ValueError("SITS_CACHE_LORA_ADAPTERS must be a JSON list")
    specs = []
    for item in raw:
        if not isinstance(item, dict) or not {"name", "source"} <= item.keys():
            raise ValueError(f"adapter entry {item!r}: needs 'name' and 'source'")
        specs.append(
            AdapterSpec(
                name=str(item["name"]),
                source=str(item["source"]),
                digest=str(item["digest"]) if item.get("digest") else None,
                pinned=bool(item.get("pinned", False)),
            )
        )
    return tuple(specs)
