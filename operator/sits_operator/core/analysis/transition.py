"""The plumbing of a decision: its inputs (Context) and one move of the rollout state
machine (Transition: the new state, the action, the reason, the events); the named moves
are in transitions.py, and `to_decision` makes the Decision from the last one.

Every state change goes through `transition`, so the rules "a change of weights or phase
leaves a history entry" and "last_action/last_reason say what happened" hold in one
place instead of in every branch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sits_operator.core.analysis.schedule import period_index
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Decision,
    DecisionAction,
    EventNote,
    HistoryEntry,
    RolloutPlan,
    RuleSamples,
    RuleVerdict,
)
from sits_operator.model.events import EventReason
from sits_operator.model.policy import Policy

TERMINAL = (AnalysisPhase.SUCCEEDED, AnalysisPhase.ROLLED_BACK)


@dataclass(frozen=True)
class Context:
    """Everything one call of `decide` knows besides the state it updates."""

    policy: Policy
    plan: RolloutPlan
    observations: tuple[RuleSamples, ...]
    current: dict[str, int]  # weights traffic has now (read back, else last decided)
    now: float
    observed: dict[str, int]  # exactly what the router reported ({} when it knows nothing)
    phase: float = 0.0  # seconds this deployment's periods start after the grid (schedule.py)

    @property
    def period(self) -> int:
        """Evaluation period number: two calls in one period count it once."""
        return period_index(self.now, self.policy.interval_seconds, self.phase)


@dataclass(frozen=True)
class Transition:
    """A move of the state machine, before the Decision adds weights and verdicts."""

    state: AnalysisState
    action: DecisionAction
    reason: str
    events: tuple[EventNote, ...] = ()

    def then(self, later: Transition) -> Transition:
        """Two transitions in one call (e.g. a restart, then a command): the later one speaks."""
        return Transition(later.state, later.action, later.reason, (*self.events, *later.events))

    def after_events(self, events: tuple[EventNote, ...]) -> Transition:
        return replace(self, events=(*events, *self.events))


def warning(reason: EventReason, message: str) -> EventNote:
    return EventNote("Warning", reason, message)


def normal(reason: EventReason, message: str) -> EventNote:
    return EventNote("Normal", reason, message)


def record(
    before: AnalysisState,
    after: AnalysisState,
    now: float,
    action: DecisionAction,
    reason: str,
    *,
    event: EventNote | None = None,
    force: bool = False,
) -> Transition:
    """Stamp `after` with the action; add history when weights or phase moved (or forced)."""
    after = replace(after, last_action=action, last_reason=reason)
    if force or after.weights != before.weights or after.phase != before.phase:
        after = after.with_history(HistoryEntry(now, action, reason, dict(after.weights)))
    return Transition(after, action, reason, () if event is None else (event,))


def transition(
    state: AnalysisState,
    now: float,
    action: DecisionAction,
    reason: str,
    *,
    event: EventNote | None = None,
    **changes: Any,
) -> Transition:
    """`record` for the common case: the new state is the old one with a few fields changed."""
    return record(state, replace(state, **changes), now, action, reason, event=event)


def hold(
    state: AnalysisState, reason: str, action: DecisionAction = DecisionAction.HOLD
) -> Transition:
    """Nothing moves; the state only remembers why."""
    return record(state, state, 0.0, action, reason)


def to_decision(
    change: Transition, observed: dict[str, int], verdicts: tuple[RuleVerdict, ...] = ()
) -> Decision:
    """The Decision; weights only when they differ from what the router reported.

    Compared with the raw read-back, so a router that knows nothing yet always gets them.
    """
    weights = change.state.weights
    changed = dict(weights) if weights and weights != observed else None
    return Decision(change.state, change.action, change.reason, changed, verdicts, change.events)
