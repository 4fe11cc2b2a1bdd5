"""Notification vocabulary: webhook settings and the rollout event a notification tells.

Operator-wide (chart values `notifications.*`, read by adapters/notification_settings.py):
every webhook gets the SitsDeployment events its filter selects, as a Slack message, a
plain JSON object or a CloudEvents 1.0 structured-mode body (core/notifications.py builds
them; adapters/notifier.py delivers them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from sits_operator.model.events import EventReason


class WebhookFormat(StrEnum):
    """The body a webhook receives (chart value `notifications.webhooks[].format`)."""

    SLACK = "slack"
    JSON = "json"
    CLOUDEVENTS = "cloudevents"


class NotificationKind(StrEnum):
    """What an event is about; the last part of its CloudEvents type
    (`dev.sits.rollout.<kind>`), and a word a webhook's `events` filter may name."""

    DECISION = "decision"  # an analysis decision (Step, WeightCut, RolledBack, Promoted...)
    PHASE = "phase"  # status.phase changed (PhaseChanged)
    CONDITION = "condition"  # a condition flipped (ReadyFalse, TrafficAppliedFalse...)
    CHILDREN = "children"  # owned objects applied or deleted (Applied, Deleted)


# A webhook without an `events` filter gets these: every decision and every phase change.
DEFAULT_KINDS = frozenset({NotificationKind.DECISION, NotificationKind.PHASE})


class DeliveryResult(StrEnum):
    """Values of sits_operator_notifications_total's `result` label."""

    SENT = "sent"
    FAILED = "failed"  # every attempt failed, or the receiver refused it (4xx)
    DROPPED = "dropped"  # the webhook's queue was full (the oldest goes), or shutdown


@dataclass(frozen=True)
class WebhookSettings:
    name: str
    # The URL and headers may be credentials (a Slack webhook URL is one): kept out of repr.
    url: str = field(repr=False)
    format: WebhookFormat = WebhookFormat.JSON
    # Event reasons (RolledBack, PhaseChanged...) or kinds (decision, phase, condition,
    # children); empty: DEFAULT_KINDS.
    events: frozenset[str] = frozenset()
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class NotificationSettings:
    webhooks: tuple[WebhookSettings, ...] = ()
    # Per webhook: notifications waiting for delivery; when full the oldest is dropped.
    queue_size: int = 256
    timeout_seconds: float = 5.0  # one HTTP request
    max_attempts: int = 5
    backoff_seconds: float = 1.0  # before the 2nd attempt; doubled each time
    max_backoff_seconds: float = 30.0
    drain_seconds: float = 3.0  # at shutdown, the most time given to what is queued


@dataclass(frozen=True)
class RolloutEvent:
    """One event of a SitsDeployment, as every notification format tells it."""

    namespace: str
    name: str
    uid: str
    kind: NotificationKind
    severity: str  # the Kubernetes event type: Normal | Warning
    reason: EventReason  # the Kubernetes event's: RolledBack, Step, PhaseChanged...
    message: str
    time: str  # RFC 3339, UTC
    id: str  # unique per event: the CloudEvents id, the JSON body's id
    stable: str = ""
    candidate: str = ""
    phase: str = ""  # PhaseChanged: the new phase
    previous_phase: str = ""  # PhaseChanged: the phase before
