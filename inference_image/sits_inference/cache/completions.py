"""The canonical cached response, and the two ways a hit is served from it.

Why a canonical form instead of the bytes vLLM sent: one entry must answer both a
streamed and a non-streamed request (the stream flag changes the transport, not the
answer), and a cached answer must go out with a fresh ``id`` and ``created`` and the model
name this client asked for. So an entry keeps only what the answer is: per choice the
text, finish reason and vLLM's ``stop_reason``, plus the original ``usage`` (a hit reports
the tokens the answer cost when it was generated; nothing was generated now) and
``system_fingerprint``.

What is not cached, on purpose: answers carrying log-probabilities, tool calls, reasoning
or any other non-empty field this module does not know how to replay. Serving them from
the text alone would silently drop part of the answer; refusing to store them is exact.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from ..openai.sse import DONE_EVENT, data_event

Kind = Literal["chat", "completion"]
FORMAT_VERSION: Final = 1
# Characters per replayed content chunk: small enough to look like a stream to clients
# that render progressively, large enough that a long answer is a few dozen events.
REPLAY_PIECE_CHARS: Final = 32

_CHOICE_KEYS: Final = frozenset({"index", "finish_reason", "stop_reason"})
_CHAT_MESSAGE_KEYS: Final = frozenset({"role", "content"})
_OBJECT = {"chat": "chat.completion", "completion": "text_completion"}
_CHUNK_OBJECT = {"chat": "chat.completion.chunk", "completion": "text_completion"}
_ID_PREFIX = {"chat": "chatcmpl-", "completion": "cmpl-"}


def is_empty(value: object) -> bool:
    """None, "", [] and {} carry no answer; anything else does."""
    return value is None or value == "" or value == [] or value == {}


@dataclass(frozen=True, slots=True)
class CachedChoice:
    index: int
    text: str
    finish_reason: str
    stop_reason: str | int | None = None


@dataclass(frozen=True, slots=True)
class CachedCompletion:
    """One complete answer, independent of how it was (or will be) transported."""

    kind: Kind
    choices: tuple[CachedChoice, ...]
    usage: Mapping[str, int] | None = None
    system_fingerprint: str | None = None

    def to_payload(self) -> bytes:
        """The bytes handed to L1 (opaque to it) and read back on a hit."""
        return orjson.dumps(
            {
                "v": FORMAT_VERSION,
                "kind": self.kind,
                "choices": [
                    [c.index, c.text, c.finish_reason, c.stop_reason] for c in self.choices
                ],
                "usage": dict(self.usage) if self.usage is not None else None,
                "system_fingerprint": self.system_fingerprint,
            }
        )

    @classmethod
    def from_payload(cls, payload: bytes) -> CachedCompletion:
        """Raises ValueError on anything this version did not write."""
        try:
            doc = orjson.loads(payload)
            if doc["v"] != FORMAT_VERSION or doc["kind"] not in _OBJECT:
                raise ValueError(f"unsupported cached format {doc.get('v')!r}")
            choices = tuple(
                CachedChoice(int(i), str(t), str(f), s) for i, t, f, s in doc["choices"]
            )
            return cls(doc["kind"], choices, doc["usage"], doc["system_fingerprint"])
        except (orjson.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"not a cached completion: {err}") from None


def _usage(value: object) -> dict[str, int] | None:
    if not isinstance(value, dict):
        return None
    counts = {k: v for k, v in value.items() if type(v) is int}
    return counts or None


def _choice_from_response(kind: Kind, choice: object) -> CachedChoice | None:
    if not isinstance(choice, dict):
        return None
    index, finish = choice.get("index"), choice.get("finish_reason")
    if type(index) is not int or not isinstance(finish, str) or not finish:
        return None
    if kind == "chat":
        message = choice.get("message")
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return None
        text = message.get("content")
        if any(not is_empty(v) for k, v in message.items() if k not in _CHAT_MESSAGE_KEYS):
            return None
        known = _CHOICE_KEYS | {"message"}
    else:
        text = choice.get("text")
        known = _CHOICE_KEYS | {"text"}
    if not isinstance(text, str):
        return None
    if any(not is_empty(v) for k, v in choice.items() if k not in known):
        return None
    stop = choice.get("stop_reason")
    return CachedChoice(index, text, finish, stop if isinstance(stop, str | int) else None)


def from_response(kind: Kind, doc: object) -> CachedCompletion | None:
    """The canonical form of a complete, non-streamed response; None if not storable."""
    if not isinstance(doc, dict) or doc.get("object") != _OBJECT[kind]:
        return None
    raw_choices = doc.get("choices")
    if not isinstance(raw_choices, list) or not raw_choices:
        return None
    if not is_empty(doc.get("prompt_logprobs")):
        return None
    choices = [_choice_from_response(kind, c) for c in raw_choices]
    if any(c is None for c in choices):
        return None
    ordered = tuple(sorted((c for c in choices if c is not None), key=lambda c: c.index))
    fingerprint = doc.get("system_fingerprint")
    return CachedCompletion(
        kind,
        ordered,
        _usage(doc.get("usage")),
        fingerprint if isinstance(fingerprint, str) else None,
    )


# -- serving a hit --------------------------------------------------------------------------


def new_response_id(kind: Kind) -> str:
    return _ID_PREFIX[kind] + uuid.uuid4().hex


def response_document(
    cached: CachedCompletion,
    *,
    model: str,
    response_id: str | None = None,
    created: int | None = None,
) -> dict[str, Any]:
    """The non-streamed OpenAI response for a hit."""
    choices: list[dict[str, Any]] = []
    for c in cached.choices:
        if cached.kind == "chat":
            body: dict[str, Any] = {"message": {"role": "assistant", "content": c.text}}
        else:
            body = {"text": c.text}
        choices.append(
            {
                "index": c.index,
                **body,
                "logprobs": None,
                "finish_reason": c.finish_reason,
                "stop_reason": c.stop_reason,
            }
        )
    doc: dict[str, Any] = {
        "id": response_id or new_response_id(cached.kind),
        "object": _OBJECT[cached.kind],
        "created": created if created is not None else int(time.time()),
        "model": model,
        "choices": choices,
        "usage": dict(cached.usage) if cached.usage is not None else None,
    }
    if cached.system_fingerprint is not None:
        doc["system_fingerprint"] = cached.system_fingerprint
    return doc


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _chunk_choices(kind: Kind, choice: CachedChoice, piece_chars: int) -> Iterator[dict[str, Any]]:
    """The per-choice deltas of a stream, in the order vLLM and OpenAI send them."""
    i = choice.index
    if kind == "chat":
        yield {
            "index": i,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
        }
        for piece in _pieces(choice.text, piece_chars):
            yield {"index": i, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}
        yield {
            "index": i,
            "delta": {},
            "logprobs": None,
            "finish_reason": choice.finish_reason,
            "stop_reason": choice.stop_reason,
        }
        return
    for piece in _pieces(choice.text, piece_chars):
        yield {"index": i, "text": piece, "logprobs": None, "finish_reason": None}
    yield {
        "index": i,
        "text": "",
        "logprobs": None,
        "finish_reason": choice.finish_reason,
        "stop_reason": choice.stop_reason,
    }


def stream_events(
    cached: CachedCompletion,
    *,
    model: str,
    include_usage: bool,
    response_id: str | None = None,
    created: int | None = None,
    piece_chars: int = REPLAY_PIECE_CHARS,
) -> list[bytes]:
    """A hit replayed as server-sent events: role, content pieces, finish, usage, [DONE]."""
    head = {
        "id": response_id or new_response_id(cached.kind),
        "object": _CHUNK_OBJECT[cached.kind],
        "created": created if created is not None else int(time.time()),
        "model": model,
    }
    if cached.system_fingerprint is not None:
        head["system_fingerprint"] = cached.system_fingerprint
    events = [
        data_event({**head, "choices": [delta]})
        for choice in cached.choices
        for delta in _chunk_choices(cached.kind, choice, piece_chars)
    ]
    if include_usage and cached.usage is not None:
        events.append(data_event({**head, "choices": [], "usage": dict(cached.usage)}))
    events.append(DONE_EVENT)
    return events
