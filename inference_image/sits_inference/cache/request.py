"""Reading a chat or completion request: the checks it passes before any tier sees it.

Why check here and not leave it all to vLLM: a request the sidecar cannot understand must
not reach L1 (whose partition key is built from these fields) nor be answered from the
cache; it gets the OpenAI-style 4xx the gateway also sends (the shared checks of
``sits_inference.openai.requests``), and is never stored. Only the fields the sidecar
itself uses are checked: model and stream like the gateway, plus messages (chat) or prompt
(completions), which L1 keys on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from ..openai.requests import (
    MISSING,
    asks_usage,
    check_model,
    check_stream,
    decode_object,
    invalid,
    read_body,
    with_usage,
)
from .completions import Kind

SERVER = "cache sidecar"  # whose limit a 413 names


@dataclass(frozen=True, slots=True)
class InferenceCall:
    """One parsed chat or completion request."""

    kind: Kind
    doc: dict[str, Any]
    raw: bytes
    model: str
    stream: bool

    @property
    def include_usage(self) -> bool:
        return asks_usage(self.doc)

    def upstream_body(self, *, model: str, add_usage: bool) -> bytes:
        """The body for vLLM: unchanged bytes unless the model or stream options change."""
        if model == self.model and not add_usage:
            return self.raw
        doc = {**self.doc, "model": model}
        return orjson.dumps(with_usage(doc) if add_usage else doc)


def _check_messages(doc: dict[str, Any]) -> None:
    messages = doc.get("messages")
    if messages is None:
        raise invalid("'messages' is required.", "messages", MISSING)
    if not isinstance(messages, list) or not messages:
        raise invalid("'messages' must be a non-empty array.", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise invalid(f"'messages[{i}]' must be an object with a string 'role'.", "messages")


def _is_prompt(prompt: object) -> bool:
    """A string, a list of strings, a list of token ids or a list of token-id lists."""
    if isinstance(prompt, str):
        return True
    if not isinstance(prompt, list) or not prompt:
        return False
    if all(isinstance(p, str) for p in prompt):
        return True
    if all(type(p) is int for p in prompt):
        return True
    return all(isinstance(p, list) and all(type(t) is int for t in p) for p in prompt)


def _check_prompt(doc: dict[str, Any]) -> None:
    prompt = doc.get("prompt")
    if prompt is None:
        raise invalid("'prompt' is required.", "prompt", MISSING)
    if not _is_prompt(prompt):
        raise invalid(
            "'prompt' must be a string, an array of strings or an array of token ids.", "prompt"
        )


def parse_call(raw: bytes, kind: Kind) -> InferenceCall:
    """Validate what the sidecar relies on; raise ``ApiError`` (400) otherwise."""
    doc = decode_object(raw)
    model = check_model(doc)
    if kind == "chat":
        _check_messages(doc)
    else:
        _check_prompt(doc)
    return InferenceCall(kind, doc, raw, model, check_stream(doc))


async def read_call(request: web.Request, kind: Kind, limit: int) -> InferenceCall:
    """The request's body, parsed; 413 from the declared or the read length."""
    return parse_call(await read_body(request, limit, SERVER), kind)
