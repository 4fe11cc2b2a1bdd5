"""vLLM's runtime LoRA API, as the residency manager needs it.

What vLLM 0.32 does with these calls (read in ``vllm/entrypoints/openai/models/serving.py``
and ``vllm/lora/worker_manager.py``), which shapes the residency manager:

- ``POST /v1/load_lora_adapter`` registers the name and calls the engine's ``add_lora``:
  the weights are read from disk into the worker's CPU adapter cache right away (so a
  bad path fails the call, not the first request). A name already registered answers
  400 ("has already been loaded").
- ``POST /v1/unload_lora_adapter`` only forgets the *name* (404 if unknown). The
  weights stay in the worker's cache, an LRU of ``--max-cpu-loras`` entries that every
  engine step touches for the adapters in the batch; they leave only when that LRU needs
  room. ``touch()`` exists for that reason (see ``residency``).
- ``GET /v1/models`` lists the base model and every registered adapter (``parent`` set).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import aiohttp

TOUCH_PROMPT: Final = "."


class UpstreamUnreachableError(Exception):
    """vLLM did not answer usably (not started yet, restarting, connection torn)."""


@dataclass
class UpstreamRejectedError(Exception):
    """vLLM answered a runtime-LoRA call with an error status."""

    status: int
    message: str

    def __str__(self) -> str:
        return f"vLLM answered {self.status}: {self.message}"


class VllmLoraApi:
    """Thin async client of the runtime LoRA endpoints; owns no state beyond its session."""

    def __init__(self, base_url: str, session: aiohttp.ClientSession) -> None:
        self._base = base_url.rstrip("/")
        self._session = session

    async def load(self, name: str, path: str, timeout_s: float) -> None:
        """Register and load ``name`` from ``path``; an already loaded name is success."""
        body = {"lora_name": name, "lora_path": path}
        try:
            await self._post("/v1/load_lora_adapter", body, timeout_s)
        except UpstreamRejectedError as err:
            # A second sidecar call after a lost answer, or an adoption race: the name is
            # there, which is all the caller wants.
            if err.status == 400 and name in await self.adapters():
                return
            raise

    async def unload(self, name: str, timeout_s: float) -> bool:
        """Forget ``name``; False when vLLM did not know it (already gone)."""
        try:
            await self._post("/v1/unload_lora_adapter", {"lora_name": name}, timeout_s)
        except UpstreamRejectedError as err:
            if err.status in (400, 404):
                return False
            raise
        return True

    async def touch(self, name: str, timeout_s: float) -> None:
        """A one-token request through ``name``: refreshes it in vLLM's worker LRU."""
        body = {"model": name, "prompt": TOUCH_PROMPT, "max_tokens": 1, "temperature": 0}
        await self._post("/v1/completions", body, timeout_s)

    async def models(self, timeout_s: float = 5.0) -> list[dict[str, Any]]:
        """The ``data`` list of ``GET /v1/models``."""
        try:
            async with self._session.get(
                f"{self._base}/v1/models", timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                if response.status != 200:
                    raise UpstreamRejectedError(response.status, await response.text())
                payload = await response.json()
        except (TimeoutError, aiohttp.ClientError) as err:
            raise UpstreamUnreachableError(f"GET /v1/models: {err!r}") from err
        data = payload.get("data") if isinstance(payload, dict) else None
        return [item for item in data or [] if isinstance(item, dict)]

    async def adapters(self, timeout_s: float = 5.0) -> set[str]:
        """Names of the adapters vLLM has registered (entries with a ``parent``)."""
        return {
            str(item["id"])
            for item in await self.models(timeout_s)
            if item.get("parent") and "id" in item
        }

    async def _post(self, path: str, body: dict[str, Any], timeout_s: float) -> None:
        try:
            async with self._session.post(
                f"{self._base}{path}", json=body, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                text = await response.text()
                if response.status >= 400:
                    raise UpstreamRejectedError(response.status, _error_message(text))
        except aiohttp.ClientError as err:  # refused, reset, or a torn answer
            raise UpstreamUnreachableError(f"POST {path}: {err!r}") from err


def _error_message(text: str) -> str:
    """vLLM's ``{"error": {"message": ...}}`` body, or the raw text (shortened)."""
    try:
        payload = json.loads(text)
    except ValueError:
        return text[:500]
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and "message" in error:
        return str(error["message"])[:500]
    if isinstance(payload, dict) and "detail" in payload:
        return str(payload["detail"])[:500]
    return text[:500]
