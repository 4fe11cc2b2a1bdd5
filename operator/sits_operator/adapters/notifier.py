"""Webhook delivery of rollout notifications (aiohttp), off the reconcile path.

`publish` is synchronous and O(1) per webhook: it renders the body (core/notifications.py)
and puts it on that webhook's bounded queue, dropping the oldest queued one when full. One
worker task per webhook sends its queue in order, each request bounded by a timeout,
retrying connection failures, timeouts, 408/425/429 and 5xx with exponential backoff up to
a cap and a number of attempts; any other answer is final. A slow or dead receiver thus
delays only its own queue, never a decision, a status write or another webhook.

Every notification ends as one result (sent, failed or dropped) reported to `on_result`
(the handlers count them in sits_operator_notifications_total).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from sits_operator.core import notifications as messages
from sits_operator.model.notifications import (
    DeliveryResult,
    NotificationSettings,
    RolloutEvent,
    WebhookSettings,
)

log = logging.getLogger("sits_operator.notifier")

ResultSink = Callable[[str, DeliveryResult], None]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Notification:
    event_id: str
    reason: str
    body: bytes
    content_type: str


@dataclass(frozen=True)
class Attempt:
    """The outcome of one request: sent, or why not and whether to try again."""

    sent: bool
    detail: str = ""
    retry: bool = False
    retry_after: float | None = None


class _Webhook:
    def __init__(self, settings: WebhookSettings, size: int) -> None:
        self.settings = settings
        self.queue: asyncio.Queue[Notification] = asyncio.Queue(maxsize=size)
        self.worker: asyncio.Task[None] | None = None


def _ignore(_webhook: str, _result: DeliveryResult) -> None:
    return None


class WebhookNotifier:
    def __init__(
        self,
        settings: NotificationSettings,
        *,
        on_result: ResultSink = _ignore,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self._on_result = on_result
        self._sleep = sleep
        self._hooks = [_Webhook(hook, max(1, settings.queue_size)) for hook in settings.webhooks]
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    @property
    def webhooks(self) -> tuple[str, ...]:
        return tuple(hook.settings.name for hook in self._hooks)

    def queued(self, webhook: str) -> int:
        return next(h.queue.qsize() for h in self._hooks if h.settings.name == webhook)

    async def start(self) -> None:
        """One pooled session and one worker per webhook (on the running loop)."""
        if self._session is not None:
            return
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self.settings.timeout_seconds)
        )
        for hook in self._hooks:
            hook.worker = asyncio.create_task(
                self._work(hook), name=f"sits-notifier-{hook.settings.name}"
            )

    def publish(self, event: RolloutEvent) -> None:
        """Queue the event for every webhook that wants it; never blocks, never raises
        for a full queue (the oldest queued notification is dropped and counted)."""
        if self._closed:
            return
        for hook in self._hooks:
            if not messages.wanted(hook.settings.events, event):
                continue
            body, content_type = messages.render(hook.settings.format, event)
            self._put(hook, Notification(event.id, event.reason, body, content_type))

    def _put(self, hook: _Webhook, notification: Notification) -> None:
        if hook.queue.full():
            oldest = hook.queue.get_nowait()
            hook.queue.task_done()
            self._report(hook, DeliveryResult.DROPPED)
            log.warning(
                "notification queue of webhook %s full (%d): dropped the oldest (%s %s)",
                hook.settings.name,
                hook.queue.maxsize,
                oldest.reason,
                oldest.event_id,
            )
        hook.queue.put_nowait(notification)

    async def flush(self) -> None:
        """Until every queued notification has a result (tests; close's drain)."""
        await asyncio.gather(*(hook.queue.join() for hook in self._hooks))

    async def close(self, drain_seconds: float | None = None) -> None:
        """Stop taking notifications, give the queued ones a bounded time, then stop:
        whatever is still queued is counted dropped."""
        self._closed = True
        bound = self.settings.drain_seconds if drain_seconds is None else drain_seconds
        if self._session is not None and bound > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flush(), timeout=bound)
        for hook in self._hooks:
            if hook.worker is not None:
                hook.worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await hook.worker
                hook.worker = None
            left = 0
            while not hook.queue.empty():
                hook.queue.get_nowait()
                hook.queue.task_done()
                self._report(hook, DeliveryResult.DROPPED)
                left += 1
            if left:
                log.warning(
                    "webhook %s: %d notification(s) not delivered at shutdown",
                    hook.settings.name,
                    left,
                )
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _report(self, hook: _Webhook, result: DeliveryResult) -> None:
        try:
            self._on_result(hook.settings.name, result)
        except Exception:  # a metric must never stop delivery
            log.exception("notification result sink failed")

    async def _work(self, hook: _Webhook) -> None:
        while True:
            notification = await hook.queue.get()
            result = DeliveryResult.FAILED
            try:
                result = await self._deliver(hook, notification)
            except Exception:  # a bug must not end the webhook's worker
                log.exception("webhook %s: delivery crashed", hook.settings.name)
            finally:
                # Cancelled mid-delivery (shutdown): that one is reported failed too.
                self._report(hook, result)
                hook.queue.task_done()

    async def _deliver(self, hook: _Webhook, notification: Notification) -> DeliveryResult:
        attempts = max(1, self.settings.max_attempts)
        for number in range(1, attempts + 1):
            attempt = await self._attempt(hook.settings, notification)
            if attempt.sent:
                log.debug("webhook %s: sent %s", hook.settings.name, notification.event_id)
                return DeliveryResult.SENT
            if not attempt.retry or number == attempts:
                log.warning(
                    "webhook %s: %s %s not delivered after %d attempt(s): %s",
                    hook.settings.name,
                    notification.reason,
                    notification.event_id,
                    number,
                    attempt.detail,
                )
                return DeliveryResult.FAILED
            delay = messages.backoff_delay(
                number,
                self.settings.backoff_seconds,
                self.settings.max_backoff_seconds,
                attempt.retry_after,
            )
            log.info(
                "webhook %s: attempt %d failed (%s); next in %.1f s",
                hook.settings.name,
                number,
                attempt.detail,
                delay,
            )
            await self._sleep(delay)
        return DeliveryResult.FAILED  # unreachable: the loop returns on its last attempt

    async def _attempt(self, hook: WebhookSettings, notification: Notification) -> Attempt:
        assert self._session is not None, "start() first"
        headers = {**dict(hook.headers), "Content-Type": notification.content_type}
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_seconds)
        try:
            async with self._session.post(
                hook.url, data=notification.body, headers=headers, timeout=timeout
            ) as response:
                await response.read()
                if 200 <= response.status < 300:
                    return Attempt(sent=True)
                return Attempt(
                    sent=False,
                    detail=f"HTTP {response.status}",
                    retry=messages.retryable(response.status),
                    retry_after=messages.retry_after(response.headers.get("Retry-After")),
                )
        except TimeoutError:
            return Attempt(
                False, f"no answer within {self.settings.timeout_seconds:g} s", retry=True
            )
        except aiohttp.ClientError as exc:
            return Attempt(False, f"{type(exc).__name__}: {exc}", retry=True)


def make_notifier(
    settings: NotificationSettings, *, on_result: ResultSink = _ignore
) -> WebhookNotifier | None:
    """Factory: None when no webhook is configured (nothing runs, nothing is queued)."""
    return WebhookNotifier(settings, on_result=on_result) if settings.webhooks else None
