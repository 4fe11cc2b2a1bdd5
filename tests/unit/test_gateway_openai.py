"""What the gateway reads from OpenAI bodies: request fields, usage, SSE streams."""

from __future__ import annotations

import json

import pytest

from sits_inference.gateway.request import parse_request
from sits_inference.openai.errors import ApiError, error_body, sse_error_event
from sits_inference.openai.metrics import token_bucket
from sits_inference.openai.requests import Operation
from sits_inference.openai.usage import SseUsageFilter, Usage, usage_from_body

CHAT, COMPLETION, EMBEDDINGS = Operation.CHAT, Operation.COMPLETION, Operation.EMBEDDINGS


def req(doc: object, operation: Operation = CHAT, *, add_usage: bool = True) -> bytes:
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("raw", "param", "status"),
    [
        (b"", None, 400),
        (b"{bad", None, 400),
        (b"\xff\xfe", None, 400),
        (b"[" * 100_000, None, 400),
        (b"null", None, 400),
        (b"[]", None, 400),
        (b'"text"', None, 400),
        (b"{}", "model", 400),
        (b'{"model": ""}', "model", 400),
        (b'{"model": 5}', "model", 400),
        (b'{"model": ["a"]}', "model", 400),
        (b'{"model": "m", "stream": "yes"}', "stream", 400),
        (b'{"model": "m", "stream": 1}', "stream", 400),
        (b'{"model": "m", "user": 42}', "user", 400),
    ],
)
def test_bad_requests_are_400_with_the_offending_param(
    raw: bytes, param: str | None, status: int
) -> None:
    with pytest.raises(ApiError) as caught:
        parse_request(raw, CHAT, add_stream_usage=True)
    assert caught.value.status == status
    assert caught.value.param == param
    body = json.loads(caught.value.body())
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"


def test_a_plain_request_is_forwarded_byte_for_byte() -> None:
    raw = b'{"model": "chat", "messages": [], "user": "alice"}'
    parsed = parse_request(raw, CHAT, add_stream_usage=True)
    assert (parsed.model, parsed.stream, parsed.user, parsed.body) == ("chat", False, "alice", raw)
    assert not parsed.strip_usage_event


def test_a_stream_without_usage_asks_upstream_for_it_and_hides_it_again() -> None:
    raw = json.dumps({"model": "m", "stream": True, "stream_options": {"x": 1}}).encode()
    parsed = parse_request(raw, COMPLETION, add_stream_usage=True)
    assert parsed.stream
    assert parsed.strip_usage_event
    sent = json.loads(parsed.body)
    assert sent["stream_options"] == {"x": 1, "include_usage": True}


@pytest.mark.parametrize(
    ("doc", "operation", "add_usage"),
    [
        ({"model": "m", "stream": True, "stream_options": {"include_usage": True}}, CHAT, True),
        ({"model": "m", "stream": True}, CHAT, False),
        ({"model": "m", "stream": True}, EMBEDDINGS, True),
        ({"model": "m", "stream": False}, CHAT, True),
    ],
)
def test_the_body_is_left_alone_otherwise(
    doc: dict[str, object], operation: Operation, add_usage: bool
) -> None:
    raw = json.dumps(doc).encode()
    parsed = parse_request(raw, operation, add_stream_usage=add_usage)
    assert parsed.body == raw
    assert not parsed.strip_usage_event


@pytest.mark.parametrize(
    ("tokens", "bucket"),
    [(0, "le128"), (128, "le128"), (129, "le512"), (512, "le512"), (2048, "le2k"), (2049, "gt2k")],
)
def test_token_buckets(tokens: int, bucket: str) -> None:
    assert token_bucket(tokens) == bucket


def test_usage_from_a_response() -> None:
    body = b'{"model":"chat","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}'
    assert usage_from_body(body) == Usage(7, 3, "chat")
    assert usage_from_body(b'{"model":"chat"}') == Usage(model="chat")
    assert usage_from_body(b'{"usage":{"prompt_tokens":true}}') == Usage(None, None, None)
    assert usage_from_body(b"not json") is None
    assert usage_from_body(b"[1]") is None


def test_usage_of_a_large_embedding_response_comes_from_its_tail() -> None:
    data = [{"object": "embedding", "index": i, "embedding": [0.125] * 512} for i in range(40)]
    body = json.dumps({"data": data, "model": "e", "usage": {"prompt_tokens": 99}}).encode()
    assert len(body) > 1 << 16
    assert usage_from_body(body) == Usage(99, None, None)
    assert usage_from_body(b"[" + b" " * (1 << 17) + b"]") is None


def event(doc: object) -> bytes:
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


CHUNK = event({"choices": [{"delta": {"content": "hi"}}], "model": "m"})
USAGE = event({"choices": [], "model": "m", "usage": {"prompt_tokens": 5, "completion_tokens": 2}})
DONE = b"data: [DONE]\n\n"


def run_filter(chunks: list[bytes], *, strip: bool) -> tuple[bytes, SseUsageFilter]:
    sse = SseUsageFilter(strip=strip)
    out = b"".join(sse.feed(c) for c in chunks) + sse.flush()
    return out, sse


def test_events_pass_through_and_the_usage_is_read() -> None:
    out, sse = run_filter([CHUNK, CHUNK, USAGE, DONE], strip=False)
    assert out == CHUNK + CHUNK + USAGE + DONE
    assert sse.usage == Usage(5, 2, "m")
    assert sse.events == 4


def test_the_usage_event_the_gateway_asked_for_is_removed() -> None:
    out, sse = run_filter([CHUNK, USAGE, DONE], strip=True)
    assert out == CHUNK + DONE
    assert sse.usage == Usage(5, 2, "m")


def test_events_split_across_network_chunks_are_reassembled() -> None:
    stream = CHUNK + USAGE + DONE
    pieces = [stream[i : i + 7] for i in range(0, len(stream), 7)]
    out, sse = run_filter(pieces, strip=True)
    assert out == CHUNK + DONE
    assert sse.usage == Usage(5, 2, "m")


def test_a_chunk_with_choices_and_usage_is_never_removed() -> None:
    both = event(
        {"choices": [{"delta": {}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    )
    out, sse = run_filter([both, DONE], strip=True)
    assert out == both + DONE
    assert sse.usage is not None


@pytest.mark.parametrize("odd", [b'data: {"usage": broken\n\n', b'data: {"usage": null}\n\n'])
def test_odd_usage_events_are_forwarded_untouched(odd: bytes) -> None:
    out, sse = run_filter([odd, DONE], strip=True)
    assert out == odd + DONE
    assert sse.usage is None


def test_a_stream_that_never_forms_events_is_not_held_forever() -> None:
    sse = SseUsageFilter(strip=True)
    assert sse.feed(b"x" * 1000) == b""
    assert len(sse.feed(b"y" * (1 << 16))) == 1000 + (1 << 16)
    assert sse.flush() == b""


def test_error_bodies_have_the_openai_shape() -> None:
    assert json.loads(error_body("m", "t")) == {
        "error": {"message": "m", "type": "t", "param": None, "code": None}
    }
    assert sse_error_event("boom", "upstream_error", 502).startswith(b'data: {"error"')
