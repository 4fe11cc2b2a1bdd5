"""What an analysed rollout waits for, in words: `status.message` and the Analysis condition.

A user (or Argo CD, or an alert) reading `kubectl get sitsd -o wide` must learn from the
message alone why nothing moves: "step 2 of 4 at 40 %: 1 of 3 passing periods before
step 3", "waiting for data: v2 has 3 of 20 requests in the 5m window (success-rate)".
Everything here is computed from the stored analysis state (and, for the data gaps, the
samples of the evaluation that found them), never from the clock of the pass: between two
evaluations the words stay the same, so an unchanged status is still not rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable

from sits_operator.core.analysis.verdicts import usable
from sits_operator.core.analysis.weights import (
    ABTEST,
    candidate_weight,
    is_pause_step,
    pause_duration,
)
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Command,
    Decision,
    DecisionAction,
    RolloutPlan,
    RuleSamples,
    Sample,
    Verdict,
    command_annotation,
)
from sits_operator.model.durations import format_duration
from sits_operator.model.policy import CONTAINERS_RULE, CompareTo, Policy, Rule
from sits_operator.model.status import ConditionReason, Phase, RolloutSummary

RESUME = command_annotation(Command.RESUME)
AnalysisCondition = tuple[bool, str, str]


def span(seconds: float) -> str:
    """A whole number of seconds the way the CRDs write durations ("40s", "10m")."""
    return format_duration(max(0, round(seconds)))


def summarize(state: AnalysisState, plan: RolloutPlan, policy: Policy) -> RolloutSummary:
    """Where the rollout stands and what its next move waits for."""
    phase = Phase(state.phase.value)
    if state.phase is AnalysisPhase.ROLLED_BACK:
        why = _strip(_last_reason(state, DecisionAction.ROLLBACK), "rolled back: ")
        where = f"rolled back: all traffic on {plan.stable}"
        return RolloutSummary(phase, where, f"{why}; waiting for a new revision or sits.dev/retry")
    if state.phase is AnalysisPhase.SUCCEEDED:
        where = f"succeeded: all traffic on {', '.join(plan.candidates)}"
        return RolloutSummary(phase, where, _last_reason(state, DecisionAction.PROMOTE))
    if state.phase is AnalysisPhase.DEGRADED:
        return RolloutSummary(phase, "analysis impossible", state.last_reason)
    if state.phase is AnalysisPhase.PAUSED:
        why = _strip(state.paused_reason or state.last_reason, "paused: ")
        where = f"paused at {_position(state, plan)}"
        return RolloutSummary(phase, where, f"{why}; waiting for {RESUME}")
    if state.phase is AnalysisPhase.PROMOTING:
        waits = (
            _obstacle(state, plan, policy) or "one passing period at full traffic before Succeeded"
        )
        return RolloutSummary(phase, "promoting: candidates at 100 %", waits)
    return RolloutSummary(phase, _position(state, plan), _progress(state, plan, policy))


def pending_summary(policy: Policy) -> RolloutSummary:
    """A new revision that no evaluation has seen yet (it starts at the next period)."""
    every = span(policy.interval_seconds)
    return RolloutSummary(
        Phase.PROGRESSING, "new revision", f"the analysis starts within one period ({every})"
    )


def _position(state: AnalysisState, plan: RolloutPlan) -> str:
    """Where traffic stands: "step 2 of 4 at 40 %" (1-based, as people count), or the split."""
    weight = candidate_weight(plan, state.weights)
    if plan.strategy == ABTEST:
        split = ", ".join(f"{name} {share} %" for name, share in state.weights.items())
        return f"A/B test at {split}" if split else "A/B test"
    total = len(plan.step_weights)
    if total == 0:
        return f"candidates at {weight} %"
    if state.step_index < 0:
        return f"before step 1 of {total}, candidates at {weight} %"
    index = min(state.step_index, total - 1)
    pause = " (pause)" if is_pause_step(plan, index) else ""
    return f"step {index + 1} of {total}{pause} at {weight} %"


def _progress(state: AnalysisState, plan: RolloutPlan, policy: Policy) -> str:
    obstacle = _obstacle(state, plan, policy)
    if obstacle:
        return obstacle
    if plan.strategy == ABTEST:
        return "all SLIs pass; the split holds until sits.dev/promote or sits.dev/abort"
    index = state.step_index
    if is_pause_step(plan, index):
        seconds = pause_duration(plan, index)
        if seconds is None:
            return f"a pause step: waiting for {RESUME}"
        left = seconds - (_last(state) - (state.step_started_at or _last(state)))
        return f"a pause step: {span(left)} of {span(seconds)} left"
    need = policy.promotion_consecutive_passes
    after = f"step {index + 2}" if index + 1 < len(plan.step_weights) else "promotion"
    return f"{state.consecutive_passes} of {need} passing periods before {after}"


def _obstacle(state: AnalysisState, plan: RolloutPlan, policy: Policy) -> str:
    """What holds the rollout before it can count a passing period; "" when nothing."""
    containers = policy.containers_rule
    if containers.name in state.breaches:  # the pods speak before the SLIs
        return _breach(containers, state)
    if state.unready_since is not None:
        unready = span(_last(state) - state.unready_since)
        deadline = span(plan.progress_deadline_seconds)
        names = ", ".join(plan.unready) or "candidates"
        return f"{names} without a ready pod for {unready} (progress deadline {deadline})"
    if state.error_since is not None:
        return f"frozen for {span(_last(state) - state.error_since)} on SLI query errors"
    if state.no_data_since is not None:
        waited, limit = _last(state) - state.no_data_since, policy.no_data_after_seconds
        action = policy.no_data_action.value
        if waited < limit:
            return f"no data for {span(waited)} of {span(limit)}, then noData.action {action}"
        return f"no data for {span(waited)} (noData.action {action} after {span(limit)})"
    return "; ".join(_breach(rule, state) for rule in policy.rules if rule.name in state.breaches)


def _breach(rule: Rule, state: AnalysisState) -> str:
    breach = state.breaches[rule.name]
    action = rule.action.type.value
    if rule.for_seconds is not None:
        held = _last(state) - (breach.since if breach.since is not None else _last(state))
        return f"{rule.name} failing for {span(held)} of {span(rule.for_seconds)} ({action})"
    need = rule.for_periods or 1
    return f"{rule.name} failing for {breach.periods} of {need} periods ({action})"


def _last(state: AnalysisState) -> float:
    return state.last_evaluated_at or 0.0


def _last_reason(state: AnalysisState, action: DecisionAction) -> str:
    """The reason of the latest history entry of `action` (later acknowledgements, e.g. an
    ignored abort, overwrite last_reason but not what the rollout is in)."""
    entry = next((h for h in reversed(state.history) if h.action is action), None)
    return entry.reason if entry is not None else state.last_reason


def _strip(text: str, prefix: str) -> str:
    return text[len(prefix) :] if text.startswith(prefix) else text


# ------------------------------------------------------------------ the Analysis condition


def analysis_condition(
    decision: Decision,
    plan: RolloutPlan,
    policy: Policy,
    observations: tuple[RuleSamples, ...],
) -> AnalysisCondition | None:
    """(healthy, reason, message) of the Analysis condition after one evaluation.

    None when the evaluation judged nothing and did nothing (a period already counted, a
    command ignored): the condition then keeps what the last judgement found.
    """
    if not decision.verdicts and not decision.events:
        return None
    mine = [v for v in decision.verdicts if v.variant in plan.candidates]
    if any(v.rule == CONTAINERS_RULE and v.verdict is Verdict.FAIL for v in mine):
        # The pods speak before the SLIs, which a candidate that cannot run never has.
        return False, ConditionReason.CONTAINER_FAILING, decision.reason
    if any(v.verdict is Verdict.ERROR for v in mine):
        failed = query_errors(observations) or "a rule cannot be judged"
        return False, ConditionReason.METRICS_ERROR, f"SLI queries fail: {failed}; rollout frozen"
    if any(v.verdict is Verdict.NO_DATA for v in mine):
        gaps = waiting_for_data(policy, plan, observations)
        if not gaps:  # a rule without any observation at all
            rules = sorted({v.rule for v in mine if v.verdict is Verdict.NO_DATA})
            gaps = f"no samples ({', '.join(rules)})"
        return False, ConditionReason.NO_DATA, f"waiting for data: {gaps}"
    return True, ConditionReason.EVALUATING, decision.reason


def query_errors(observations: Iterable[RuleSamples]) -> str:
    """Each distinct error once, with the rules it failed: one unreachable or misconfigured
    Prometheus fails every rule alike, and the condition should say it once."""
    rules: dict[str, list[str]] = {}
    for o in observations:
        if o.error is not None:
            rules.setdefault(o.error, []).append(o.rule)
    return "; ".join(f"{error} ({', '.join(names)})" for error, names in rules.items())


def waiting_for_data(
    policy: Policy, plan: RolloutPlan, observations: tuple[RuleSamples, ...]
) -> str:
    """Each variant whose sample cannot be judged, and why, grouped over the rules.

    "v2 has 3 of 20 requests in the 5m window (success-rate, latency-p95)": the request
    count is the policy's minimum-traffic count over the rule's window. A rule compared
    with stable also needs stable's sample. "" when every sample needed is usable.
    """
    by_rule = {o.rule: o for o in observations}
    gaps: dict[str, list[str]] = {}
    for rule in policy.rules:
        samples = by_rule.get(rule.name, RuleSamples(rule.name))
        if samples.error is not None:
            continue
        stable = (plan.stable,) if rule.compare_to is CompareTo.STABLE else ()
        for variant in (*plan.candidates, *stable):
            gap = _gap(samples.by_variant.get(variant), variant, rule, policy)
            if gap:
                gaps.setdefault(gap, []).append(rule.name)
    return "; ".join(f"{gap} ({', '.join(rules)})" for gap, rules in gaps.items())


def _gap(sample: Sample | None, variant: str, rule: Rule, policy: Policy) -> str:
    if usable(sample, rule, policy) is not None:
        return ""
    window = format_duration(rule.window_seconds)
    if sample is None:
        return f"no series for {variant} in the {window} window"
    minimum = policy.min_requests_for(rule)
    if sample.requests is not None and sample.requests < minimum:
        count = round(sample.requests)
        return f"{variant} has {count} of {minimum} requests in the {window} window"
    return f"{variant} has no value in the {window} window"
