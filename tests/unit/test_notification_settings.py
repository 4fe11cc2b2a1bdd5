"""SITS_NOTIFICATIONS (the chart's `notifications` values) into NotificationSettings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sits_operator.adapters.notification_settings import notifications_from_env
from sits_operator.adapters.settings import settings_from_env
from sits_operator.model.notifications import NotificationSettings, WebhookFormat


def env(config: Any, **extra: str) -> dict[str, str]:
    return {"SITS_NOTIFICATIONS": json.dumps(config), **extra}


def test_unset_or_empty_means_no_webhooks() -> None:
    assert notifications_from_env({}) == NotificationSettings()
    assert notifications_from_env({"SITS_NOTIFICATIONS": " "}) == NotificationSettings()
    assert settings_from_env({}).notifications.webhooks == ()


def test_the_chart_shape_is_read(tmp_path: Path) -> None:
    (tmp_path / "Authorization").write_text("Bearer s3cret\n")
    (tmp_path / "..data").mkdir()  # a mounted Secret's bookkeeping
    config = {
        "webhooks": [
            {
                "name": "slack",
                "format": "slack",
                "urlEnv": "SITS_NOTIFICATIONS_URL_0",
                "events": ["RolledBack", "phase"],
            },
            {
                "name": "ce",
                "format": "cloudevents",
                "url": "http://127.0.0.1:9/ce",
                "headers": {"X-Team": "ml"},
                "headersDir": str(tmp_path),
            },
            {"name": "plain", "url": "https://example.com/hook"},
        ],
        "queueSize": 8,
        "timeoutSeconds": 2,
        "maxAttempts": 3,
        "backoffSeconds": 0.5,
        "maxBackoffSeconds": 4,
        "drainSeconds": 1,
    }
    settings = settings_from_env(
        env(config, SITS_NOTIFICATIONS_URL_0="https://hooks.slack.com/services/T/B/x")
    ).notifications
    slack, ce, plain = settings.webhooks
    assert (slack.name, slack.format, slack.url) == (
        "slack",
        WebhookFormat.SLACK,
        "https://hooks.slack.com/services/T/B/x",
    )
    assert slack.events == frozenset({"RolledBack", "phase"})
    assert ce.format is WebhookFormat.CLOUDEVENTS
    assert ce.headers == (("Authorization", "Bearer s3cret"), ("X-Team", "ml"))
    assert (plain.format, plain.events, plain.headers) == (WebhookFormat.JSON, frozenset(), ())
    assert (settings.queue_size, settings.max_attempts) == (8, 3)
    assert (settings.timeout_seconds, settings.backoff_seconds) == (2.0, 0.5)
    assert (settings.max_backoff_seconds, settings.drain_seconds) == (4.0, 1.0)
    assert "s3cret" not in repr(settings)
    assert "hooks.slack.com" not in repr(settings)


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ("[", "not JSON"),
        ([], "JSON object"),
        ({"webhooks": {}}, "webhooks must be a list"),
        ({"webhooks": [7]}, "must be an object"),
        ({"webhooks": [{"url": "http://a"}]}, "name is required"),
        ({"webhooks": [{"name": "a"}]}, "url must be"),
        ({"webhooks": [{"name": "a", "url": "ftp://a"}]}, "url must be"),
        ({"webhooks": [{"name": "a", "urlEnv": "U"}]}, "U (its URL) is unset"),
        ({"webhooks": [{"name": "a", "url": "http://a", "format": "xml"}]}, "format must be"),
        ({"webhooks": [{"name": "a", "url": "http://a", "events": "RolledBack"}]}, "events"),
        ({"webhooks": [{"name": "a", "url": "http://a", "headers": {"X": 1}}]}, "headers"),
        (
            {"webhooks": [{"name": "a", "url": "http://a", "headersDir": "/nonexistent/x"}]},
            "not a directory",
        ),
        (
            {"webhooks": [{"name": "a", "url": "http://a"}, {"name": "a", "url": "http://b"}]},
            "unique",
        ),
        ({"queueSize": -1}, "queueSize must be a number"),
        ({"queueSize": True}, "queueSize must be a number"),
        ({"maxAttempts": 0}, "at least 1"),
    ],
)
def test_a_malformed_setting_stops_the_start(config: Any, error: str) -> None:
    raw = config if isinstance(config, str) else json.dumps(config)
    with pytest.raises(ValueError, match="SITS_NOTIFICATIONS") as caught:
        notifications_from_env({"SITS_NOTIFICATIONS": raw})
    assert error in str(caught.value)
