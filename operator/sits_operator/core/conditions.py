"""Condition helpers with Kubernetes semantics.

lastTransitionTime changes only when a condition's status flips (as in Argo Rollouts'
conditions helpers), so recomputing status on every reconcile does not churn writes.
"""

from __future__ import annotations

from collections.abc import Iterable

from sits_operator.model.status import Condition


def set_condition(
    existing: Iterable[Condition],
    *,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: str,
    generation: int,
) -> list[Condition]:
    """Return the list with one condition set; keep the old transition time if unchanged."""
    status_text = "True" if status else "False"
    kept = [c for c in existing if c.type != type_]
    previous = next((c for c in existing if c.type == type_), None)
    since = (
        previous.last_transition_time
        if previous is not None and previous.status == status_text
        else now
    )
    updated = Condition(type_, status_text, reason, message, since, generation)
    return sorted([*kept, updated], key=lambda c: c.type)


def find(conditions: Iterable[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def flipped(before: Iterable[Condition], after: Iterable[Condition]) -> list[Condition]:
    """Conditions whose status differs from before (or are new): each deserves an event."""
    old = {c.type: c.status for c in before}
    return [c for c in after if old.get(c.type) != c.status]
