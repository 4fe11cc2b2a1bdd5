"""Webhook delivery (adapters/notifier.py) against a real HTTP receiver on 127.0.0.1.

Backoff delays go through an injected sleep that records them and returns at once, so no
test waits for a backoff; only the timeout case waits for real (0.2 s per attempt).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from sits_operator.adapters.notification_settings import notifications_from_env
from sits_operator.adapters.notifier import WebhookNotifier
from sits_operator.core.notifications import rollout_event
from sits_operator.handlers.notifications import count, notifying_poster, start_notifier
from sits_operator.handlers.reconcile import Reconciler
from sits_operator.model.events import EventReason
from sits_operator.model.notifications import (
    DeliveryResult,
    NotificationSettings,
    RolloutEvent,
    WebhookFormat,
    WebhookSettings,
)
from sits_operator.model.observed import ObservedState
from tests.unit.factories import variant

BODY: dict[str, Any] = {
    "metadata": {"name": "chat", "namespace": "prod", "uid": "uid-1", "generation": 1},
    "spec": {"variants": [variant(), variant("v2", "candidate")]},
}
FLUSH_TIMEOUT = 5.0


def event(reason: str = "RolledBack", n: int = 0) -> RolloutEvent:
    return rollout_event(
        BODY, "Warning", EventReason(reason), f"message {n}", now=1.0e9, event_id=f"id-{n}"
    )


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Answers each path from a script of statuses (then 200); can hold requests."""

    scripts: dict[str, list[int]] = field(default_factory=dict)
    retry_after: dict[str, str] = field(default_factory=dict)
    held: set[str] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    seen: list[Seen] = field(default_factory=list)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def on(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]

    async def wait_for(self, path: str, n: int) -> None:
        async with self.arrived:
            await asyncio.wait_for(
                self.arrived.wait_for(lambda: len(self.on(path)) >= n), FLUSH_TIMEOUT
            )

    async def handle(self, request: web.Request) -> web.Response:
        seen = Seen(request.path, dict(request.headers), await request.read())
        async with self.arrived:
            self.seen.append(seen)
            self.arrived.notify_all()
        if request.path in self.held:
            await self.release.wait()
        script = self.scripts.get(request.path, [])
        status = script.pop(0) if script else 200
        headers = {}
        if status != 200 and request.path in self.retry_after:
            headers["Retry-After"] = self.retry_after[request.path]
        return web.Response(status=status, text="ok" if status == 200 else "no", headers=headers)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rx = Receiver()
    app = web.Application()
    app.router.add_post("/{tail:.*}", rx.handle)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    rx.port = int(runner.addresses[0][1])
    try:
        yield rx
    finally:
        rx.release.set()
        await runner.cleanup()


@dataclass
class Results:
    rows: list[tuple[str, DeliveryResult]] = field(default_factory=list)

    def __call__(self, webhook: str, result: DeliveryResult) -> None:
        self.rows.append((webhook, result))

    def of(self, webhook: str) -> dict[DeliveryResult, int]:
        counts: dict[DeliveryResult, int] = {}
        for name, result in self.rows:
            if name == webhook:
                counts[result] = counts.get(result, 0) + 1
        return counts


@dataclass
class Sleeps:
    """The injected sleep: records each backoff and lets the loop run once."""

    delays: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


@asynccontextmanager
async def running(
    *hooks: WebhookSettings, **settings: Any
) -> AsyncIterator[tuple[WebhookNotifier, Results, Sleeps]]:
    results, sleeps = Results(), Sleeps()
    config = NotificationSettings(
        webhooks=hooks, **{"backoff_seconds": 0.5, "max_backoff_seconds": 4.0, **settings}
    )
    notifier = WebhookNotifier(config, on_result=results, sleep=sleeps)
    await notifier.start()
    try:
        yield notifier, results, sleeps
    finally:
        await notifier.close(drain_seconds=0)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def flush(notifier: WebhookNotifier) -> None:
    await asyncio.wait_for(notifier.flush(), FLUSH_TIMEOUT)


async def test_each_format_arrives_with_its_content_type_and_headers(receiver: Receiver) -> None:
    hooks = (
        WebhookSettings("slack", receiver.url("/slack"), WebhookFormat.SLACK),
        WebhookSettings(
            "json",
            receiver.url("/json"),
            WebhookFormat.JSON,
            headers=(("Authorization", "Bearer t"),),
        ),
        WebhookSettings("ce", receiver.url("/ce"), WebhookFormat.CLOUDEVENTS),
    )
    async with running(*hooks) as (notifier, results, sleeps):
        notifier.publish(event())
        await flush(notifier)
    (slack,), (plain,), (ce,) = receiver.on("/slack"), receiver.on("/json"), receiver.on("/ce")
    assert set(slack.json()) == {"text", "blocks"}
    assert slack.headers["Content-Type"] == "application/json"
    assert plain.json()["reason"] == "RolledBack"
    assert plain.headers["Authorization"] == "Bearer t"
    assert ce.headers["Content-Type"] == "application/cloudevents+json; charset=utf-8"
    assert (ce.json()["specversion"], ce.json()["type"]) == ("1.0", "dev.sits.rollout.decision")
    assert sorted(results.rows) == sorted(
        (name, DeliveryResult.SENT) for name in ("slack", "json", "ce")
    )
    assert sleeps.delays == []


async def test_unwanted_events_are_not_queued(receiver: Receiver) -> None:
    hook = WebhookSettings("only-rollbacks", receiver.url("/r"), events=frozenset({"RolledBack"}))
    async with running(hook) as (notifier, results, _):
        notifier.publish(event("Applied"))
        notifier.publish(event("Step"))
        assert notifier.queued("only-rollbacks") == 0
        notifier.publish(event("RolledBack"))
        await flush(notifier)
    assert len(receiver.seen) == 1
    assert results.of("only-rollbacks") == {DeliveryResult.SENT: 1}


async def test_retries_with_backoff_then_succeeds(receiver: Receiver) -> None:
    receiver.scripts["/flaky"] = [503, 500, 429]
    receiver.retry_after["/flaky"] = "3"  # the 429 asks for 3 s
    async with running(WebhookSettings("flaky", receiver.url("/flaky"))) as (n, results, sleeps):
        n.publish(event())
        await flush(n)
    bodies = {s.body for s in receiver.on("/flaky")}
    assert len(receiver.on("/flaky")) == 4
    assert len(bodies) == 1, "every attempt sends the same notification"
    assert sleeps.delays == [3.0, 3.0, 3.0]  # Retry-After on every answer here, capped at 4
    assert results.of("flaky") == {DeliveryResult.SENT: 1}


async def test_backoff_doubles_without_retry_after(receiver: Receiver) -> None:
    receiver.scripts["/flaky"] = [503, 503, 503, 503]
    async with running(WebhookSettings("flaky", receiver.url("/flaky"))) as (n, results, sleeps):
        n.publish(event())
        await flush(n)
    assert sleeps.delays == [0.5, 1.0, 2.0, 4.0]
    assert results.of("flaky") == {DeliveryResult.SENT: 1}


async def test_a_refusal_is_final(receiver: Receiver, caplog: pytest.LogCaptureFixture) -> None:
    receiver.scripts["/bad"] = [400]
    async with running(WebhookSettings("bad", receiver.url("/bad"))) as (n, results, sleeps):
        n.publish(event())
        await flush(n)
    assert len(receiver.on("/bad")) == 1
    assert sleeps.delays == []
    assert results.of("bad") == {DeliveryResult.FAILED: 1}
    assert "not delivered after 1 attempt(s): HTTP 400" in caplog.text


async def test_gives_up_after_max_attempts(receiver: Receiver) -> None:
    receiver.scripts["/down"] = [503] * 10
    hook = WebhookSettings("down", receiver.url("/down"))
    async with running(hook, max_attempts=3) as (n, results, sleeps):
        n.publish(event())
        await flush(n)
    assert len(receiver.on("/down")) == 3
    assert sleeps.delays == [0.5, 1.0]
    assert results.of("down") == {DeliveryResult.FAILED: 1}


async def test_a_receiver_that_is_down_is_retried_counted_failed_and_stays_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = WebhookSettings("gone", f"http://127.0.0.1:{closed_port()}/hook")
    async with running(hook, queue_size=4, max_attempts=3) as (notifier, results, sleeps):
        started = time.perf_counter()
        for n in range(50):
            notifier.publish(event(n=n))
            assert notifier.queued("gone") <= 4
        publishing = time.perf_counter() - started
        await flush(notifier)
    assert publishing < 0.5, "publishing 50 events must not wait for the receiver"
    assert results.of("gone") == {DeliveryResult.DROPPED: 46, DeliveryResult.FAILED: 4}
    assert sleeps.delays == [0.5, 1.0] * 4  # each kept notification retried, then failed
    assert "ClientConnectorError" in caplog.text
    assert caplog.text.count("queue of webhook gone full (4): dropped the oldest") == 46


async def test_a_slow_receiver_times_out_and_holds_up_no_other_webhook(
    receiver: Receiver,
) -> None:
    receiver.held.add("/slow")
    hooks = (
        WebhookSettings("slow", receiver.url("/slow")),
        WebhookSettings("fast", receiver.url("/fast")),
    )
    async with running(*hooks, timeout_seconds=0.2, max_attempts=2) as (n, results, sleeps):
        n.publish(event())
        await receiver.wait_for("/fast", 1)
        assert results.of("fast") == {DeliveryResult.SENT: 1}
        assert results.of("slow") == {}, "the slow one is still waiting for its answer"
        await flush(n)
    assert len(receiver.on("/slow")) == 2
    assert sleeps.delays == [0.5]
    assert results.of("slow") == {DeliveryResult.FAILED: 1}


async def test_overflow_drops_the_oldest_queued(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.held.add("/q")
    async with running(WebhookSettings("q", receiver.url("/q")), queue_size=2) as (n, results, _):
        n.publish(event(n=0))
        await receiver.wait_for("/q", 1)  # 0 is in flight, not queued
        for i in (1, 2, 3):
            n.publish(event(n=i))
        assert n.queued("q") == 2
        assert results.of("q") == {DeliveryResult.DROPPED: 1}
        receiver.release.set()
        await flush(n)
    delivered = [s.json()["id"] for s in receiver.on("/q")]
    assert delivered == ["id-0", "id-2", "id-3"]
    assert results.of("q") == {DeliveryResult.DROPPED: 1, DeliveryResult.SENT: 3}
    assert "dropped the oldest (RolledBack id-1)" in caplog.text


async def publishing(receiver: Receiver, name: str, n: int) -> tuple[WebhookNotifier, Results]:
    """A started notifier with one webhook at /<name> (default settings: the real sleep,
    closed by the test), n events published to it."""
    results = Results()
    settings = NotificationSettings(webhooks=(WebhookSettings(name, receiver.url(f"/{name}")),))
    notifier = WebhookNotifier(settings, on_result=results)
    await notifier.start()
    for i in range(n):
        notifier.publish(event(n=i))
    return notifier, results


async def test_close_drains_within_its_bound_then_drops_the_rest(receiver: Receiver) -> None:
    receiver.held.add("/held")
    notifier, results = await publishing(receiver, "held", 3)
    await receiver.wait_for("/held", 1)
    started = time.perf_counter()
    await notifier.close(drain_seconds=0.2)
    assert time.perf_counter() - started < 2
    # the one in flight was cut off (failed), the two behind it never went (dropped)
    assert results.of("held") == {DeliveryResult.FAILED: 1, DeliveryResult.DROPPED: 2}
    notifier.publish(event(n=9))  # after close: ignored
    assert notifier.queued("held") == 0


async def test_close_delivers_what_is_queued_when_the_receiver_answers(
    receiver: Receiver,
) -> None:
    notifier, results = await publishing(receiver, "ok", 5)
    await notifier.close()
    assert results.of("ok") == {DeliveryResult.SENT: 5}
    assert [s.json()["id"] for s in receiver.on("/ok")] == [f"id-{i}" for i in range(5)]


# The handlers' side: the seam in the reconciler, the metric, the lifecycle.


@dataclass
class Recorder:
    events: list[RolloutEvent] = field(default_factory=list)
    fail: bool = False

    def publish(self, event: RolloutEvent) -> None:
        if self.fail:
            raise RuntimeError("broken publisher")
        self.events.append(event)


def test_the_poster_posts_the_kubernetes_event_then_publishes() -> None:
    order: list[str] = []
    recorder = Recorder()

    def post(_body: Any, type_: str, reason: str, message: str) -> None:
        order.append(f"k8s {reason}")

    class Publisher:
        def publish(self, event: RolloutEvent) -> None:
            order.append(f"webhooks {event.reason}")
            recorder.publish(event)

    poster = notifying_poster(post, Publisher(), wall_clock=lambda: 0.0, new_id=lambda: "id")
    poster(BODY, "Warning", EventReason.ROLLED_BACK, "rolled back: success-rate")
    assert order == ["k8s RolledBack", "webhooks RolledBack"]
    (published,) = recorder.events
    assert (published.namespace, published.name, published.id) == ("prod", "chat", "id")
    assert (published.stable, published.candidate) == ("v1", "v2")


def test_a_broken_publisher_never_fails_the_pass(caplog: pytest.LogCaptureFixture) -> None:
    posted: list[str] = []
    poster = notifying_poster(lambda *a: posted.append(a[2]), Recorder(fail=True))
    poster(BODY, "Normal", EventReason.STEP, "step 1")
    assert posted == ["Step"]
    assert "notification of Step not queued" in caplog.text


async def test_a_reconcile_pass_notifies_its_phase_change() -> None:
    from sits_operator.adapters.kube import NoopKubeWriter
    from sits_operator.model.settings import OperatorSettings

    recorder, posted = Recorder(), []
    reconciler = Reconciler(
        writer=NoopKubeWriter(),
        settings=OperatorSettings(),
        post=notifying_poster(lambda *a: posted.append(a[2]), recorder),
    )
    await reconciler.reconcile(BODY, ObservedState())
    assert [e.reason for e in recorder.events] == posted
    (phase,) = [e for e in recorder.events if e.reason == "PhaseChanged"]
    assert (phase.previous_phase, phase.phase) == ("", "Progressing")


def test_results_are_counted_per_webhook() -> None:
    def value(result: str) -> float:
        sample = REGISTRY.get_sample_value(
            "sits_operator_notifications_total", {"webhook": "metric-test", "result": result}
        )
        return sample or 0.0

    before = value("dropped")
    count("metric-test", DeliveryResult.DROPPED)
    assert value("dropped") == before + 1


async def test_no_webhooks_no_notifier() -> None:
    assert await start_notifier(NotificationSettings()) is None


async def test_the_operators_notifier_starts_with_zeroed_series_and_delivers(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    hook = {"name": "from-env", "format": "cloudevents", "url": receiver.url("/e")}
    env = {"SITS_NOTIFICATIONS": json.dumps({"webhooks": [hook]})}
    notifier = await start_notifier(notifications_from_env(env))
    assert notifier is not None
    sample = REGISTRY.get_sample_value(
        "sits_operator_notifications_total", {"webhook": "from-env", "result": "failed"}
    )
    assert sample is not None
    notifier.publish(event())
    await notifier.close()
    (seen,) = receiver.on("/e")
    assert seen.json()["subject"] == "prod/chat"
    assert "notifications: 1 webhook(s)" in caplog.text
