"""The tiny random Llama and its LoRA adapters, built once and cached outside the repository.

Why cached by content hash: building takes seconds to tens of seconds (torch import), and
tests run many times. The key hashes the builder's source (which holds the whole recipe:
sizes, seed, corpus, chat template) and the vLLM venv's pin file (library versions shape the
files), so a change to either gives a fresh directory and stale models are never reused.

Why a subprocess: building needs torch, transformers, tokenizers and peft, which only the
vLLM venv has (see ``sits_vllm.model_build``). This module itself is stdlib-only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from .venv import E2E_DIR, PINS_FILE, default_cache_dir, vllm_python

BUILDER = Path(__file__).resolve().parent / "model_build.py"
BUILD_TIMEOUT_S = 600.0
DONE_MARKER = ".sits-complete"


class ModelBuildError(RuntimeError):
    """The builder subprocess failed; the message carries its output."""


def recipe_hash() -> str:
    """16 hex digits naming the current recipe (builder source plus library pins)."""
    digest = hashlib.sha256(BUILDER.read_bytes() + PINS_FILE.read_bytes())
    return digest.hexdigest()[:16]


def ensure_tiny_model(cache_dir: Path | None = None) -> Path:
    """Return ``<cache>/models/tiny-llama-<hash>``, building the tiny model there if needed.

    ``cache_dir`` defaults to ``$SITS_CACHE_DIR`` or ``~/.cache/sits``.
    """
    key = recipe_hash()
    target = (cache_dir or default_cache_dir()) / "models" / f"tiny-llama-{key}"
    return _build_once(target, key, lambda staging: ["model", str(staging)])


def make_lora_adapter(model_dir: Path, out_dir: Path | None = None, seed: int = 0) -> Path:
    """Return a deterministic LoRA adapter (rank 8, q/v) for ``model_dir``, built once.

    The adapter depends on the base model, the recipe and ``seed``: different seeds give
    different adapters, for tests that need several. ``out_dir`` defaults to
    ``<SITS cache>/loras/tiny-lora-s<seed>-<hash>``; a complete adapter built there with
    the same inputs is reused, anything else there is replaced.
    """
    model_dir = model_dir.resolve()
    inputs = f"{model_dir}|{recipe_hash()}|{seed}"
    key = hashlib.sha256(inputs.encode()).hexdigest()[:16]
    target = out_dir or default_cache_dir() / "loras" / f"tiny-lora-s{seed}-{key}"
    return _build_once(
        target, key, lambda staging: ["lora", str(model_dir), str(staging), str(seed)]
    )


def _is_built(target: Path, key: str) -> bool:
    marker = target / DONE_MARKER
    return marker.exists() and marker.read_text().strip() == key


def _build_once(target: Path, key: str, builder_args: Callable[[Path], list[str]]) -> Path:
    """Build into a temporary sibling and rename it into place, under a file lock.

    The rename makes a half-finished build (killed test run) invisible; the lock makes two
    concurrent sessions build once rather than race; the marker holding ``key`` tells a
    finished build of these inputs from anything else found at ``target``.
    """
    if _is_built(target, key):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{target.name}.lock"):
        if _is_built(target, key):
            return target
        staging = target.parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        _run_builder(builder_args(staging))
        (staging / DONE_MARKER).write_text(f"{key}\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """An exclusive advisory lock held for the duration of the block."""
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_builder(args: list[str]) -> None:
    """Run ``python -m sits_vllm.model_build ARGS`` with the vLLM venv's interpreter."""
    env = {**os.environ, "PYTHONPATH": str(E2E_DIR), "HF_HUB_OFFLINE": "1"}
    env.update({"TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    command = [str(vllm_python()), "-m", "sits_vllm.model_build", *args]
    try:
        result = subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise ModelBuildError(f"{' '.join(command)} timed out after {err.timeout} s") from err
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-4000:]
        raise ModelBuildError(f"{' '.join(command)} exited {result.returncode}:\n{tail}")
