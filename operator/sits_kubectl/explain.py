"""`kubectl sits explain`: why the last decision was taken and what the next one needs.

Everything comes from what the operator stored (`status.analysis`: the last action and
reason, counters, the period; `status.slis`: the numbers) and the SitsPolicy it names
(the rules' thresholds, durations and actions). Nothing is re-judged here: the operator's
reason says what it decided, this screen adds which rule of which policy that was, the
numbers and the counters behind it, and what would move the rollout next.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from sits_kubectl.text import plural
from sits_kubectl.view import (
    RolloutView,
    SliRow,
    action_text,
    breach_text,
    candidate_values,
)
from sits_operator.model.analysis import AnalysisState, Command, DecisionAction, command_annotation
from sits_operator.model.durations import format_duration
from sits_operator.model.policy import Policy, Rule
from sits_operator.model.status import Phase


class Trigger:
    """What the last decision followed: the kinds of `Cause.kind`."""

    RULE = "rule"
    COMMAND = "command"
    ERRORS = "onError"
    NO_DATA = "noData"
    PROMOTION = "promotion"
    NONE = "none"


@dataclass(frozen=True)
class Cause:
    kind: str
    text: str
    rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class Period:
    number: int
    start: float
    end: float


@dataclass(frozen=True)
class Explanation:
    name: str
    namespace: str
    phase: str
    message: str
    action: DecisionAction | None
    reason: str
    decided_at: float | None
    evaluated_at: float | None
    period: Period | None
    policy: str
    interval: float | None
    cause: Cause
    numbers: tuple[SliRow, ...]
    candidate_values: str
    counters: tuple[str, ...]
    next_steps: tuple[str, ...]
    notes: tuple[str, ...]


def explain(view: RolloutView) -> Explanation:
    state, policy = view.state, view.policy
    decided_at = _decided_at(state)
    interval = policy.interval_seconds if policy else None
    cause = _cause(state, policy)
    numbers = tuple(row for v in view.variants for row in v.slis)
    if cause.rules:
        slis = {rule.sli for rule in cause.rules}
        numbers = tuple(row for row in numbers if row.sli in slis) or numbers
    return Explanation(
        name=view.name,
        namespace=view.namespace,
        phase=view.phase,
        message=view.message,
        action=state.last_action,
        reason=state.last_reason,
        decided_at=decided_at,
        evaluated_at=state.last_evaluated_at,
        period=_period(decided_at, interval),
        policy=view.policy_name,
        interval=interval,
        cause=cause,
        numbers=numbers,
        candidate_values=candidate_values(view),
        counters=counters(state, policy),
        next_steps=next_steps(view),
        notes=view.notes,
    )


def _decided_at(state: AnalysisState) -> float | None:
    """When the last decision was taken: its history entry when it moved something (a
    hold leaves none), else the evaluation that found it."""
    last = state.history[-1] if state.history else None
    if last is not None and (last.action, last.reason) == (state.last_action, state.last_reason):
        return last.at
    return state.last_evaluated_at


def _period(at: float | None, interval: float | None) -> Period | None:
    """The policy period the decision fell in: floor(at / interval), the operator's count."""
    if at is None or not interval:
        return None
    number = math.floor(at / interval)
    return Period(number, number * interval, (number + 1) * interval)


def _cause(state: AnalysisState, policy: Policy | None) -> Cause:
    """Which rule (or command, or policy setting) the last decision followed."""
    reason = state.last_reason
    for command in Command:
        key = command_annotation(command)
        if f"{key}=" in reason:
            value = state.acknowledged.get(command.value, "")
            text = f"the annotation {key}={value} (set by hand or by an alert)"
            return Cause(Trigger.COMMAND, text)
    rules = tuple(r for r in policy.rules if f"{r.name}:" in reason) if policy else ()
    if rules:
        text = "; ".join(rule_text(r, policy) for r in rules if policy)
        return Cause(Trigger.RULE, text, rules)
    own = [name for name in state.breaches if f"{name}:" in reason]
    if own:
        named = f"SitsPolicy {policy.name}" if policy else "the policy"
        return Cause(Trigger.RULE, f"{', '.join(own)}: the operator's own rule, not one of {named}")
    if state.error_since is not None and policy is not None:
        return Cause(Trigger.ERRORS, f"onError.action {policy.on_error.value}: SLI queries fail")
    if state.no_data_since is not None and policy is not None:
        after = format_duration(policy.no_data_after_seconds)
        return Cause(
            Trigger.NO_DATA,
            f"noData: too few requests or no series (minRequests {policy.min_requests}); "
            f"after {after} noData.action {policy.no_data_action.value}",
        )
    if policy is not None and "SLIs pass" in reason:
        need = policy.promotion_consecutive_passes
        return Cause(
            Trigger.PROMOTION,
            f"promotion.consecutivePasses {need}: every rule passing {need} periods in a row"
            " moves the canary one step",
        )
    return Cause(Trigger.NONE, "no rule of the policy: see the reason")


def rule_text(rule: Rule, policy: Policy) -> str:
    """ "success-rate of SitsPolicy sits2026: success_rate_5m < 0.95 for 2 periods -> rollback
    (5m window, at least 20 requests)"."""
    window = format_duration(rule.window_seconds)
    return (
        f"{rule.name} of SitsPolicy {policy.name}: {rule.sli} {breach_text(rule)} "
        f"({window} window, at least {policy.min_requests_for(rule)} requests)"
    )


def counters(state: AnalysisState, policy: Policy | None) -> tuple[str, ...]:
    """The bookkeeping the next decision depends on, each against its limit."""
    last = state.last_evaluated_at or 0.0
    lines = list(_policy_counters(state, policy, last)) if policy is not None else []
    known = {rule.name for rule in policy.rules} if policy else set()
    lines += [
        f"{name}: failing {plural(b.periods, 'period')}"
        for name, b in state.breaches.items()
        if name not in known  # a rule of the operator's own, or of an older policy
    ]
    if state.no_data_since is not None:
        waited = last - state.no_data_since
        after = f" of {policy.no_data_after_seconds:g}s" if policy else ""
        lines.append(f"no data for {waited:g}s{after}")
    if state.error_since is not None:
        lines.append(f"SLI queries failing for {last - state.error_since:g}s")
    return tuple(lines)


def _policy_counters(state: AnalysisState, policy: Policy, last: float) -> Iterator[str]:
    """The pass streak and each rule of the policy against what it needs to act."""
    need = policy.promotion_consecutive_passes
    yield (
        f"passing streak: {state.consecutive_passes} of {need} consecutive periods"
        " (promotion.consecutivePasses)"
    )
    for rule in policy.rules:
        breach = state.breaches.get(rule.name)
        if breach is None:
            yield f"{rule.name}: not failing"
        elif rule.for_seconds is not None:
            held = last - (breach.since if breach.since is not None else last)
            yield (
                f"{rule.name}: failing for {held:g}s of {rule.for_seconds:g}s -> "
                f"{action_text(rule)}"
            )
        else:
            limit = plural(rule.for_periods or 1, "period")
            yield f"{rule.name}: failing {breach.periods} of {limit} -> {action_text(rule)}"


def next_steps(view: RolloutView) -> tuple[str, ...]:
    """What moves the rollout from here, with the command that does it by hand."""
    target = f"{view.name} -n {view.namespace}"
    operator = (f"the operator says: {view.message}",) if view.message else ()
    if not view.state.history and not view.state.last_reason:
        return (*operator, "no analysis has run yet (see the Analysis condition in `get`)")
    by_phase = {
        Phase.ROLLED_BACK: (
            "stays RolledBack until a variant gets a new revision, or until "
            f"`kubectl sits retry {target}` starts the analysis over",
        ),
        Phase.SUCCEEDED: (
            "done: the candidates serve all traffic; a new revision starts the next rollout",
        ),
        Phase.PAUSED: (
            f"`kubectl sits resume {target}` continues; rules that roll back still act",
        ),
        Phase.PROMOTING: ("one more period with every rule passing at full traffic: Succeeded",),
    }
    steps: tuple[str, ...] = by_phase.get(Phase(view.phase), ()) if view.phase in set(Phase) else ()
    if not steps:
        steps = _progressing(view)
    return (*operator, *steps)


def _progressing(view: RolloutView) -> tuple[str, ...]:
    state, policy = view.state, view.policy
    target = f"{view.name} -n {view.namespace}"
    steps = []
    if policy is not None and not state.breaches and state.no_data_since is None:
        left = max(0, policy.promotion_consecutive_passes - state.consecutive_passes)
        if left:
            steps.append(f"{plural(left, 'more passing period')} of every rule, then the next step")
    if state.breaches:
        steps.append("one passing period resets a failing rule's count")
    steps.append(f"by hand: `kubectl sits promote|abort|pause {target}`")
    return tuple(steps)
