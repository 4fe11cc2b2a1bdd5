"""The canonical cached answer: what is storable, how a hit is served, and that a replayed
stream assembles back into the answer it came from."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from sits_inference.cache.assembler import StreamAssembler
from sits_inference.cache.completions import (
    CachedChoice,
    CachedCompletion,
    Kind,
    from_response,
    response_document,
    stream_events,
)
from sits_inference.openai.sse import DONE_EVENT, SseSplitter, event_data, parse_event_json

USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


def vllm_chat(content: str = "Hello there, friend.", **choice: Any) -> dict[str, Any]:
    """A non-streamed chat answer shaped like vLLM 0.32's."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": [],
        "reasoning_content": None,
    }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "length",
                "stop_reason": None,
                **choice,
            }
        ],
        "usage": {**USAGE, "prompt_tokens_details": None},
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }


def vllm_completion(text: str = " once upon a time") -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "tiny",
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": "stop",
                "stop_reason": "\n",
                "prompt_logprobs": None,
            }
        ],
        "usage": USAGE,
    }


def test_a_chat_answer_round_trips_through_the_payload() -> None:
    cached = from_response("chat", vllm_chat())
    assert cached == CachedCompletion(
        "chat", (CachedChoice(0, "Hello there, friend.", "length", None),), USAGE
    )
    assert CachedCompletion.from_payload(cached.to_payload()) == cached


def test_a_completion_keeps_vllms_stop_reason() -> None:
    cached = from_response("completion", vllm_completion())
    assert cached is not None
    assert cached.choices == (CachedChoice(0, " once upon a time", "stop", "\n"),)
    assert CachedCompletion.from_payload(cached.to_payload()) == cached


def _with_message(**fields: Any) -> dict[str, Any]:
    doc = vllm_chat()
    doc["choices"][0]["message"].update(fields)
    return doc


@pytest.mark.parametrize(
    ("kind", "doc"),
    [
        pytest.param("chat", vllm_chat(logprobs={"content": []}), id="logprobs"),
        pytest.param("chat", vllm_chat(finish_reason=None), id="unfinished"),
        pytest.param("chat", _with_message(tool_calls=[{"id": "t"}]), id="tool-calls"),
        pytest.param("chat", _with_message(reasoning_content="hmm"), id="reasoning"),
        pytest.param("chat", _with_message(content=None), id="no-content"),
        pytest.param("chat", _with_message(role="user"), id="not-assistant"),
        pytest.param("chat", {**vllm_chat(), "choices": []}, id="no-choices"),
        pytest.param("chat", {**vllm_chat(), "prompt_logprobs": [None]}, id="prompt-logprobs"),
        pytest.param("chat", vllm_completion(), id="wrong-object"),
        pytest.param("completion", vllm_chat(), id="chat-as-completion"),
        pytest.param("chat", {"error": {"message": "x"}}, id="error-body"),
        pytest.param("chat", ["not", "a", "dict"], id="not-an-object"),
    ],
)
def test_answers_the_cache_cannot_replay_exactly_are_not_stored(kind: Kind, doc: Any) -> None:
    assert from_response(kind, doc) is None


@pytest.mark.parametrize(
    "payload", [b"{}", b"not json", b'{"v": 99, "kind": "chat"}', b'{"v": 1, "kind": "image"}']
)
def test_unreadable_payloads_raise_value_error(payload: bytes) -> None:
    with pytest.raises(ValueError, match=r"cached"):
        CachedCompletion.from_payload(payload)


def test_a_non_streamed_hit_is_a_valid_openai_response_with_fresh_identity() -> None:
    cached = from_response("chat", vllm_chat())
    assert cached is not None
    first = response_document(cached, model="support-bot")
    second = response_document(cached, model="support-bot")
    parsed = ChatCompletion.model_validate(first)
    assert parsed.choices[0].message.content == "Hello there, friend."
    assert parsed.choices[0].finish_reason == "length"
    assert parsed.model == "support-bot"
    assert parsed.usage is not None
    assert parsed.usage.total_tokens == 17
    assert first["id"] != second["id"]
    assert first["id"].startswith("chatcmpl-")
    completion = from_response("completion", vllm_completion())
    assert completion is not None
    text = Completion.model_validate(response_document(completion, model="tiny"))
    assert text.choices[0].text == " once upon a time"


def _chunks(events: list[bytes]) -> list[dict[str, Any]]:
    assert events[-1] == DONE_EVENT
    return [orjson.loads(e.removeprefix(b"data: ")) for e in events[:-1]]


@pytest.mark.parametrize("include_usage", [False, True])
def test_a_replayed_chat_stream_is_what_openai_sends(include_usage: bool) -> None:
    text = "A longer answer, so that the replay needs several content chunks to carry it."
    cached = CachedCompletion("chat", (CachedChoice(0, text, "stop"),), USAGE)
    chunks = _chunks(stream_events(cached, model="tiny", include_usage=include_usage))
    parsed = [ChatCompletionChunk.model_validate(c) for c in chunks]
    assert len({c.id for c in parsed}) == 1
    with_choices = [c for c in parsed if c.choices]
    assert with_choices[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in with_choices) == text
    assert len(with_choices) > 3, "content comes in several chunks"
    assert [c.choices[0].finish_reason for c in with_choices][-1] == "stop"
    assert all(c.choices[0].finish_reason is None for c in with_choices[:-1])
    usage = [c.usage for c in parsed if c.usage is not None]
    assert usage == ([parsed[-1].usage] if include_usage else [])
    if include_usage:
        assert parsed[-1].choices == []
        assert parsed[-1].usage is not None
        assert parsed[-1].usage.completion_tokens == 5


def test_an_empty_answer_still_streams_role_and_finish() -> None:
    cached = CachedCompletion("chat", (CachedChoice(0, "", "length"),), None)
    chunks = _chunks(stream_events(cached, model="tiny", include_usage=True))
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, "length"]


def _assemble(kind: Kind, stream: bytes, rng: random.Random) -> CachedCompletion | None:
    """Feed ``stream`` through splitter and assembler in random-sized pieces."""
    splitter, assembler = SseSplitter(), StreamAssembler(kind)
    pos = 0
    while pos < len(stream):
        step = rng.randint(1, 40)
        for event in splitter.feed(stream[pos : pos + step]):
            data = event_data(event)
            if data == "[DONE]":
                assembler.feed_done()
            elif data is not None:
                doc = parse_event_json(data)
                assert doc is not None
                assembler.feed(doc)
        pos += step
    assert splitter.flush() == b""
    return assembler.result()


@pytest.mark.parametrize("kind", ["chat", "completion"])
@pytest.mark.parametrize("seed", range(5))
def test_replay_then_assembly_gives_back_the_same_answer(kind: Kind, seed: int) -> None:
    rng = random.Random(seed)
    alphabet = 'abc xyz\u00e9\u4e2d\U0001f600\n"\\'
    choices = tuple(
        CachedChoice(
            i,
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120))),
            rng.choice(["stop", "length"]),
            rng.choice([None, 2, "\n"]),
        )
        for i in range(rng.randint(1, 3))
    )
    cached = CachedCompletion(kind, choices, USAGE, rng.choice([None, "fp_1"]))
    stream = b"".join(stream_events(cached, model="m", include_usage=True, piece_chars=7))
    if seed % 2:
        stream = stream.replace(b"\n\n", b"\r\n\r\n")
    assert _assemble(kind, stream, rng) == cached


def _stream(*docs: dict[str, Any] | str) -> bytes:
    return b"".join(
        b"data: " + (d.encode() if isinstance(d, str) else orjson.dumps(d)) + b"\n\n" for d in docs
    )


ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
TEXT = {"choices": [{"index": 0, "delta": {"content": "hi"}, "logprobs": None}]}
FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    ("stream", "stored"),
    [
        pytest.param(_stream(ROLE, TEXT, FINISH, "[DONE]"), True, id="complete"),
        pytest.param(_stream(ROLE, TEXT, FINISH), False, id="no-done"),
        pytest.param(_stream(ROLE, TEXT, "[DONE]"), False, id="unfinished-choice"),
        pytest.param(
            _stream(ROLE, TEXT, {"error": {"message": "boom"}}, "[DONE]"), False, id="error-event"
        ),
        pytest.param(
            _stream(
                ROLE, {"choices": [{"index": 0, "delta": {"tool_calls": [{}]}}]}, FINISH, "[DONE]"
            ),
            False,
            id="tool-call-delta",
        ),
        pytest.param(
            _stream(
                ROLE,
                {"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"content": []}}]},
                FINISH,
                "[DONE]",
            ),
            False,
            id="logprobs",
        ),
        pytest.param(_stream("[DONE]"), False, id="nothing"),
        pytest.param(_stream(ROLE, TEXT, FINISH, "[DONE]", TEXT), False, id="data-after-done"),
    ],
)
def test_only_complete_clean_streams_assemble(stream: bytes, stored: bool) -> None:
    result = _assemble("chat", stream, random.Random(1))
    assert (result is not None) is stored
    if stored:
        assert result is not None
        assert result.choices == (CachedChoice(0, "hi", "stop"),)


def test_unparseable_event_data_is_reported() -> None:
    splitter = SseSplitter()
    events = splitter.feed(b": keep-alive\n\ndata: {broken\n\n")
    assert [event_data(e) for e in events] == [None, "{broken"]
    assert parse_event_json("{broken") is None


def test_a_stream_without_event_boundaries_loses_framing_rather_than_growing() -> None:
    splitter = SseSplitter()
    out = splitter.feed(b"x" * ((1 << 20) + 1))
    assert splitter.framing_lost
    assert len(out) == 1
