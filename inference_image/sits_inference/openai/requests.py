"""The checks every OpenAI request body passes in a proxy, and the one rewrite.

A proxy parses a request only for the fields it uses itself (the gateway: model, stream,
user for routing; the sidecar: also messages or prompt for its cache key); anything else
(temperature ranges, max_tokens against the context length...) is the upstream's to judge,
and its 400 is passed through unchanged. A body that fails these checks is answered
with a 4xx ``ApiError`` and never reaches a variant or a cache tier.

The rewrite: a streamed request that does not ask for usage can get
``stream_options.include_usage`` added upstream, so the stream reports its token counts;
the proxy then removes the usage-only chunk again (``sse.is_usage_only``) so the client
receives what it asked for.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from .errors import JSON_ERRORS, ApiError, bad_json, too_large


class Operation(enum.StrEnum):
    """The OpenAI endpoint a request was sent to, named as the GenAI semantic conventions
    name ``gen_ai.operation.name`` (also the ``operation`` label of the request metrics)."""

    CHAT = "chat"
    COMPLETION = "text_completion"
    EMBEDDINGS = "embeddings"


STREAMABLE = frozenset({Operation.CHAT, Operation.COMPLETION})


def decode_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object; 400 ``invalid_json`` otherwise."""
    if not raw:
        raise bad_json("the body is empty")
    try:
        doc = orjson.loads(raw)
    except JSON_ERRORS as err:
        raise bad_json(str(err)) from None
    if not isinstance(doc, dict):
        raise bad_json("the body must be a JSON object")
    return doc


def invalid(message: str, param: str, code: str = "invalid_type") -> ApiError:
    return ApiError(400, message, param=param, code=code)


MISSING = "missing_required_parameter"


def check_model(doc: Mapping[str, Any], *, missing: str = MISSING) -> str:
    """``model``: required, a non-empty string. ``missing``: the error code when absent."""
    model = doc.get("model")
    if model is None:
        raise invalid("'model' is required.", "model", missing)
    if not isinstance(model, str) or not model:
        raise invalid("'model' must be a non-empty string.", "model")
    return model


def check_stream(doc: Mapping[str, Any]) -> bool:
    """``stream``: a boolean if present; ``stream_options``: an object if present."""
    stream = doc.get("stream")
    if stream is not None and type(stream) is not bool:  # bool only: 1 is not a boolean
        raise invalid("'stream' must be a boolean.", "stream")
    options = doc.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid("'stream_options' must be an object.", "stream_options")
    return bool(stream)


def check_string(doc: Mapping[str, Any], name: str) -> str | None:
    """An optional string field (``user``): None when absent or empty."""
    value = doc.get(name)
    if value is not None and not isinstance(value, str):
        raise invalid(f"'{name}' must be a string.", name)
    return value or None


def asks_usage(doc: Mapping[str, Any]) -> bool:
    """The client set ``stream_options.include_usage``."""
    options = doc.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def with_usage(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``doc`` that asks for the usage chunk (other stream options kept)."""
    options = doc.get("stream_options")
    return {
        **doc,
        "stream_options": {**(options if isinstance(options, dict) else {}), "include_usage": True},
    }


async def read_body(request: web.Request, limit: int, server: str) -> bytes:
    """The request body, refused with 413 over ``limit`` (declared or read length)."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit, server)
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise too_large(limit, server) from None
