"""Batched SLI queries: rendering, the shared answers (staleness bound, single flight,
errors), and each deployment's share of a batched answer. Simulated time, no sleeps."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from sits_operator.adapters.prometheus import (
    BATCHED_REQUESTS_QUERY,
    PrometheusProvider,
    Target,
    batchable,
    by_deployment,
    render_query,
)
from sits_operator.adapters.prometheus_batch import SharedQueries
from sits_operator.core.analysis.schedule import shared_max_age
from sits_operator.model.policy import parse_policy
from tests.unit.test_prometheus_adapter import rule

REPO = Path(__file__).resolve().parents[2]
BATCHED = 'sum by ({{by}}) (x{namespace="{{namespace}}",sits_deployment=~"{{deployment_regex}}"})'
PLAIN = 'sum by (variant) (x{namespace="{{namespace}}",sits_deployment="{{deployment}}"})'


@pytest.mark.parametrize(
    ("template", "deployment", "batched", "expected"),
    [
        pytest.param(
            BATCHED,
            "chat",
            True,
            'sum by (sits_deployment, variant) (x{namespace="prod",sits_deployment=~".+"})',
            id="batched",
        ),
        pytest.param(
            BATCHED,
            "chat",
            False,
            'sum by (variant) (x{namespace="prod",sits_deployment=~"chat"})',
            id="unbatched",
        ),
        pytest.param(
            BATCHED,
            "chat.v-2",
            False,
            'sum by (variant) (x{namespace="prod",sits_deployment=~"chat\\\\.v\\\\-2"})',
            id="regex-escaped-for-a-promql-string",
        ),
        pytest.param(
            PLAIN,
            "chat",
            True,
            'sum by (variant) (x{namespace="prod",sits_deployment="chat"})',
            id="no-placeholders-untouched",
        ),
    ],
)
def test_render(template: str, deployment: str, batched: bool, expected: str) -> None:
    target = Target("prod", deployment, ("v1", "v2"))
    assert render_query(template, target, 300, batched=batched) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (BATCHED, True),
        (PLAIN, False),
        ('sum by ({{by}}) (x{variant="{{variant}}"})', False),  # one variant per query
    ],
)
def test_batchable(template: str, expected: bool) -> None:
    assert batchable(template) is expected


def test_sits2026_is_batched_and_renders_for_one_deployment_too() -> None:
    raw = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
    policy = parse_policy("sits2026", raw["spec"])
    target = Target("prod", "chat", ("v1", "v2"))
    for r in policy.rules:
        assert batchable(r.query), r.name
        for batched in (True, False):
            assert "{{" not in render_query(r.query, target, r.window_seconds, batched=batched)


@pytest.mark.parametrize(("interval", "expected"), [(30, 2.0), (10, 1.0), (5, 0.5), (600, 2.0)])
def test_shared_answers_are_young_against_the_interval(interval: float, expected: float) -> None:
    assert shared_max_age(interval) == expected


def series(deployment: str | None, variant: str | None, value: str) -> dict[str, Any]:
    labels = {k: v for k, v in (("sits_deployment", deployment), ("variant", variant)) if v}
    return {"metric": labels, "value": [0, value]}


def test_a_batched_answer_is_indexed_by_deployment_and_variant() -> None:
    result = [
        series("a", "v1", "1"),
        series("a", "v2", "2"),
        series("b", "v1", "oops"),
        series(None, "v1", "9"),  # no deployment: nobody's
        series("c", None, "9"),  # no variant: nobody's
    ]
    index = by_deployment(result)
    assert index["a"] == {"v1": 1.0, "v2": 2.0}
    assert set(index) == {"a", "b"}
    assert index["b"]["v1"] != index["b"]["v1"]  # NaN


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Backend:
    """Answers each query with a future the test resolves, recording what was sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.pending: list[asyncio.Future[str]] = []

    async def send(self, query: str) -> str:
        self.sent.append(query)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return await future


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_concurrent_callers_share_one_query_in_flight() -> None:
    backend, clock = Backend(), Clock()
    shared: SharedQueries[str] = SharedQueries(backend.send, clock)
    callers = [asyncio.ensure_future(shared.answer("q", 2.0)) for _ in range(50)]
    await settle()
    assert backend.sent == ["q"]
    backend.pending[0].set_result("answer")
    assert await asyncio.gather(*callers) == ["answer"] * 50


@pytest.mark.parametrize(
    ("elapsed", "sent"),
    [(0.0, 1), (2.0, 1), (2.01, 2), (30.0, 2)],
    ids=["same-instant", "at-the-bound", "past-the-bound", "next-period"],
)
async def test_answers_are_reused_within_the_staleness_bound_only(
    elapsed: float, sent: int
) -> None:
    backend, clock = Backend(), Clock()
    shared: SharedQueries[str] = SharedQueries(backend.send, clock)
    first = asyncio.ensure_future(shared.answer("q", 2.0))
    await settle()
    backend.pending[0].set_result("old")
    assert await first == "old"
    clock.now += elapsed
    second = asyncio.ensure_future(shared.answer("q", 2.0))
    await settle()
    assert len(backend.sent) == sent
    if sent == 2:
        backend.pending[1].set_result("new")
    assert await second == ("new" if sent == 2 else "old")


async def test_a_slow_query_is_not_joined_past_the_bound() -> None:
    backend, clock = Backend(), Clock()
    shared: SharedQueries[str] = SharedQueries(backend.send, clock)
    first = asyncio.ensure_future(shared.answer("q", 2.0))
    await settle()
    clock.now += 5  # still in flight, but sent too long ago
    second = asyncio.ensure_future(shared.answer("q", 2.0))
    await settle()
    assert len(backend.sent) == 2
    backend.pending[0].set_result("slow")
    backend.pending[1].set_result("fresh")
    assert (await first, await second) == ("slow", "fresh")


async def test_an_error_is_every_sharers_error() -> None:
    backend, clock = Backend(), Clock()
    shared: SharedQueries[str] = SharedQueries(backend.send, clock)
    callers = [asyncio.ensure_future(shared.answer("q", 2.0)) for _ in range(3)]
    await settle()
    backend.pending[0].set_exception(requests.ConnectionError("down"))
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, requests.ConnectionError) for r in results)
    assert len(backend.sent) == 1


async def test_a_cancelled_caller_does_not_cancel_the_others() -> None:
    backend, clock = Backend(), Clock()
    shared: SharedQueries[str] = SharedQueries(backend.send, clock)
    leaving = asyncio.ensure_future(shared.answer("q", 2.0))
    staying = asyncio.ensure_future(shared.answer("q", 2.0))
    await settle()
    leaving.cancel()
    await settle()
    backend.pending[0].set_result("answer")
    assert await staying == "answer"


async def test_old_answers_are_forgotten() -> None:
    backend, clock = Backend(), Clock()
    shared: SharedQueries[str] = SharedQueries(backend.send, clock)
    for query in ("a", "b"):
        task = asyncio.ensure_future(shared.answer(query, 2.0))
        await settle()
        backend.pending[-1].set_result(query)
        await task
    clock.now += 30
    task = asyncio.ensure_future(shared.answer("c", 2.0))
    await settle()
    assert len(shared) == 1
    backend.pending[-1].set_result("c")
    await task


class FakeClient:
    """prometheus-api-client's custom_query, answering the batched queries of namespace
    prod for deployments a and b (c has no series)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.queries: list[str] = []
        self.error = error

    def custom_query(self, query: str) -> list[dict[str, Any]]:
        self.queries.append(query)
        if self.error is not None:
            raise self.error
        if "increase(" in query:
            return [series("a", "v1", "600"), series("a", "v2", "40"), series("b", "v2", "7")]
        return [series("a", "v1", "0.99"), series("a", "v2", "0.5"), series("b", "v2", "0.97")]


@pytest.fixture
def counted() -> list[tuple[str, bool]]:
    return []


def provider_with(
    client: FakeClient, counted: list[tuple[str, bool]]
) -> tuple[PrometheusProvider, Clock]:
    clock = Clock()
    provider = PrometheusProvider(
        "http://127.0.0.1:9", on_query=lambda p, b: counted.append((p, b)), clock=clock
    )
    provider._client = client
    return provider, clock


def target(name: str) -> Target:
    return Target("prod", name, ("v1", "v2"), max_age=2.0)


async def test_deployments_of_a_namespace_share_two_queries_per_rule(
    counted: list[tuple[str, bool]],
) -> None:
    client = FakeClient()
    provider, _ = provider_with(client, counted)
    a, b, c = await asyncio.gather(
        *(provider.samples(rule(BATCHED), target(n)) for n in ("a", "b", "c"))
    )
    assert len(client.queries) == 2  # the value and the request count, for all three
    assert client.queries[1] == BATCHED_REQUESTS_QUERY.format(
        namespace="prod", source="gateway", window="5m"
    )
    assert counted == [("", True), ("", True)]
    assert (a.by_variant["v1"].value, a.by_variant["v1"].requests) == (0.99, 600)
    assert (a.by_variant["v2"].value, a.by_variant["v2"].requests) == (0.5, 40)
    assert set(b.by_variant) == {"v2"}
    assert (b.by_variant["v2"].value, b.by_variant["v2"].requests) == (0.97, 7)
    assert c.error is None
    assert c.by_variant == {}  # absent from the answer: no data, as unbatched


async def test_a_failed_batched_query_fails_every_deployment_sharing_it(
    counted: list[tuple[str, bool]],
) -> None:
    client = FakeClient(requests.ConnectionError("refused"))
    provider, _ = provider_with(client, counted)
    found = await asyncio.gather(*(provider.samples(rule(BATCHED), target(n)) for n in "ab"))
    assert len(client.queries) == 1
    assert all(s.error is not None and "cannot connect" in s.error for s in found)


async def test_unbatched_templates_query_per_deployment_as_before(
    counted: list[tuple[str, bool]],
) -> None:
    client = FakeClient()
    provider, _ = provider_with(client, counted)
    await asyncio.gather(*(provider.samples(rule(PLAIN), target(n)) for n in "ab"))
    assert len(client.queries) == 4
    assert counted == [("", False)] * 4
    assert 'sits_deployment="a"' in client.queries[0] or 'sits_deployment="a"' in client.queries[1]


async def test_the_next_period_sends_fresh_queries(counted: list[tuple[str, bool]]) -> None:
    client = FakeClient()
    provider, clock = provider_with(client, counted)
    await provider.samples(rule(BATCHED), target("a"))
    clock.now += 30
    await provider.samples(rule(BATCHED), target("b"))
    assert len(client.queries) == 4
