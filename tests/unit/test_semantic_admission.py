"""L1 admission: what is embedded, what must match exactly, and what is never cached."""

from __future__ import annotations

from typing import Any

import pytest

from sits_inference.cache.semantic import Admission, CacheRequest, SemanticConfig
from sits_inference.cache.semantic.normalise import MAX_SEMANTIC_CHARS, exact_key, normalise_text
from sits_inference.cache.semantic.request import admit

CONFIG = SemanticConfig()


def chat(content: Any = "What is the capital of France?", **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": content}], "temperature": 0}
    body.update(params)
    return body


def admitted(body: dict[str, Any], **request: Any) -> Admission:
    fields: dict[str, Any] = {"kind": "chat", "model": "m", "revision": "r1"}
    fields.update(request)
    return admit(CONFIG, CacheRequest(body=body, **fields))


@pytest.mark.parametrize(
    ("raw", "normalised", "key"),
    [
        ("  What   is\tthe\ncapital?  ", "What is the capital?", "what is the capital"),
        ("\uff26\uff35\uff2c\uff2c width", "FULL width", "full width"),  # NFKC
        ("\ufb01ne ligature", "fine ligature", "fine ligature"),
        ("Case Kept!!!", "Case Kept!!!", "case kept"),
        ("Is it 3.5?", "Is it 3.5?", "is it 3.5"),  # inner punctuation stays
    ],
)
def test_normalisation(raw: str, normalised: str, key: str) -> None:
    assert normalise_text(raw) == normalised
    assert exact_key(normalised) == key


def test_chat_embeds_only_the_last_user_message() -> None:
    body = chat()
    body["messages"].insert(0, {"role": "system", "content": "Be brief."})
    a = admitted(body)
    assert a.cacheable
    assert a.text == "What is the capital of France?"
    assert a.exact == "what is the capital of france"


def test_text_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "Hello"}, {"type": "text", "text": "world"}]
    assert admitted(chat(parts)).text == "Hello\nworld".replace("\n", " ")


BASE = admitted(chat()).partition


@pytest.mark.parametrize(
    ("change", "request_change"),
    [
        ({"temperature": 0.0001}, {}),
        ({"top_p": 0.9}, {}),
        ({"top_k": 5}, {}),
        ({"max_tokens": 16}, {}),
        ({"max_completion_tokens": 16}, {}),
        ({"stop": ["\n"]}, {}),
        ({"seed": 7}, {}),
        ({"presence_penalty": 0.5}, {}),
        ({"frequency_penalty": 0.5}, {}),
        ({"repetition_penalty": 1.1}, {}),  # a vLLM extension: unknown fields split too
        ({"logit_bias": {"42": -100}}, {}),
        ({"response_format": {"type": "json_object"}}, {}),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, {}),
        ({"tool_choice": "none"}, {}),
        ({}, {"model": "adapter-a"}),
        ({}, {"revision": "r2"}),
        ({}, {"adapter_digest": "sha256:abc"}),
        ({}, {"kind": "completion"}),
    ],
)
def test_everything_that_changes_the_answer_splits_the_partition(
    change: dict[str, Any], request_change: dict[str, Any]
) -> None:
    body = chat(**change)
    if request_change.get("kind") == "completion":
        body = {"prompt": "What is the capital of France?", "temperature": 0}
    assert admitted(body, **request_change).partition != BASE


@pytest.mark.parametrize(
    "change",
    [
        {"stream": True},
        {"stream_options": {"include_usage": True}},
        {"user": "alice"},
        {"metadata": {"trace": "x"}},
        {"model": "some-other-name-in-the-body"},
        {"temperature": 0.0},  # 0 and 0.0 are the same number
    ],
)
def test_delivery_and_accounting_fields_do_not_split(change: dict[str, Any]) -> None:
    assert admitted(chat(**change)).partition == BASE


def test_system_prompt_and_history_split_but_the_question_is_not_in_the_key() -> None:
    with_system = chat()
    with_system["messages"].insert(0, {"role": "system", "content": "Answer in French."})
    history = chat()
    history["messages"][:0] = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ]
    assert admitted(with_system).partition != BASE
    assert admitted(history).partition != BASE
    assert admitted(chat("Which city is France's capital?")).partition == BASE


def test_completion_trailing_whitespace_splits() -> None:
    a = admitted({"prompt": "Q: capital of France?\nA:", "temperature": 0}, kind="completion")
    b = admitted({"prompt": "Q: capital of France?\nA: ", "temperature": 0}, kind="completion")
    assert a.cacheable
    assert b.cacheable
    assert a.partition != b.partition


@pytest.mark.parametrize(
    ("body", "kind", "config", "reason"),
    [
        (chat(), "chat", SemanticConfig(enabled=False), "disabled"),
        (chat(n=2), "chat", CONFIG, "n>1"),
        (chat(logprobs=True), "chat", CONFIG, "logprobs"),
        (chat(top_logprobs=3), "chat", CONFIG, "logprobs"),
        (chat(prompt_logprobs=1), "chat", CONFIG, "logprobs"),
        (chat(echo=True), "chat", CONFIG, "echo"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "chat", CONFIG, "non-deterministic"),
        (chat(temperature=0.7), "chat", CONFIG, "non-deterministic"),
        (
            chat([{"type": "image_url", "image_url": {"url": "x"}}]),
            "chat",
            CONFIG,
            "non-text-content",
        ),
        (
            {"messages": [{"role": "assistant", "content": "x"}], "temperature": 0},
            "chat",
            CONFIG,
            "last-message-not-user",
        ),
        (chat("   "), "chat", CONFIG, "empty-prompt"),
        ({"messages": "hi", "temperature": 0}, "chat", CONFIG, "malformed"),
        ({"messages": [], "temperature": 0}, "chat", CONFIG, "malformed"),
        ({"prompt": [1, 2, 3], "temperature": 0}, "completion", CONFIG, "token-prompt"),
        ({"prompt": ["a", "b"], "temperature": 0}, "completion", CONFIG, "batch-prompt"),
        ({"prompt": 5.5, "temperature": 0}, "completion", CONFIG, "malformed"),
    ],
)
def test_not_cacheable_with_a_reason(
    body: dict[str, Any], kind: str, config: SemanticConfig, reason: str
) -> None:
    a = admit(config, CacheRequest(kind=kind, body=body, model="m", revision="r"))  # type: ignore[arg-type]
    assert (a.cacheable, a.reason) == (False, reason)


@pytest.mark.parametrize(
    ("params", "default_ok", "opt_in_ok"),
    [
        ({"temperature": 0}, True, True),
        ({"temperature": 1.0, "seed": 42}, True, True),  # a fixed seed replays exactly
        ({"temperature": 0.8, "top_k": 1}, True, True),  # greedy whatever the temperature
        ({"temperature": 0.8}, False, True),
        ({"temperature": 0.8, "seed": True}, False, True),  # a bool is not a seed
        ({"temperature": 0.8, "n": 3}, False, False),  # n>1 even when opted in
    ],
)
def test_determinism_and_the_opt_in(
    params: dict[str, Any], default_ok: bool, opt_in_ok: bool
) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], **params}
    request = CacheRequest(kind="chat", body=body, model="m", revision="r")
    assert admit(SemanticConfig(), request).cacheable is default_ok
    assert admit(SemanticConfig(cache_non_deterministic=True), request).cacheable is opt_in_ok


def test_long_text_is_matched_exactly_only() -> None:
    assert admitted(chat("word " * 10)).semantic
    long = admitted(chat("word " * (MAX_SEMANTIC_CHARS // 4)))
    assert long.cacheable
    assert not long.semantic


@pytest.mark.parametrize(
    "bad",
    [
        {"threshold": 0.0},
        {"threshold": 1.5},
        {"ttl_seconds": 0},
        {"max_entries": 0},
        {"max_bytes": 0},
    ],
)
def test_config_rejects_nonsense(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        SemanticConfig(**bad)
