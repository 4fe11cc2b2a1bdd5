"""The real-vLLM test environment works end to end, through the official ``openai`` client.

These pin down what later tests (A/B gateway, cache sidecar, LoRA residency) build on:
completions, streamed chat, model listing, runtime LoRA and restarts of a real vLLM, all
on 127.0.0.1. The tiny model is random, so the tests check shape and behaviour, never text.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from sits_vllm import VllmServer, make_lora_adapter
from sits_vllm.pytest_plugin import VllmFactory

pytestmark = pytest.mark.vllm

MAX_TOKENS = 16
PROMPT = "The canary rollout"
# Random weights may emit </s> at once; tests want a predictable token count.
FULL_LENGTH = {"ignore_eos": True}
SLOW_TEST_TIMEOUT_S = 600  # starts (and restarts) its own server inside the test


def client_for(server: VllmServer) -> OpenAI:
    """An OpenAI client bound to ``server`` (loopback), with no retries to hide failures."""
    assert server.base_url.startswith("http://127.0.0.1:")
    return OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=60)


@pytest.fixture
def client(vllm_server: VllmServer) -> Iterator[OpenAI]:
    """Client for the shared session server, closed after the test."""
    with client_for(vllm_server) as openai_client:
        yield openai_client


def complete(client: OpenAI, model: str, prompt: str = PROMPT) -> str:
    """A greedy, full-length completion's text."""
    result = client.completions.create(
        model=model,
        prompt=prompt,
        temperature=0.0,
        max_tokens=MAX_TOKENS,
        extra_body=FULL_LENGTH,
    )
    assert result.usage is not None
    assert result.usage.completion_tokens == MAX_TOKENS
    return result.choices[0].text


def served_models(client: OpenAI) -> set[str]:
    return {model.id for model in client.models.list()}


def test_completion_is_deterministic_under_greedy_sampling(client: OpenAI) -> None:
    first = complete(client, "tiny")
    assert first
    assert complete(client, "tiny") == first


def test_streamed_chat_arrives_in_chunks_and_ends_on_length(client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "Hello, how are you?"}],
        stream=True,
        stream_options={"include_usage": True},
        temperature=0.0,
        max_tokens=MAX_TOKENS,
        extra_body=FULL_LENGTH,
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    usage = chunks[-1].usage
    assert len(chunks) > 2, "expected a stream, not one message"
    assert text
    assert finish[-1] == "length"
    assert usage is not None
    assert usage.completion_tokens == MAX_TOKENS


def test_models_lists_the_served_name(client: OpenAI, vllm_server: VllmServer) -> None:
    assert served_models(client) == {vllm_server.served_model_name}


@pytest.mark.timeout(SLOW_TEST_TIMEOUT_S)
def test_runtime_lora_answers_differently_and_is_gone_after_restart(
    vllm_factory: VllmFactory, tiny_model: Path
) -> None:
    adapter = make_lora_adapter(tiny_model, seed=1)
    server = vllm_factory(served_model_name="tiny-lora", enable_lora=True, max_loras=2)
    with client_for(server) as lora_client:
        base = complete(lora_client, "tiny-lora")
        server.load_lora("adapter-1", adapter)
        assert served_models(lora_client) == {"tiny-lora", "adapter-1"}
        assert complete(lora_client, "adapter-1") != base
        assert complete(lora_client, "tiny-lora") == base, "the base must be unaffected"

        url = server.url
        server.restart()
        assert server.url == url, "restart keeps the port, so URLs handed out stay valid"
        # Runtime-loaded adapters live in memory only: a restarted server has none.
        assert served_models(lora_client) == {"tiny-lora"}
        assert complete(lora_client, "tiny-lora") == base
