"""Notifications at the reconciler's event seam: every event it posts (decisions, phase
changes, and on request condition flips and child writes) also goes to the webhooks.

`notifying_poster` wraps the `EventPoster` the Reconciler is given: the Kubernetes event
is posted first, exactly as before; then the event is handed to the notifier, whose
`publish` only queues (adapters/notifier.py), so neither a decision nor a status write
ever waits for a webhook. Results are counted in sits_operator_notifications_total.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from prometheus_client import Counter

from sits_operator.adapters.notifier import WebhookNotifier, make_notifier
from sits_operator.core import notifications as messages
from sits_operator.handlers.reconcile import EventPoster
from sits_operator.model.events import EventReason
from sits_operator.model.notifications import (
    DeliveryResult,
    NotificationSettings,
    RolloutEvent,
)

log = logging.getLogger("sits_operator.notifications")

NOTIFICATIONS = Counter(
    "sits_operator_notifications_total",
    "Webhook notifications by webhook and result (sent, failed after retries, dropped).",
    ["webhook", "result"],
)


class Publisher(Protocol):
    def publish(self, event: RolloutEvent) -> None:
        """Queue the event for the webhooks that want it; never blocks."""


def count(webhook: str, result: DeliveryResult) -> None:
    NOTIFICATIONS.labels(webhook=webhook, result=result.value).inc()


def new_event_id() -> str:
    return str(uuid.uuid4())


def notifying_poster(
    post: EventPoster,
    publisher: Publisher,
    *,
    wall_clock: Callable[[], float] = time.time,
    new_id: Callable[[], str] = new_event_id,
) -> EventPoster:
    """`post`, and then the same event to the webhooks."""

    def post_and_notify(body: Any, type_: str, reason: EventReason, message: str) -> None:
        post(body, type_, reason, message)
        try:
            event = messages.rollout_event(
                body, type_, reason, message, now=wall_clock(), event_id=new_id()
            )
            publisher.publish(event)
        except Exception:  # a notification must never fail a reconcile pass
            log.exception("notification of %s not queued", reason.value)

    return post_and_notify


async def start_notifier(settings: NotificationSettings) -> WebhookNotifier | None:
    """The running notifier, or None without webhooks. Every configured webhook's series
    start at 0, so `increase()` sees the first failure."""
    notifier = make_notifier(settings, on_result=count)
    if notifier is None:
        return None
    for name in notifier.webhooks:
        for result in DeliveryResult:
            NOTIFICATIONS.labels(webhook=name, result=result.value)
    await notifier.start()
    log.info("notifications: %d webhook(s): %s", len(notifier.webhooks), notifier.webhooks)
    return notifier
