"""Admission: is a request safe to answer from the cache, and with which partition key?

Cheap and pure (no embedding): the sidecar calls it on the event loop for every request.

The partition key is deny-by-default: every request field goes into it except the few
known not to change the answer (`IRRELEVANT`). A new sampling parameter that vLLM adds
tomorrow therefore splits the cache instead of being silently shared.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from sits_inference.cache.semantic.config import SemanticConfig
from sits_inference.cache.semantic.normalise import (
    MAX_SEMANTIC_CHARS,
    Extracted,
    SkipReason,
    UncacheableError,
    exact_key,
    extract_chat,
    extract_completion,
)

# Fields that change how the answer is delivered or accounted, never what it says.
IRRELEVANT: Final = frozenset(
    {
        "stream",  # the sidecar replays a hit as SSE when asked
        "stream_options",
        "user",
        "metadata",
        "store",
        "service_tier",
        "request_id",
        "priority",  # vLLM's scheduling priority
        "model",  # CacheRequest.model (the name the client asked for) is used instead
        "messages",  # handled by normalise.extract_chat
        "prompt",  # handled by normalise.extract_completion
    }
)
# Token-level probabilities are measurements of this exact prompt and this exact
# generation: a paraphrase's cached logprobs (and prompt_logprobs) would be wrong numbers,
# and clients that ask for them are usually scoring or evaluating, where a replay
# silently falsifies the result.
LOGPROB_FIELDS: Final = ("logprobs", "top_logprobs", "prompt_logprobs")


@dataclass(frozen=True, slots=True)
class CacheRequest:
    """One parsed OpenAI request as the sidecar sees it."""

    kind: Literal["chat", "completion"]
    body: Mapping[str, Any]
    model: str
    revision: str
    adapter_digest: str | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """The verdict of `admit`: cacheable or why not, and the keys to look up with.

    partition: hash of everything that must match exactly.
    text: the normalised question that is embedded (case kept, for the guard).
    exact: the key of the exact-match map (casefolded text).
    semantic: False when the text is too long for the embedder's window: exact match only.
    """

    cacheable: bool
    reason: SkipReason | None
    partition: str = ""
    text: str = ""
    exact: str = ""
    semantic: bool = False
    model: str = ""
    revision: str = ""
    adapter_digest: str | None = None


def admit(config: SemanticConfig, request: CacheRequest) -> Admission:
    """Decide cacheability; the first reason found wins (listed in the README)."""
    try:
        if not config.enabled:
            raise UncacheableError(SkipReason.DISABLED)
        body = request.body
        if not isinstance(body, Mapping):
            raise UncacheableError(SkipReason.MALFORMED)
        _check_sampling(config, body)
        extracted = extract_chat(body) if request.kind == "chat" else extract_completion(body)
    except UncacheableError as refused:
        return Admission(cacheable=False, reason=refused.reason)
    return Admission(
        cacheable=True,
        reason=None,
        partition=partition_key(request, extracted),
        text=extracted.text,
        exact=exact_key(extracted.text),
        semantic=len(extracted.text) <= MAX_SEMANTIC_CHARS,
        model=request.model,
        revision=request.revision,
        adapter_digest=request.adapter_digest,
    )


def _check_sampling(config: SemanticConfig, body: Mapping[str, Any]) -> None:
    n = body.get("n", 1)
    if n is not None and n != 1:
        # n choices are meant to be n different draws (or are compared against each other);
        # replaying one stored set makes every later "sample" the same sample.
        raise UncacheableError(SkipReason.MULTIPLE_CHOICES)
    for field in LOGPROB_FIELDS:
        value = body.get(field)
        if value not in (None, False, 0):
            raise UncacheableError(SkipReason.LOGPROBS)
    if body.get("echo"):
        # The answer repeats the prompt: a paraphrase would get someone else's prompt back.
        raise UncacheableError(SkipReason.ECHO)
    if not config.cache_non_deterministic and not is_deterministic(body):
        raise UncacheableError(SkipReason.NON_DETERMINISTIC)


def is_deterministic(body: Mapping[str, Any]) -> bool:
    """Greedy decoding (temperature 0 or top_k 1) or a fixed seed.

    A missing temperature is not 0: vLLM's default is 1 (or the model's generation config).
    """
    temperature = body.get("temperature")
    seed = body.get("seed")
    greedy = _number(temperature) == 0 or _number(body.get("top_k")) == 1
    seeded = isinstance(seed, int) and not isinstance(seed, bool)
    return greedy or seeded


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def partition_key(request: CacheRequest, extracted: Extracted) -> str:
    """Hash of what must match byte for byte: who answers, with which settings, to what."""
    params = {k: v for k, v in request.body.items() if k not in IRRELEVANT}
    document = {
        "kind": request.kind,
        "model": request.model,
        "revision": request.revision,
        "adapter": request.adapter_digest,
        "params": params,
        "context": extracted.context,
    }
    encoded = json.dumps(_canonical(document), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode()).hexdigest()[:32]


def _canonical(value: Any) -> Any:
    """JSON-ready value where 0 and 0.0 (and 1 and 1.0) are the same number."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return repr(value)
