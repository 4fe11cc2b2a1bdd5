"""Token counts and the served model, read from OpenAI responses and streams.

Responses are parsed only for ``usage`` (token counts, hence the metrics' token-length
bucket) and ``model``. Large (embedding) responses are parsed from their tail, where the
usage object is, not float by float. Streams carry usage in one chunk near the end when
``stream_options.include_usage`` is set; ``SseUsageFilter`` picks it out as events pass
and can remove that chunk when a proxy asked for it on the client's behalf.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

import orjson

from .errors import JSON_ERRORS
from .sse import SseSplitter, event_json, is_usage_only

_USAGE_MARK: Final = b'"usage"'
# Larger (embedding) responses: parse only the trailing usage object, not every float.
_TAIL_PARSE_OVER: Final = 1 << 16
# A stream that forms no events is forwarded once this much is held.
STREAM_MAX_PENDING: Final = 1 << 16
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None


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
    except JSON_ERRORS:
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

    Complete events are forwarded at once (``sse.SseSplitter``); events without usage are
    not parsed at all. The usage-only chunk is dropped when the proxy added it (``strip``).
    A stream that never forms events is forwarded as soon as the held bytes pass 64 KiB.
    """

    __slots__ = ("_splitter", "_strip", "events", "usage")

    def __init__(self, *, strip: bool) -> None:
        self._strip = strip
        self._splitter = SseSplitter(STREAM_MAX_PENDING)
        self.usage: Usage | None = None
        self.events = 0  # events forwarded

    def feed(self, chunk: bytes) -> bytes:
        events = self._splitter.feed(chunk)
        if not events:
            return b""
        self.events += len(events)
        complete = events[0] if len(events) == 1 else b"".join(events)
        if _USAGE_MARK not in complete:
            return complete
        return b"".join(self._filter(event) for event in events)

    def flush(self) -> bytes:
        return self._splitter.flush()

    def _filter(self, event: bytes) -> bytes:
        if _USAGE_MARK not in event:
            return event
        doc = event_json(event)
        found = usage_from_document(doc)
        if doc is None or found is None or found.prompt_tokens is None:
            return event
        self.usage = found
        if self._strip and is_usage_only(doc):
            self.events -= 1
            return b""
        return event
