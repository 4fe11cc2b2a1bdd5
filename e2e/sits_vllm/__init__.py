"""A real vLLM (CPU build) for tests: setup check, tiny model, server process, pytest fixtures.

vLLM and torch live in a separate venv made by ``scripts/setup-vllm.sh``; this package is
stdlib-only on the project side and reaches that venv through subprocesses.
"""

from .model import ensure_tiny_model, make_lora_adapter
from .server import VllmServer, VllmServerError
from .venv import VllmEnvMissingError, vllm_python

__all__ = [
    "VllmEnvMissingError",
    "VllmServer",
    "VllmServerError",
    "ensure_tiny_model",
    "make_lora_adapter",
    "vllm_python",
]
