"""Embeddings for the benchmark: computed once, kept on disk, served from memory.

Embedding 100,000 filler questions with MiniLM takes minutes on two cores; the vectors
are cached under ~/.cache/sits/bench/ keyed by a hash of the model and the texts, so a
rerun with the same workload loads them in a second.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np

from sits_inference.cache.embedding import Embedder, Vectors, model_path

CACHE_DIR: Final = Path.home() / ".cache" / "sits" / "bench"
BATCH: Final = 512


def _key(texts: Sequence[str]) -> str:
    digest = hashlib.sha256(str(model_path().name).encode())
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def embed_cached(embedder: Embedder, texts: Sequence[str], label: str) -> Vectors:
    """All rows for `texts`, from ~/.cache/sits/bench/ when present, else computed."""
    path = CACHE_DIR / f"semantic-{label}-{len(texts)}-{_key(texts)}.npy"
    if path.exists():
        print(f"  {label}: {len(texts)} embeddings from {path}", flush=True)
        loaded: Vectors = np.load(path)
        return loaded
    out = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    started = time.monotonic()
    for start in range(0, len(texts), BATCH):
        out[start : start + BATCH] = embedder.embed(texts[start : start + BATCH])
        done = min(len(texts), start + BATCH)
        if done == len(texts) or (start // BATCH) % 10 == 0:
            rate = done / max(1e-9, time.monotonic() - started)
            print(f"  {label}: embedded {done}/{len(texts)} ({rate:.0f}/s)", flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, out)
    tmp.replace(path)
    return out


class MemoEmbedder:
    """The real embedder, with precomputed rows for known texts.

    Used to fill a cache with 100,000 entries without embedding them again; lookups of
    texts it does not know (the measured queries) go to MiniLM.
    """

    def __init__(self, inner: Embedder, texts: Sequence[str], vectors: Vectors) -> None:
        self._inner = inner
        self._rows = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors
        self.misses = 0  # texts sent to the real embedder

    @classmethod
    def from_rows(cls, inner: Embedder, rows: dict[str, int], vectors: Vectors) -> MemoEmbedder:
        """With the row of each known text chosen by the caller (first wins, say)."""
        memo = cls(inner, (), vectors)
        memo._rows = dict(rows)
        return memo

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = [self._rows.get(t) for t in texts]
        if all(r is not None for r in rows):
            return self._vectors[[r for r in rows if r is not None]]
        self.misses += len(texts)
        return self._inner.embed(texts)
