"""The manual commands as the plugin sets them: annotation, value, confirmation.

The operator acts on each `sits.dev/<command>` annotation once per value (it records the
value in status.analysis.acknowledged), so every invocation writes a new value: the UTC
time to the microsecond. Repeating `kubectl sits retry` then restarts the analysis again,
as a user expects, and the value says when the command was given.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sits_operator.model.analysis import Command, command_annotation

# What the operator does with each (README, "Manual control").
EFFECTS: dict[Command, str] = {
    Command.PROMOTE: "the candidates take all traffic and the rollout is Succeeded",
    Command.ABORT: "all traffic goes back to stable and the rollout is RolledBack",
    Command.PAUSE: "stepping stops (rules that roll back still act) until resume",
    Command.RESUME: "a paused rollout (or a pause step) continues",
    Command.RETRY: "the analysis starts over from the first step",
}


def command_value(now: datetime) -> str:
    """A new value for every invocation: "2026-05-28T20:29:31.123456Z"."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def patch_body(command: Command, value: str) -> dict[str, Any]:
    """A JSON merge patch that sets only this annotation (nothing of spec or status)."""
    return {"metadata": {"annotations": {command_annotation(command): value}}}


def confirmation(command: Command, name: str, namespace: str, stored: Any) -> str:
    """What was set, read back from the apiserver's answer, and what happens next."""
    key = command_annotation(command)
    annotations = ((stored or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(key, "?")
    return (
        f'sitsdeployment "{name}" in namespace "{namespace}": set {key}={value}\n'
        f"The operator acts on it within its next pass: {EFFECTS[command]}.\n"
        f"Follow it with: kubectl sits get {name} -n {namespace} --watch"
    )
