"""The shared OpenAI layer's own promises: the metric contract's optional `source` label,
one SSE reader for both framings, the include_usage rewrite, the 503's Retry-After."""

from __future__ import annotations

import json
import random

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from sits_inference.openai.errors import ApiError, ErrorType
from sits_inference.openai.metrics import (
    RequestMetrics,
    RequestRecord,
    Source,
    prometheus_meter_provider,
)
from sits_inference.openai.replies import error_reply
from sits_inference.openai.requests import asks_usage, with_usage
from sits_inference.openai.sse import SseSplitter, event_json, is_usage_only
from sits_inference.openai.usage import SseUsageFilter, Usage


def exposition(source: Source | None) -> str:
    registry = CollectorRegistry()
    provider, _ = prometheus_meter_provider("test", registry)
    try:
        metrics = RequestMetrics(provider.get_meter("test"), source=source)
        record = RequestRecord("v1", "chat", "m", 200, 0.05, 10, ttft_s=0.01)
        assert metrics.record(record, "ns", "chat")
        return generate_latest(registry).decode()
    finally:
        provider.shutdown()


@pytest.mark.parametrize("source", list(Source))
def test_every_series_of_a_source_carries_it(source: Source) -> None:
    text = exposition(source)
    samples = [line for line in text.splitlines() if line.startswith("sits_")]
    assert samples
    assert all(f'source="{source}"' in line for line in samples), text


def test_the_source_label_appears_only_when_set() -> None:
    assert 'source="sidecar"' in exposition(Source.SIDECAR)
    plain = exposition(None)
    assert "source=" not in plain
    assert 'sits_requests_total{code="200",namespace="ns",operation="chat"' in plain


def test_a_client_that_left_is_counted_but_is_no_latency_sample() -> None:
    registry = CollectorRegistry()
    provider, _ = prometheus_meter_provider("test", registry)
    metrics = RequestMetrics(provider.get_meter("test"))
    assert not metrics.record(RequestRecord("v1", "chat", "m", 499, 0.05, 10), "ns", "chat")
    text = generate_latest(registry).decode()
    provider.shutdown()
    assert 'code="499"' in text
    assert "sits_request_duration_seconds_count" not in text


def test_one_splitter_reads_lf_and_crlf_events() -> None:
    splitter = SseSplitter()
    events = splitter.feed(b'data: {"a": 1}\r\n\r\ndata: {"b": 2}\n\ndata: {"c"')
    assert [event_json(e) for e in events] == [{"a": 1}, {"b": 2}]
    assert splitter.flush() == b'data: {"c"'


@pytest.mark.parametrize("seed", range(20))
def test_events_do_not_depend_on_where_the_network_cut_the_stream(seed: int) -> None:
    rng = random.Random(seed)
    stream = bytes(rng.choice(b"ab\n\r") for _ in range(400))
    whole = SseSplitter()
    expected = whole.feed(stream), whole.flush()
    pieces, splitter = [], SseSplitter()
    position = 0
    while position < len(stream):
        step = rng.randint(0, 6)
        pieces += splitter.feed(stream[position : position + step])
        position += step
    assert (pieces, splitter.flush()) == expected


def test_multi_line_data_is_joined_before_parsing() -> None:
    assert event_json(b'data: {"a":\ndata: 1}\n\n') == {"a": 1}
    assert event_json(b": keep-alive\n\n") is None
    assert event_json(b"data: [DONE]\n\n") is None


def test_the_usage_filter_drops_the_added_usage_chunk_in_crlf_streams_too() -> None:
    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}\r\n\r\n'
    chunk = b'data: {"choices": [{"delta": {}}]}\r\n\r\n'
    sse = SseUsageFilter(strip=True)
    out = sse.feed(chunk + usage) + sse.flush()
    assert out == chunk
    assert sse.usage == Usage(3, 1, None)


def test_include_usage_is_added_without_losing_other_stream_options() -> None:
    doc = {"model": "m", "stream": True, "stream_options": {"x": 1}}
    rewritten = with_usage(doc)
    assert rewritten["stream_options"] == {"x": 1, "include_usage": True}
    assert asks_usage(rewritten)
    assert not asks_usage(doc)
    assert is_usage_only({"choices": [], "usage": {"prompt_tokens": 1}})
    assert not is_usage_only({"choices": [{}], "usage": {"prompt_tokens": 1}})


def test_retry_after_is_sent_only_on_a_503_that_asks_for_it() -> None:
    unavailable = ApiError(503, "later", type=ErrorType.UNAVAILABLE)
    assert error_reply(unavailable, retry_after_s=1).headers["Retry-After"] == "1"
    assert "Retry-After" not in error_reply(unavailable).headers
    bad = error_reply(ApiError(400, "no"), {"x-sits-variant": "v1"}, retry_after_s=1)
    assert "Retry-After" not in bad.headers
    assert bad.headers["x-sits-variant"] == "v1"
    assert json.loads(bad.body)["error"]["type"] == "invalid_request_error"  # type: ignore[arg-type]
