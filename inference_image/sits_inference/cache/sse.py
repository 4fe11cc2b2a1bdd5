"""Reading vLLM's server-sent events as they pass, and assembling a streamed miss.

Why split into events here rather than relay raw chunks: a streamed miss is stored only
once it is complete, so its events must be understood (content deltas, finish reasons,
usage, the ``[DONE]`` marker, an error event); and for an adapter the ``model`` of every
chunk is rewritten back to the name the client asked for. Events are forwarded as soon as
their terminating blank line arrives, so nothing is held longer than one event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

import orjson

from .completions import CachedChoice, CachedCompletion, Kind, is_empty

DONE: Final = "[DONE]"
# Bytes held while waiting for an event's end before giving up on event framing (a
# stream that is not SSE is then relayed as it comes, and never stored).
MAX_PENDING: Final = 1 << 20
# Largest answer the assembler will keep for the cache (a runaway stream is not stored).
MAX_ASSEMBLED_CHARS: Final = 4 << 20

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_CHAT_DELTA_KEYS: Final = frozenset({"role", "content"})
_CHOICE_KEYS: Final = frozenset({"index", "delta", "text", "finish_reason", "stop_reason"})
_JSON_ERRORS = (orjson.JSONDecodeError, UnicodeDecodeError, RecursionError)


class SseSplitter:
    """Cuts a byte stream into complete events (each with its terminating blank line)."""

    __slots__ = ("_pending", "framing_lost")

    def __init__(self) -> None:
        self._pending = b""
        self.framing_lost = False

    def feed(self, chunk: bytes) -> list[bytes]:
        data = self._pending + chunk if self._pending else chunk
        events: list[bytes] = []
        start = 0
        for match in _BOUNDARY.finditer(data):
            events.append(data[start : match.end()])
            start = match.end()
        self._pending = data[start:]
        if len(self._pending) > MAX_PENDING:
            self.framing_lost = True
            events.append(self._pending)
            self._pending = b""
        return events

    def flush(self) -> bytes:
        """Whatever trails the last complete event (a cut-off stream leaves some)."""
        rest, self._pending = self._pending, b""
        return rest


def event_data(event: bytes) -> str | None:
    """The joined ``data:`` lines of one event, or None when it has none (comments)."""
    lines = []
    for line in event.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:"):
            value = line[5:]
            lines.append(value[1:] if value.startswith(" ") else value)
    return "\n".join(lines) if lines else None


def parse_event_json(data: str) -> dict[str, object] | None:
    try:
        doc = orjson.loads(data)
    except _JSON_ERRORS:
        return None
    return doc if isinstance(doc, dict) else None


@dataclass
class _Building:
    parts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: str | int | None = None


class StreamAssembler:
    """Collects one streamed answer; ``result()`` is its canonical form once complete.

    Complete means: ``[DONE]`` seen, no error event, every choice finished, nothing in the
    stream that the cache cannot replay (log-probabilities, tool calls, unparseable
    events). Anything else yields None, so truncated or failed streams are never stored.
    """

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.done = False
        self.failed: str | None = None
        self.usage: dict[str, int] | None = None
        self.system_fingerprint: str | None = None
        self._choices: dict[int, _Building] = {}
        self._chars = 0

    def fail(self, reason: str) -> None:
        if self.failed is None:
            self.failed = reason

    def feed_done(self) -> None:
        self.done = True

    def feed(self, doc: dict[str, object]) -> None:
        """One parsed ``data:`` object of the stream."""
        if self.done:
            self.fail("data after [DONE]")
        if "error" in doc:
            self.fail("error event")
            return
        usage = doc.get("usage")
        if isinstance(usage, dict):
            self.usage = {k: v for k, v in usage.items() if type(v) is int} or None
        fingerprint = doc.get("system_fingerprint")
        if isinstance(fingerprint, str):
            self.system_fingerprint = fingerprint
        choices = doc.get("choices")
        if not isinstance(choices, list):
            self.fail("chunk without choices")
            return
        for choice in choices:
            self._feed_choice(choice)

    def _feed_choice(self, choice: object) -> None:
        if not isinstance(choice, dict) or type(choice.get("index")) is not int:
            self.fail("malformed choice")
            return
        if any(not is_empty(v) for k, v in choice.items() if k not in _CHOICE_KEYS):
            self.fail("choice carries fields the cache cannot replay")
            return
        building = self._choices.setdefault(choice["index"], _Building())
        text = self._text_of(choice)
        if text is None:
            return
        if text:
            self._chars += len(text)
            if self._chars > MAX_ASSEMBLED_CHARS:
                self.fail("answer too large to cache")
                return
            building.parts.append(text)
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            building.finish_reason = finish
            stop = choice.get("stop_reason")
            building.stop_reason = stop if isinstance(stop, str | int) else None

    def _text_of(self, choice: dict[str, object]) -> str | None:
        if self.kind == "completion":
            text = choice.get("text", "")
        else:
            delta = choice.get("delta", {})
            if not isinstance(delta, dict):
                self.fail("malformed delta")
                return None
            if any(not is_empty(v) for k, v in delta.items() if k not in _CHAT_DELTA_KEYS):
                self.fail("delta carries fields the cache cannot replay")
                return None
            text = delta.get("content") or ""
        if not isinstance(text, str):
            self.fail("non-text content")
            return None
        return text

    def result(self) -> CachedCompletion | None:
        if not self.done or self.failed is not None or not self._choices:
            return None
        choices = []
        for index in sorted(self._choices):
            building = self._choices[index]
            if building.finish_reason is None:
                return None
            text = "".join(building.parts)
            choices.append(CachedChoice(index, text, building.finish_reason, building.stop_reason))
        return CachedCompletion(self.kind, tuple(choices), self.usage, self.system_fingerprint)
