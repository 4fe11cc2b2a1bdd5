"""Assembling a streamed miss into the answer L1 stores, as its events pass.

A streamed miss is stored only once it is complete, so its events must be understood:
content deltas, finish reasons, usage, the ``[DONE]`` marker, an error event. The events
themselves come from the shared SSE reader (``sits_inference.openai.sse``); the relay
(``relay.py``) feeds each parsed ``data:`` object here while forwarding it to the client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from .completions import CachedChoice, CachedCompletion, Kind, is_empty

# Largest answer the assembler will keep for the cache (a runaway stream is not stored).
MAX_ASSEMBLED_CHARS: Final = 4 << 20

_CHAT_DELTA_KEYS: Final = frozenset({"role", "content"})
_CHOICE_KEYS: Final = frozenset({"index", "delta", "text", "finish_reason", "stop_reason"})


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
