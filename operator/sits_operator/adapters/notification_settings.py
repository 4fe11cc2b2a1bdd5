"""Notification settings from the environment: `SITS_NOTIFICATIONS`, one JSON object.

The chart renders its `notifications` values into it (templates/_notifications.tpl):

    {"webhooks": [{"name": "slack", "format": "slack", "url": "https://...",
                   "events": ["RolledBack", "phase"], "headers": {"X-A": "b"},
                   "urlEnv": "SITS_NOTIFICATIONS_URL_0",
                   "headersDir": "/etc/sits/notifications/slack"}],
     "queueSize": 256, "timeoutSeconds": 5, "maxAttempts": 5, "backoffSeconds": 1,
     "maxBackoffSeconds": 30, "drainSeconds": 3}

Credentials never sit in that JSON: `urlEnv` names a variable holding the URL (the chart
fills it from a Secret key), and `headersDir` is a mounted Secret whose every key is a
header name and whose value is the header's value. Both are read once, at start.
A malformed setting is a ValueError: the operator refuses to start rather than run
without the notifications it was asked for.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sits_operator.model.notifications import (
    NotificationKind,
    NotificationSettings,
    WebhookFormat,
    WebhookSettings,
)

ENV = "SITS_NOTIFICATIONS"
NUMBERS = {
    "queueSize": "queue_size",
    "timeoutSeconds": "timeout_seconds",
    "maxAttempts": "max_attempts",
    "backoffSeconds": "backoff_seconds",
    "maxBackoffSeconds": "max_backoff_seconds",
    "drainSeconds": "drain_seconds",
}
INTEGERS = frozenset({"queue_size", "max_attempts"})
KINDS = frozenset(kind.value for kind in NotificationKind)


def notifications_from_env(env: Mapping[str, str] | None = None) -> NotificationSettings:
    env = os.environ if env is None else env
    raw = env.get(ENV, "").strip()
    if not raw:
        return NotificationSettings()
    try:
        config = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{ENV} is not JSON: {exc}") from exc
    return parse_notifications(config, env)


def parse_notifications(config: Any, env: Mapping[str, str]) -> NotificationSettings:
    if not isinstance(config, dict):
        raise ValueError(f"{ENV} must be a JSON object")
    numbers: dict[str, Any] = {}
    for key, attribute in NUMBERS.items():
        if config.get(key) is None:
            continue
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{ENV}: {key} must be a number >= 0, not {value!r}")
        numbers[attribute] = int(value) if attribute in INTEGERS else float(value)
    if numbers.get("queue_size") == 0 or numbers.get("max_attempts") == 0:
        raise ValueError(f"{ENV}: queueSize and maxAttempts must be at least 1")
    raw_hooks = [] if config.get("webhooks") is None else config["webhooks"]
    if not isinstance(raw_hooks, list):
        raise ValueError(f"{ENV}: webhooks must be a list")
    hooks = tuple(_webhook(i, raw, env) for i, raw in enumerate(raw_hooks))
    names = [hook.name for hook in hooks]
    if len(set(names)) != len(names):
        raise ValueError(f"{ENV}: webhook names must be unique, got {names}")
    return NotificationSettings(webhooks=hooks, **numbers)


def _webhook(index: int, raw: Any, env: Mapping[str, str]) -> WebhookSettings:
    where = f"{ENV}: webhooks[{index}]"
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}: name is required")
    where = f"{ENV}: webhook {name!r}"
    url = raw.get("url") or ""
    if raw.get("urlEnv"):
        url = env.get(str(raw["urlEnv"]), "")
        if not url:
            raise ValueError(f"{where}: variable {raw['urlEnv']} (its URL) is unset or empty")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: url must be an http:// or https:// URL")
    try:
        format_ = WebhookFormat(raw.get("format") or WebhookFormat.JSON.value)
    except ValueError:
        allowed = ", ".join(f.value for f in WebhookFormat)
        raise ValueError(f"{where}: format must be one of {allowed}") from None
    events = raw.get("events") or []
    if not isinstance(events, list) or not all(isinstance(e, str) and e for e in events):
        raise ValueError(f"{where}: events must be a list of event reasons or kinds ({KINDS})")
    headers = _headers(where, raw.get("headers") or {})
    if raw.get("headersDir"):
        headers = {**headers, **_headers_from_dir(where, Path(str(raw["headersDir"])))}
    return WebhookSettings(
        name=name,
        url=url,
        format=format_,
        events=frozenset(events),
        headers=tuple(sorted(headers.items())),
    )


def _headers(where: str, raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise ValueError(f"{where}: headers must map names to strings")
    return dict(raw)


def _headers_from_dir(where: str, directory: Path) -> dict[str, str]:
    """A mounted Secret: one file per key (Kubernetes' ..data links and dot files skipped)."""
    if not directory.is_dir():
        raise ValueError(f"{where}: headersDir {directory} is not a directory")
    return {
        path.name: path.read_text().strip()
        for path in sorted(directory.iterdir())
        if not path.name.startswith(".") and path.is_file()
    }
