"""What of a request is embedded and what must match exactly.

Why split a chat this way: the question the user just asked is the only part worth
matching by meaning. The system prompt and the earlier turns (including tool calls and
their results) change the answer just as much, but they are machine-made or already
fixed by the conversation, so they go into the partition key byte for byte (see
`partition.py`). Only the last user message is embedded.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

# all-MiniLM-L6-v2 reads 256 word pieces and silently drops the rest. Two long prompts that
# differ only after that point would embed the same, so past this many characters (about
# 200 word pieces of English) a request is matched exactly or not at all.
MAX_SEMANTIC_CHARS: Final = 1000

_SPACE = re.compile(r"\s+")
_TRAILING = re.compile("[\\s?!.\u3002\uff1f\uff01]+$")


class SkipReason(enum.StrEnum):
    """Why a request is not cached: the ``x-sits-cache-reason`` header and the ``reason``
    label of ``sits_cache_skipped_total`` (the first reason found wins)."""

    DISABLED = "disabled"
    MALFORMED = "malformed"
    MULTIPLE_CHOICES = "n>1"
    LOGPROBS = "logprobs"
    ECHO = "echo"
    NON_DETERMINISTIC = "non-deterministic"
    NON_TEXT_CONTENT = "non-text-content"
    EMPTY_PROMPT = "empty-prompt"
    LAST_MESSAGE_NOT_USER = "last-message-not-user"
    TOKEN_PROMPT = "token-prompt"
    BATCH_PROMPT = "batch-prompt"
    ADMIT_ERROR = "admit-error"  # the sidecar's: L1 itself failed on the request


class UncacheableError(Exception):
    """The request is valid for vLLM (or vLLM will say it is not) but unsafe to cache."""

    def __init__(self, reason: SkipReason) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Extracted:
    """The text to match by meaning, and the rest of the prompt that must match exactly."""

    text: str
    context: Any


def normalise_text(text: str) -> str:
    """NFKC (full-width forms, ligatures) and single spaces; case and punctuation kept.

    Case is kept because the near-miss guard reads capitalised names; the embedder is
    uncased anyway.
    """
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def exact_key(text: str) -> str:
    """Key of the exact-match map: casefolded, trailing punctuation dropped."""
    return _TRAILING.sub("", text.casefold())


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        texts: list[str] = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                raise UncacheableError(SkipReason.NON_TEXT_CONTENT)
            value = part.get("text")
            if not isinstance(value, str):
                raise UncacheableError(SkipReason.MALFORMED)
            texts.append(value)
        return "\n".join(texts)
    if content is None:
        raise UncacheableError(SkipReason.EMPTY_PROMPT)
    raise UncacheableError(SkipReason.MALFORMED)


def extract_chat(body: Mapping[str, Any]) -> Extracted:
    """Last user message to embed; everything before it (and its other fields) as context."""
    messages = body.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)) or not messages:
        raise UncacheableError(SkipReason.MALFORMED)
    if not all(isinstance(m, Mapping) for m in messages):
        raise UncacheableError(SkipReason.MALFORMED)
    last = messages[-1]
    if last.get("role") != "user":
        # An assistant prefix to continue, or a tool result to react to: the "question" is
        # not a user's wording, and nothing paraphrases it.
        raise UncacheableError(SkipReason.LAST_MESSAGE_NOT_USER)
    text = normalise_text(_content_text(last.get("content")))
    if not text:
        raise UncacheableError(SkipReason.EMPTY_PROMPT)
    extra = {k: v for k, v in last.items() if k != "content"}
    return Extracted(text=text, context={"history": list(messages[:-1]), "last": extra})


def extract_completion(body: Mapping[str, Any]) -> Extracted:
    """The prompt of a completion request: one string, or a list holding one string."""
    prompt = body.get("prompt")
    if isinstance(prompt, Sequence) and not isinstance(prompt, str):
        if prompt and all(isinstance(t, int) for t in prompt):
            raise UncacheableError(SkipReason.TOKEN_PROMPT)  # token ids: nothing to embed
        if len(prompt) != 1:
            raise UncacheableError(
                SkipReason.BATCH_PROMPT if len(prompt) > 1 else SkipReason.EMPTY_PROMPT
            )
        prompt = prompt[0]
    if isinstance(prompt, int) or (isinstance(prompt, Sequence) and not isinstance(prompt, str)):
        raise UncacheableError(SkipReason.TOKEN_PROMPT)
    if not isinstance(prompt, str):
        raise UncacheableError(SkipReason.MALFORMED)
    text = normalise_text(prompt)
    if not text:
        raise UncacheableError(SkipReason.EMPTY_PROMPT)
    # A raw prompt's trailing whitespace steers the continuation ("A:" vs "A: " vs "A:\n")
    # while meaning nothing to the embedder, so it must match exactly.
    return Extracted(text=text, context={"trailing": prompt[len(prompt.rstrip()) :]})
