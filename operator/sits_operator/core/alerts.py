"""What an Alertmanager webhook call asks for, and whether the operator may act on it.

A firing alert whose labels name a SitsDeployment (`namespace` and `sits_deployment`)
asks for that rollout's candidate to be rolled back (the `sits.dev/abort` command, with a
value naming the alert, so Alertmanager's repeats of one alert are one command). An alert
that also names a `variant` is acted on only when that variant is a candidate of a
rollout under analysis: an SLO alert on the stable variant, or on a candidate already
rolled back or promoted, must not roll back whatever else is running (the receiver is
reachable by whoever can send alerts; it never acts beyond what the alert is about).

Pure: the adapter (adapters/alert_webhook.py) reads the object and writes the command.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sits_operator.model.spec import Role
from sits_operator.model.status import ANALYSING


@dataclass(frozen=True)
class AlertTarget:
    namespace: str
    name: str
    alert: str
    #: The command's value: the alert's name and identity (fingerprint or start time).
    value: str
    #: The variant the alert is about ("" when its labels name none).
    variant: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class AlertAction(StrEnum):
    """What the receiver does with one firing alert."""

    ROLL_BACK = "rollBack"
    IGNORE = "ignore"
    NOT_FOUND = "notFound"


def targets_of(payload: Any) -> list[AlertTarget]:
    """Firing alerts that name a SitsDeployment; ValueError when the payload is malformed."""
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        raise ValueError("not an Alertmanager webhook payload: no 'alerts' list")
    found = []
    for alert in payload["alerts"]:
        if not isinstance(alert, dict) or not isinstance(alert.get("labels"), dict):
            raise ValueError("every alert needs a 'labels' object")
        labels = alert["labels"]
        if alert.get("status", "firing") != "firing":
            continue
        name, namespace = labels.get("sits_deployment"), labels.get("namespace")
        if not isinstance(name, str) or not isinstance(namespace, str):
            continue
        alertname = str(labels.get("alertname", "unnamed"))
        identity = str(alert.get("fingerprint") or alert.get("startsAt") or "")
        variant = labels.get("variant")
        found.append(
            AlertTarget(
                namespace,
                name,
                alertname,
                f"alert:{alertname}:{identity}",
                variant if isinstance(variant, str) else "",
            )
        )
    return found


def judge(target: AlertTarget, body: Mapping[str, Any] | None) -> tuple[AlertAction, str]:
    """(action, why) for one alert, given the SitsDeployment it names (None: not found)."""
    if body is None:
        return AlertAction.NOT_FOUND, f"no SitsDeployment {target.key}"
    if not target.variant:
        return AlertAction.ROLL_BACK, f"alert {target.alert} names {target.key}"
    status = body.get("status") or {}
    rows = {str(row.get("name")): row for row in status.get("variants") or []}
    row = rows.get(target.variant)
    if row is None:
        return AlertAction.IGNORE, f"{target.key} has no variant {target.variant!r}"
    if row.get("role") != Role.CANDIDATE.value:
        return AlertAction.IGNORE, (
            f"variant {target.variant} of {target.key} is {row.get('role') or 'not a candidate'}:"
            " an alert rolls back candidates only"
        )
    phase = str(status.get("phase") or "")
    if phase not in ANALYSING:
        return AlertAction.IGNORE, (
            f"{target.key} is {phase or 'not analysing'}:"
            f" no rollout of {target.variant} to roll back"
        )
    return (
        AlertAction.ROLL_BACK,
        f"alert {target.alert} names candidate {target.variant} of {target.key}",
    )


def authorized(header: str | None, token: str) -> bool:
    """`Authorization: Bearer <token>` (what Alertmanager's http_config.authorization sends),
    compared in constant time; an empty configured token never matches."""
    if not token or not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())
