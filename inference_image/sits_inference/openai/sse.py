"""The one reader of server-sent events in the data plane (vLLM's streamed answers).

Both proxies relay streams event by event: an event is forwarded as soon as its
terminating blank line arrives, so nothing is held longer than the upstream takes to
write one event. The gateway reads the events for their ``usage``; the sidecar also
assembles them into an answer to store, and renames the model in each chunk. Framing
follows the SSE specification: an event ends at a blank line (``\\n\\n``, ``\\r\\n\\r\\n``
or ``\\r\\r``), its data is the ``data:`` lines joined by newlines, ``:`` starts a comment.
A stream that never forms events is not held forever: past ``max_pending`` bytes the
splitter gives up on framing (``framing_lost``) and hands the bytes on as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from .errors import JSON_ERRORS

DONE: Final = "[DONE]"
DONE_EVENT: Final = b"data: [DONE]\n\n"
# Bytes held while waiting for an event's end before giving up on event framing.
MAX_PENDING: Final = 1 << 20

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class SseSplitter:
    """Cuts a byte stream into complete events (each with its terminating blank line)."""

    __slots__ = ("_limit", "_pending", "framing_lost")

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._limit = max_pending
        self._pending = b""
        self.framing_lost = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self._pending and _is_one_event(chunk):
            return [chunk]  # one whole event, as vLLM writes them: no scan needed
        data = self._pending + chunk if self._pending else chunk
        events: list[bytes] = []
        start = 0
        for match in _BOUNDARY.finditer(data):
            events.append(data[start : match.end()])
            start = match.end()
        self._pending = data[start:]
        if len(self._pending) > self._limit:
            self.framing_lost = True
            events.append(self._pending)
            self._pending = b""
        return events

    def flush(self) -> bytes:
        """Whatever trails the last complete event (a cut-off stream leaves some)."""
        rest, self._pending = self._pending, b""
        return rest


def _is_one_event(chunk: bytes) -> bool:
    """Exactly one ``\n\n``-terminated event, and no CR that could frame another."""
    end = len(chunk) - 2
    return end >= 0 and chunk.find(b"\n\n") == end and b"\r" not in chunk


def event_data(event: bytes) -> str | None:
    """The joined ``data:`` lines of one event, or None when it has none (comments)."""
    lines = []
    for line in event.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(" ") else value)
    return "\n".join(lines) if lines else None


def parse_event_json(data: str | bytes) -> dict[str, Any] | None:
    """An event's data as a JSON object; None for anything else (``[DONE]`` included)."""
    try:
        doc = orjson.loads(data)
    except JSON_ERRORS:
        return None
    return doc if isinstance(doc, dict) else None


def event_json(event: bytes) -> dict[str, Any] | None:
    """The JSON object an event carries, if any. vLLM's events are one ``data:`` line:
    those are parsed straight from the bytes, without decoding and joining lines."""
    body = event.rstrip(b"\r\n")
    if body.startswith(b"data:") and b"\n" not in body and b"\r" not in body:
        return parse_event_json(body[5:])
    data = event_data(event)
    return None if data is None else parse_event_json(data)


def is_done(data: str | None) -> bool:
    """Whether an event's data is the ``[DONE]`` that ends an OpenAI stream."""
    return data is not None and data.strip() == DONE


def data_event(doc: Mapping[str, Any]) -> bytes:
    """One ``data:`` event carrying ``doc``."""
    return b"data: " + orjson.dumps(doc) + b"\n\n"


def is_usage_only(doc: Mapping[str, Any]) -> bool:
    """The chunk ``stream_options.include_usage`` adds at the end: usage and no choices.
    A proxy that asked for it on the client's behalf removes it again."""
    usage = doc.get("usage")
    return isinstance(usage, dict) and bool(usage) and not doc.get("choices")
