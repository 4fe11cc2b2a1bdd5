"""Notification bodies, pure: what a webhook receives for one event of a SitsDeployment.

Every event the reconciler posts (handlers/reconcile.py, `Reconciler.post`) becomes a
`RolloutEvent` here; each webhook whose filter wants it gets it in its own format:

- `slack`: `{"text", "blocks"}` as Slack incoming webhooks accept them (mrkdwn escaped,
  within Slack's 3000-character section limit);
- `json`: one flat JSON object (`json_body`);
- `cloudevents`: a CloudEvents 1.0 structured-mode body, type `dev.sits.rollout.<kind>`,
  subject `namespace/name`, the JSON object as `data`.

The delivery's retry arithmetic lives here too (`backoff_delay`, `retryable`), so the
adapter only does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sits_operator.model.events import CONDITION_FLIPS, EventReason
from sits_operator.model.notifications import (
    DEFAULT_KINDS,
    NotificationKind,
    RolloutEvent,
    WebhookFormat,
)
from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL
from sits_operator.model.status import Phase

CHILDREN_REASONS = frozenset({EventReason.APPLIED, EventReason.DELETED})
# Rollback or promotion: the Slack message's icon.
ROLLBACK_REASONS = frozenset({EventReason.ROLLED_BACK, EventReason.PROGRESS_DEADLINE_EXCEEDED})
TYPE_PREFIX = "dev.sits.rollout."
SPEC_VERSION = "1.0"
CLOUDEVENTS_CONTENT_TYPE = "application/cloudevents+json; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"
# Slack: a section's text holds at most 3000 characters; the top-level `text` (the
# notification's fallback) is kept to the same.
SLACK_TEXT_LIMIT = 3000
# Statuses worth another attempt: the receiver may answer later (overload, restart).
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


def classify(reason: EventReason) -> NotificationKind:
    """The kind of an event, from its reason (the reconciler's vocabulary)."""
    if reason is EventReason.PHASE_CHANGED:
        return NotificationKind.PHASE
    if reason in CHILDREN_REASONS:
        return NotificationKind.CHILDREN
    if reason in CONDITION_FLIPS:
        return NotificationKind.CONDITION
    return NotificationKind.DECISION


def event_type(kind: NotificationKind) -> str:
    return TYPE_PREFIX + kind.value


def wanted(events: frozenset[str], event: RolloutEvent) -> bool:
    """Does a webhook with this filter get the event? A filter names reasons, kinds or
    full CloudEvents types; an empty one takes every decision and phase change."""
    if not events:
        return event.kind in DEFAULT_KINDS
    return bool({event.reason, event.kind.value, event_type(event.kind)} & events)


def rfc3339(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _phases(message: str) -> tuple[str, str]:
    """(previous, new) from a PhaseChanged message, "Progressing -> RolledBack"."""
    before, arrow, after = message.partition(" -> ")
    if not arrow:
        return "", message.strip()
    return ("" if before.strip() == "(none)" else before.strip()), after.strip()


def _variant_names(spec: Mapping[str, Any]) -> tuple[str, str]:
    """(stable, first candidate) as the spec names them; "" where there is none."""
    variants = spec.get("variants")
    if not isinstance(variants, list):
        return "", ""
    named = [v for v in variants if isinstance(v, Mapping) and isinstance(v.get("name"), str)]
    stable = next((str(v["name"]) for v in named if v.get("role") == "stable"), "")
    candidate = next((str(v["name"]) for v in named if v.get("role") == "candidate"), "")
    return stable, candidate


def rollout_event(
    body: Mapping[str, Any],
    type_: str,
    reason: EventReason,
    message: str,
    *,
    now: float,
    event_id: str,
) -> RolloutEvent:
    """The event as the reconciler posts it, with the object it is about."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    stable, candidate = _variant_names(spec if isinstance(spec, Mapping) else {})
    kind = classify(reason)
    previous, phase = _phases(message) if kind is NotificationKind.PHASE else ("", "")
    return RolloutEvent(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        kind=kind,
        severity=type_,
        reason=reason,
        message=message,
        time=rfc3339(now),
        id=event_id,
        stable=stable,
        candidate=candidate,
        phase=phase,
        previous_phase=previous,
    )


def json_body(event: RolloutEvent) -> dict[str, Any]:
    """The generic JSON notification (also the `data` of a CloudEvent)."""
    body: dict[str, Any] = {
        "id": event.id,
        "type": event_type(event.kind),
        "kind": event.kind.value,
        "time": event.time,
        "namespace": event.namespace,
        "name": event.name,
        "uid": event.uid,
        "severity": event.severity,
        "reason": event.reason,
        "message": event.message,
        "stable": event.stable,
        "candidate": event.candidate,
    }
    if event.kind is NotificationKind.PHASE:
        body["phase"] = event.phase
        body["previousPhase"] = event.previous_phase
    return body


def source(event: RolloutEvent) -> str:
    """The CloudEvents source: the SitsDeployment's API path (a URI reference)."""
    return f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{event.namespace}/{PLURAL}/{event.name}"


def cloudevent(event: RolloutEvent) -> dict[str, Any]:
    """A CloudEvents 1.0 event in structured mode (JSON format)."""
    return {
        "specversion": SPEC_VERSION,
        "id": event.id,
        "source": source(event),
        "type": event_type(event.kind),
        "subject": f"{event.namespace}/{event.name}",
        "time": event.time,
        "datacontenttype": JSON_CONTENT_TYPE,
        "data": json_body(event),
    }


def mrkdwn_escape(text: str) -> str:
    """Slack's control characters: &, < and > (nothing else is escaped)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _icon(event: RolloutEvent) -> str:
    if event.reason in ROLLBACK_REASONS or event.phase == Phase.ROLLED_BACK:
        return ":rotating_light:"
    if event.reason is EventReason.PROMOTED or event.phase == Phase.SUCCEEDED:
        return ":white_check_mark:"
    return ":warning:" if event.severity == "Warning" else ":information_source:"


def slack_body(event: RolloutEvent) -> dict[str, Any]:
    """A Slack incoming-webhook message: a plain `text` fallback and two blocks."""
    target = f"{event.namespace}/{event.name}"
    headline = f"{_icon(event)} *{mrkdwn_escape(event.reason)}* `{mrkdwn_escape(target)}`"
    section = truncate(f"{headline}\n{mrkdwn_escape(event.message)}", SLACK_TEXT_LIMIT)
    facts = [f"{event.severity}", event.time]
    if event.stable:
        facts.insert(0, f"stable `{mrkdwn_escape(event.stable)}`")
    if event.candidate:
        facts.insert(1 if event.stable else 0, f"candidate `{mrkdwn_escape(event.candidate)}`")
    text = f"{_icon(event)} {target}: {event.reason}: {event.message}"
    return {
        "text": truncate(mrkdwn_escape(text), SLACK_TEXT_LIMIT),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": section}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(facts)}]},
        ],
    }


def render(format_: WebhookFormat, event: RolloutEvent) -> tuple[bytes, str]:
    """(body, content type) of one notification."""
    if format_ is WebhookFormat.SLACK:
        payload, content_type = slack_body(event), JSON_CONTENT_TYPE
    elif format_ is WebhookFormat.CLOUDEVENTS:
        payload, content_type = cloudevent(event), CLOUDEVENTS_CONTENT_TYPE
    else:
        payload, content_type = json_body(event), JSON_CONTENT_TYPE
    return json.dumps(payload, ensure_ascii=False).encode(), content_type


def retryable(status: int) -> bool:
    return status in RETRYABLE_STATUSES


def retry_after(value: str | None) -> float | None:
    """Seconds of a Retry-After header in its numeric form (an HTTP date is ignored)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def backoff_delay(attempt: int, base: float, cap: float, hint: float | None = None) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): base doubled per
    attempt, or the receiver's Retry-After; never more than the cap."""
    delay = base * 2 ** (attempt - 1) if hint is None else hint
    return max(0.0, min(delay, cap))
