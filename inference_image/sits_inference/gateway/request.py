"""What the gateway reads from an OpenAI request: the fields that route and label it.

The proxy forwards bodies byte for byte; it parses a request only for the fields that
route and label it (model, stream, user), with the shared checks (``openai.requests``).
The one rewrite: a streamed request that does not ask for usage gets
``stream_options.include_usage`` added upstream, and the usage-only chunk this adds is
removed again before the client sees it (``openai.usage.SseUsageFilter``), so streams are
measured in tokens without changing what the client receives.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from ..openai.metrics import estimated_prompt_tokens
from ..openai.requests import (
    STREAMABLE,
    Operation,
    asks_usage,
    check_model,
    check_stream,
    check_string,
    decode_object,
    with_usage,
)


@dataclass(frozen=True, slots=True)
class InferenceRequest:
    """The routing-relevant view of one request, plus the body to send upstream."""

    operation: Operation
    model: str
    stream: bool
    user: str | None
    body: bytes
    # The gateway asked upstream for a usage event the client did not ask for.
    strip_usage_event: bool = False

    @property
    def estimated_prompt_tokens(self) -> int:
        return estimated_prompt_tokens(self.body)


def parse_request(raw: bytes, operation: Operation, *, add_stream_usage: bool) -> InferenceRequest:
    """Validate what routing needs; raise ``ApiError`` (400) otherwise."""
    doc = decode_object(raw)
    # The gateway has always answered a missing model with code invalid_type (its clients
    # and tests rely on it); the sidecar uses OpenAI's missing_required_parameter.
    model = check_model(doc, missing="invalid_type")
    stream = check_stream(doc) and operation in STREAMABLE
    user = check_string(doc, "user")
    if stream and add_stream_usage and not asks_usage(doc):
        upstream = orjson.dumps(with_usage(doc))
        return InferenceRequest(operation, model, stream, user, upstream, strip_usage_event=True)
    return InferenceRequest(operation, model, stream, user, raw)
