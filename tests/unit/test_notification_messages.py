"""Notification bodies (core/notifications.py): tables of events to what a webhook gets."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from sits_operator.core import notifications as m
from sits_operator.model.events import EventReason
from sits_operator.model.notifications import NotificationKind, RolloutEvent, WebhookFormat

BODY: dict[str, Any] = {
    "metadata": {"name": "chat", "namespace": "prod", "uid": "uid-1"},
    "spec": {
        "variants": [
            {"name": "v2", "role": "candidate"},
            {"name": "v1", "role": "stable"},
        ]
    },
}
# 2026-01-02T03:04:05.678Z
NOW = 1767323045.678


def event(reason: str = "RolledBack", message: str = "rolled back", **changes: Any) -> RolloutEvent:
    made = m.rollout_event(BODY, "Warning", EventReason(reason), message, now=NOW, event_id="e-1")
    return replace(made, **changes)


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("PhaseChanged", NotificationKind.PHASE),
        ("RolledBack", NotificationKind.DECISION),
        ("Step", NotificationKind.DECISION),
        ("WeightCut", NotificationKind.DECISION),
        ("Promoted", NotificationKind.DECISION),
        ("ProgressDeadlineExceeded", NotificationKind.DECISION),
        ("CommandIgnored", NotificationKind.DECISION),
        ("Applied", NotificationKind.CHILDREN),
        ("Deleted", NotificationKind.CHILDREN),
        ("ReadyFalse", NotificationKind.CONDITION),
        ("TrafficAppliedFalse", NotificationKind.CONDITION),
        ("ContainersFailingTrue", NotificationKind.CONDITION),
        ("InvalidTrue", NotificationKind.CONDITION),
    ],
)
def test_events_are_classified_by_reason(reason: str, kind: NotificationKind) -> None:
    assert m.classify(EventReason(reason)) is kind


@pytest.mark.parametrize(
    ("events", "reason", "wanted"),
    [
        (frozenset(), "RolledBack", True),  # default: decisions ...
        (frozenset(), "PhaseChanged", True),  # ... and phase changes
        (frozenset(), "Applied", False),
        (frozenset(), "ReadyFalse", False),
        (frozenset({"RolledBack"}), "RolledBack", True),
        (frozenset({"RolledBack"}), "Step", False),
        (frozenset({"RolledBack"}), "PhaseChanged", False),
        (frozenset({"phase"}), "PhaseChanged", True),
        (frozenset({"phase"}), "Promoted", False),
        (frozenset({"decision"}), "Step", True),
        (frozenset({"condition"}), "TrafficAppliedFalse", True),
        (frozenset({"children"}), "Deleted", True),
        (frozenset({"dev.sits.rollout.decision"}), "WeightCut", True),
        (frozenset({"dev.sits.rollout.decision"}), "PhaseChanged", False),
        (frozenset({"ReadyFalse", "phase"}), "ReadyFalse", True),
    ],
)
def test_a_filter_names_reasons_kinds_or_types(
    events: frozenset[str], reason: str, wanted: bool
) -> None:
    assert m.wanted(events, event(reason)) is wanted


@pytest.mark.parametrize(
    ("message", "previous", "phase"),
    [
        ("Progressing -> RolledBack", "Progressing", "RolledBack"),
        ("(none) -> Progressing", "", "Progressing"),
        ("Paused", "", "Paused"),  # not the reconciler's shape: still the phase
    ],
)
def test_a_phase_change_carries_both_phases(message: str, previous: str, phase: str) -> None:
    made = m.rollout_event(
        BODY, "Normal", EventReason.PHASE_CHANGED, message, now=NOW, event_id="e"
    )
    assert (made.previous_phase, made.phase) == (previous, phase)
    assert made.kind is NotificationKind.PHASE


@pytest.mark.parametrize(
    ("body", "stable", "candidate"),
    [
        (BODY, "v1", "v2"),
        ({"metadata": {}}, "", ""),
        ({"metadata": {}, "spec": {"variants": "x"}}, "", ""),
        ({"metadata": {}, "spec": {"variants": [{"name": "v1", "role": "stable"}, 7]}}, "v1", ""),
    ],
)
def test_the_event_names_stable_and_candidate_when_the_spec_does(
    body: dict[str, Any], stable: str, candidate: str
) -> None:
    made = m.rollout_event(body, "Normal", EventReason.STEP, "stepped", now=NOW, event_id="e")
    assert (made.stable, made.candidate) == (stable, candidate)


def test_json_body_is_flat_and_complete() -> None:
    assert m.json_body(event()) == {
        "id": "e-1",
        "type": "dev.sits.rollout.decision",
        "kind": "decision",
        "time": "2026-01-02T03:04:05.678Z",
        "namespace": "prod",
        "name": "chat",
        "uid": "uid-1",
        "severity": "Warning",
        "reason": "RolledBack",
        "message": "rolled back",
        "stable": "v1",
        "candidate": "v2",
    }
    phase = m.json_body(event("PhaseChanged", "Progressing -> RolledBack", severity="Normal"))
    assert (phase["type"], phase["phase"], phase["previousPhase"]) == (
        "dev.sits.rollout.phase",
        "RolledBack",
        "Progressing",
    )


def test_cloudevent_is_structured_mode_1_0() -> None:
    body = m.cloudevent(event())
    assert body == {
        "specversion": "1.0",
        "id": "e-1",
        "source": "/apis/sits.dev/v1alpha1/namespaces/prod/sitsdeployments/chat",
        "type": "dev.sits.rollout.decision",
        "subject": "prod/chat",
        "time": "2026-01-02T03:04:05.678Z",
        "datacontenttype": "application/json",
        "data": m.json_body(event()),
    }


@pytest.mark.parametrize(
    ("reason", "severity", "message", "icon"),
    [
        ("RolledBack", "Warning", "rolled back", ":rotating_light:"),
        ("Promoted", "Normal", "promoted v2", ":white_check_mark:"),
        ("PhaseChanged", "Normal", "Promoting -> Succeeded", ":white_check_mark:"),
        ("PhaseChanged", "Normal", "Progressing -> RolledBack", ":rotating_light:"),
        ("WeightCut", "Warning", "p95 too high", ":warning:"),
        ("Step", "Normal", "step 1", ":information_source:"),
    ],
)
def test_slack_icons_tell_the_outcome(reason: str, severity: str, message: str, icon: str) -> None:
    made = m.rollout_event(BODY, severity, EventReason(reason), message, now=NOW, event_id="e")
    body = m.slack_body(made)
    assert body["text"].startswith(icon)
    assert body["blocks"][0]["text"]["text"].startswith(f"{icon} *{reason}* `prod/chat`")


def test_slack_message_is_what_incoming_webhooks_accept() -> None:
    made = event(message="success_rate_5m of v2 = 0.75 < 0.95 for 2 of 2 periods & more")
    body = m.slack_body(made)
    assert set(body) == {"text", "blocks"}
    assert [b["type"] for b in body["blocks"]] == ["section", "context"]
    section = body["blocks"][0]["text"]
    assert section["type"] == "mrkdwn"
    assert "0.75 &lt; 0.95 for 2 of 2 periods &amp; more" in section["text"]
    assert "<" not in body["text"]
    (context,) = body["blocks"][1]["elements"]
    assert context == {
        "type": "mrkdwn",
        "text": "stable `v1` · candidate `v2` · Warning · 2026-01-02T03:04:05.678Z",
    }


def test_slack_texts_stay_within_the_section_limit() -> None:
    body = m.slack_body(event(message="x" * 10_000))
    assert len(body["text"]) == m.SLACK_TEXT_LIMIT
    assert len(body["blocks"][0]["text"]["text"]) == m.SLACK_TEXT_LIMIT
    assert body["text"].endswith("…")


def test_slack_context_without_variants() -> None:
    made = m.rollout_event(
        {"metadata": {"name": "a"}}, "Normal", EventReason.STEP, "s", now=0, event_id="e"
    )
    (context,) = m.slack_body(made)["blocks"][1]["elements"]
    assert context["text"] == "Normal · 1970-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("format_", "content_type", "key"),
    [
        (WebhookFormat.SLACK, "application/json", "blocks"),
        (WebhookFormat.JSON, "application/json", "reason"),
        (WebhookFormat.CLOUDEVENTS, "application/cloudevents+json; charset=utf-8", "specversion"),
    ],
)
def test_render_gives_body_and_content_type(
    format_: WebhookFormat, content_type: str, key: str
) -> None:
    body, got = m.render(format_, event(message="naïve → ok"))
    assert got == content_type
    decoded = json.loads(body)
    assert key in decoded
    assert "naïve → ok" in body.decode()  # UTF-8, not \u escapes


@pytest.mark.parametrize(
    ("attempt", "hint", "delay"),
    [
        (1, None, 0.5),
        (2, None, 1.0),
        (3, None, 2.0),
        (5, None, 8.0),
        (6, None, 10.0),  # capped
        (40, None, 10.0),
        (1, 3.0, 3.0),  # Retry-After wins ...
        (1, 60.0, 10.0),  # ... within the cap
        (2, 0.0, 0.0),
    ],
)
def test_backoff_doubles_up_to_the_cap(attempt: int, hint: float | None, delay: float) -> None:
    assert m.backoff_delay(attempt, 0.5, 10.0, hint) == delay


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("-1", None),
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),
    ],
)
def test_retry_after_numeric_only(value: str | None, seconds: float | None) -> None:
    assert m.retry_after(value) == seconds


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        (200, False),
        (400, False),
        (401, False),
        (404, False),
        (408, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (501, False),
    ],
)
def test_retryable_statuses(status: int, retry: bool) -> None:
    assert m.retryable(status) is retry
