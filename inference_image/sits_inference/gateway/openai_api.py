"""What the gateway reads from OpenAI requests and responses, and nothing more.

The proxy forwards bodies byte for byte; it parses a request only for the fields that
route and label it (model, stream, user), and a response only for ``usage`` (token
counts, the token-length bucket) and the served model name. The one rewrite: a streamed
request that does not ask for usage gets ``stream_options.include_usage`` added upstream,
and the usage-only event that this adds is removed again before the client sees it, so
streams are measured in tokens without changing what the client receives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import GatewayError, bad_json

CHAT = "chat"
COMPLETION = "text_completion"
EMBEDDINGS = "embeddings"
STREAMABLE = frozenset({CHAT, COMPLETION})

# Token-length buckets of the prompt: few and fixed, so the label stays low-cardinality.
TOKEN_BUCKETS = ((128, "le128"), (512, "le512"), (2048, "le2k"))
TOKEN_BUCKET_OVER = "gt2k"
# Rough characters per token, for requests whose response carries no usage.
_CHARS_PER_TOKEN = 4
_USAGE_MARK = b'"usage"'
_MAX_PENDING = 1 << 16
# Larger (embedding) responses: parse only the trailing usage object, not every float.
_TAIL_PARSE_OVER = 1 << 16
_DECODER = json.JSONDecoder()
# orjson: 3-5x faster than the json module on these small documents, per request.
_JSON_ERRORS = (UnicodeDecodeError, orjson.JSONDecodeError, RecursionError)


def token_bucket(prompt_tokens: int) -> str:
    for limit, label in TOKEN_BUCKETS:
        if prompt_tokens <= limit:
            return label
    return TOKEN_BUCKET_OVER


@dataclass(frozen=True, slots=True)
class InferenceRequest:
    """The routing-relevant view of one request, plus the body to send upstream."""

    operation: str
    model: str
    stream: bool
    user: str | None
    body: bytes
    # The gateway asked upstream for a usage event the client did not ask for.
    strip_usage_event: bool = False

    @property
    def estimated_prompt_tokens(self) -> int:
        return len(self.body) // _CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None


def _decode(raw: bytes) -> dict[str, Any]:
    if not raw:
        raise bad_json("the body is empty")
    try:
        doc = orjson.loads(raw)
    except _JSON_ERRORS as err:
        raise bad_json(str(err)) from None
    if not isinstance(doc, dict):
        raise bad_json("the body must be a JSON object")
    return doc


def _field(doc: dict[str, Any], name: str, kind: type, *, required: bool = False) -> Any:
    value = doc.get(name)
    if value is None and not required:
        return None
    if type(value) is not kind:  # bool is an int subclass: compare types exactly
        article = "a boolean" if kind is bool else "a string"
        raise GatewayError(400, f"'{name}' must be {article}.", param=name, code="invalid_type")
    return value


def parse_request(raw: bytes, operation: str, *, add_stream_usage: bool) -> InferenceRequest:
    """Validate what routing needs; raise :class:`GatewayError` (400) otherwise."""
    doc = _decode(raw)
    model = _field(doc, "model", str, required=True)
    if not model:
        raise GatewayError(400, "'model' must not be empty.", param="model", code="invalid_type")
    stream = bool(_field(doc, "stream", bool)) and operation in STREAMABLE
    user = _field(doc, "user", str)
    strip = False
    if stream and add_stream_usage and not _asks_usage(doc):
        options = doc.get("stream_options")
        doc["stream_options"] = {**(options if isinstance(options, dict) else {})}
        doc["stream_options"]["include_usage"] = True
        raw, strip = orjson.dumps(doc), True
    return InferenceRequest(operation, model, stream, user or None, raw, strip)


def _asks_usage(doc: dict[str, Any]) -> bool:
    options = doc.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_from_document(doc: object) -> Usage | None:
    """Token counts and model of a response or stream chunk, if it carries usage."""
    if not isinstance(doc, dict):
        return None
    usage, model = doc.get("usage"), doc.get("model")
    model = model if isinstance(model, str) else None
    if not isinstance(usage, dict):
        return Usage(model=model) if model else None
    return Usage(
        _int_or_none(usage.get("prompt_tokens")),
        _int_or_none(usage.get("completion_tokens")),
        model,
    )


def usage_from_body(body: bytes) -> Usage | None:
    """Usage of a whole (non-streamed) JSON response; None when it has none or is not JSON."""
    if len(body) > _TAIL_PARSE_OVER:
        return _usage_from_tail(body)
    try:
        return usage_from_document(orjson.loads(body))
    except _JSON_ERRORS:
        return None


def _usage_from_tail(body: bytes) -> Usage | None:
    at = body.rfind(_USAGE_MARK)
    start = body.find(b"{", at) if at >= 0 else -1
    if start < 0:
        return None
    try:
        usage, _ = _DECODER.raw_decode(body[start:].decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return usage_from_document({"usage": usage})


class SseUsageFilter:
    """Forwards an SSE stream event by event, picking the usage out as it passes.

    Complete events (ending in a blank line) are forwarded at once, so nothing is held
    longer than the upstream takes to finish writing one event. The usage-only event is
    dropped when the gateway added it (``strip``). A stream that never forms events
    (not SSE) is forwarded as soon as the held bytes pass 64 KiB.
    """

    __slots__ = ("_pending", "_strip", "events", "usage")

    def __init__(self, *, strip: bool) -> None:
        self._strip = strip
        self._pending = b""
        self.usage: Usage | None = None
        self.events = 0

    def feed(self, chunk: bytes) -> bytes:
        data = self._pending + chunk if self._pending else chunk
        cut = data.rfind(b"\n\n")
        if cut < 0:
            return self._hold(data)
        complete, self._pending = data[: cut + 2], data[cut + 2 :]
        self.events += complete.count(b"\n\n")
        if _USAGE_MARK not in complete:
            return complete
        return b"".join(self._filter(event) for event in complete.split(b"\n\n") if event)

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return rest

    def _hold(self, data: bytes) -> bytes:
        if len(data) > _MAX_PENDING:
            self._pending = b""
            return data
        self._pending = data
        return b""

    def _filter(self, event: bytes) -> bytes:
        if _USAGE_MARK in event and event.startswith(b"data:"):
            try:
                doc = orjson.loads(event[5:])
            except _JSON_ERRORS:
                return event + b"\n\n"
            found = usage_from_document(doc)
            if found is not None and found.prompt_tokens is not None:
                self.usage = found
                if self._strip and isinstance(doc, dict) and not doc.get("choices"):
                    self.events -= 1
                    return b""
        return event + b"\n\n"
