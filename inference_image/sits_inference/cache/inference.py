"""Reading an inference request: the checks every request passes before any tier sees it.

Why check here and not leave it all to vLLM: a request the sidecar cannot understand must
not reach L1 (whose partition key is built from these fields) nor be answered from the
cache; it gets the OpenAI-style 4xx the gateway also sends (same error helpers), and is
never stored. Only the fields the sidecar itself uses are checked; everything else
(temperature ranges, max_tokens against the context length...) stays vLLM's to judge,
and its 400 is passed through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from sits_inference.gateway import errors
from sits_inference.gateway.errors import GatewayError

from .completions import Kind

_JSON_ERRORS = (UnicodeDecodeError, orjson.JSONDecodeError, RecursionError)


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
        options = self.doc.get("stream_options")
        return isinstance(options, dict) and options.get("include_usage") is True

    def upstream_body(self, *, model: str, add_usage: bool) -> bytes:
        """The body for vLLM: unchanged bytes unless the model or stream options change."""
        if model == self.model and not add_usage:
            return self.raw
        doc = dict(self.doc)
        doc["model"] = model
        if add_usage:
            options = doc.get("stream_options")
            doc["stream_options"] = {**(options if isinstance(options, dict) else {})}
            doc["stream_options"]["include_usage"] = True
        return orjson.dumps(doc)


def too_large(limit: int) -> GatewayError:
    return GatewayError(
        413, f"Request body exceeds the cache sidecar's limit of {limit} bytes.",
        code="body_too_large",
    )  # fmt: skip


def _invalid(message: str, param: str, code: str = "invalid_type") -> GatewayError:
    return GatewayError(400, message, param=param, code=code)


def _check_model(doc: dict[str, Any]) -> str:
    model = doc.get("model")
    if model is None:
        raise _invalid("'model' is required.", "model", "missing_required_parameter")
    if not isinstance(model, str) or not model:
        raise _invalid("'model' must be a non-empty string.", "model")
    return model


def _check_messages(doc: dict[str, Any]) -> None:
    messages = doc.get("messages")
    if messages is None:
        raise _invalid("'messages' is required.", "messages", "missing_required_parameter")
    if not isinstance(messages, list) or not messages:
        raise _invalid("'messages' must be a non-empty array.", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _invalid(f"'messages[{i}]' must be an object with a string 'role'.", "messages")


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
        raise _invalid("'prompt' is required.", "prompt", "missing_required_parameter")
    if not _is_prompt(prompt):
        raise _invalid(
            "'prompt' must be a string, an array of strings or an array of token ids.", "prompt"
        )


def _check_stream(doc: dict[str, Any]) -> bool:
    stream = doc.get("stream")
    if stream is not None and type(stream) is not bool:
        raise _invalid("'stream' must be a boolean.", "stream")
    options = doc.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _invalid("'stream_options' must be an object.", "stream_options")
    return bool(stream)


def parse_call(raw: bytes, kind: Kind) -> InferenceCall:
    """Validate what the sidecar relies on; raise GatewayError (400) otherwise."""
    if not raw:
        raise errors.bad_json("the body is empty")
    try:
        doc = orjson.loads(raw)
    except _JSON_ERRORS as err:
        raise errors.bad_json(str(err)) from None
    if not isinstance(doc, dict):
        raise errors.bad_json("the body must be a JSON object")
    model = _check_model(doc)
    if kind == "chat":
        _check_messages(doc)
    else:
        _check_prompt(doc)
    return InferenceCall(kind, doc, raw, model, _check_stream(doc))


async def read_call(request: web.Request, kind: Kind, limit: int) -> InferenceCall:
    """The request's body, parsed; 413 from the declared or the read length."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise too_large(limit) from None
    return parse_call(raw, kind)
