"""One counted evaluation period: verdicts -> bookkeeping -> at most one action.

Order of precedence in a period: a rule whose breach lasted long enough acts (even during
a Prometheus error, since its own query succeeded); otherwise a candidate's failing
containers hold (they are seen on the pods, so neither an outage nor a data gap may speak
for them); otherwise an error freezes (or pauses);
otherwise missing data holds (then the policy's no-data action); otherwise all-pass
advances (once the step has also lasted spec.rollout.interval); otherwise a young breach
holds.
"""

from __future__ import annotations

import math
from dataclasses import replace

from sits_operator.core.analysis import breaches as breach_rules
from sits_operator.core.analysis.schedule import period_index
from sits_operator.core.analysis.transition import Context, Transition, hold, normal, warning
from sits_operator.core.analysis.transitions import (
    PAUSED,
    advance,
    cut,
    pause,
    rollback,
    succeed,
)
from sits_operator.core.analysis.verdicts import RuleResult
from sits_operator.core.analysis.weights import ABTEST, is_pause_step, pause_duration
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Breach,
    DecisionAction,
    EventNote,
    Verdict,
)
from sits_operator.model.events import EventReason
from sits_operator.model.policy import (
    CONTAINERS_RULE,
    ActionType,
    ErrorAction,
    NoDataAction,
)

Results = tuple[RuleResult, ...]


def bookkeep(ctx: Context, state: AnalysisState, results: Results) -> AnalysisState:
    """Counters after this period: breaches, the pass streak, the error and no-data clocks."""
    verdicts = {r.verdict for r in results}
    passes = state.consecutive_passes
    if Verdict.FAIL in verdicts:
        passes = 0  # a failing period breaks the streak
    elif verdicts <= {Verdict.PASS}:
        passes += 1
    errored = Verdict.ERROR in verdicts
    no_data_since = state.no_data_since
    if not errored:  # an outage neither starts nor clears the no-data clock
        no_data_since = _since(no_data_since, ctx.now) if _missing(results) else None
    return replace(
        state,
        breaches=breach_rules.updated(state.breaches, results, ctx.now),
        consecutive_passes=passes,
        error_since=_since(state.error_since, ctx.now) if errored else None,
        no_data_since=no_data_since,
    )


def _since(started: float | None, now: float) -> float:
    return now if started is None else started


def _missing(results: Results) -> bool:
    """Any candidate without usable data for any rule (even when another one fails)."""
    return any(j.verdict is Verdict.NO_DATA for r in results for j in r.candidates)


def error_events(
    before: AnalysisState, after: AnalysisState, results: Results
) -> tuple[EventNote, ...]:
    """An event when queries start failing and one when they recover; not every period."""
    if before.error_since is None and after.error_since is not None:
        return (warning(EventReason.ANALYSIS_ERROR, f"SLI queries failed: {_errors(results)}"),)
    if before.error_since is not None and after.error_since is None:
        return (normal(EventReason.ANALYSIS_RECOVERED, "SLI queries answer again"),)
    return ()


def act(ctx: Context, before: AnalysisState, state: AnalysisState, results: Results) -> Transition:
    """The one action of this period (see the module docstring for the precedence)."""
    chosen = breach_rules.pick(results, state.breaches, ctx.now)
    verdicts = {r.verdict for r in results}
    if chosen is not None:
        return _rule_action(ctx, state, chosen)
    if _containers_failing(results):  # seen on the pods: no outage or data gap hides it
        return hold(state, f"breach not yet long enough: {_failing(ctx, state, results)}")
    if Verdict.ERROR in verdicts:
        return _on_error(ctx, state, results)
    if _missing(results):
        return _on_no_data(ctx, before, state, results)
    if verdicts <= {Verdict.PASS}:
        return _on_pass(ctx, state)
    return hold(state, f"breach not yet long enough: {_failing(ctx, state, results)}")


def _rule_action(ctx: Context, state: AnalysisState, result: RuleResult) -> Transition:
    rule = result.rule
    said = breach_rules.describe(result, state.breaches.get(rule.name, Breach()), ctx.now)
    kind = rule.action.type
    if kind is ActionType.ROLLBACK:
        return rollback(ctx, state, f"rolled back: {said}")
    if kind is ActionType.SET_WEIGHT:
        limit = rule.action.weight or 0
        return cut(ctx, state, rule.name, limit, f"candidate weight cut to {limit} %: {said}")
    if kind is ActionType.PAUSE and state.phase is not PAUSED:
        return pause(ctx, state, f"paused: {said}")
    return hold(state, f"holding: {said}")


def _on_error(ctx: Context, state: AnalysisState, results: Results) -> Transition:
    """Freeze: never step, promote or roll back on an outage; pause if the policy says so."""
    errors = _errors(results)
    if ctx.policy.on_error is ErrorAction.PAUSE and state.phase is not PAUSED:
        return pause(ctx, state, f"paused on SLI query errors: {errors}")
    return hold(state, f"frozen on SLI query errors: {errors}", action=DecisionAction.FREEZE)


def _on_no_data(
    ctx: Context, before: AnalysisState, state: AnalysisState, results: Results
) -> Transition:
    """Hold while data is missing; after noData.after, do what the policy says."""
    since = _since(state.no_data_since, ctx.now)
    waited = ctx.now - since
    missing = ", ".join(
        r.rule.name for r in results if any(j.verdict is Verdict.NO_DATA for j in r.candidates)
    )
    limit = ctx.policy.no_data_after_seconds
    if waited < limit:
        return hold(state, f"no data for {missing} ({waited:g}s of {limit:g}s): holding")
    action = ctx.policy.no_data_action
    reason = f"no data for {missing} for {waited:g}s (noData.action {action.value})"
    if action is NoDataAction.ROLLBACK:
        return rollback(ctx, state, f"rolled back: {reason}")
    if action is NoDataAction.PAUSE and state.phase is not PAUSED:
        return pause(ctx, state, f"paused: {reason}")
    held = hold(state, f"holding: {reason}")
    first = before.last_evaluated_at is None or before.last_evaluated_at - since < limit
    return held.after_events((warning(EventReason.NO_DATA, reason),)) if first else held


def _on_pass(ctx: Context, state: AnalysisState) -> Transition:
    """All SLIs pass: count toward the next step, or finish a promotion."""
    if state.phase is PAUSED:
        return hold(state, f"all SLIs pass; paused ({state.paused_reason}) until sits.dev/resume")
    if state.phase is AnalysisPhase.PROMOTING:
        return succeed(ctx, state, "promoted: all SLIs pass at full traffic")
    if ctx.plan.strategy == ABTEST:
        return hold(state, "all SLIs pass; abTest holds its split until promoted or aborted")
    if is_pause_step(ctx.plan, state.step_index):
        return _on_pause_step(ctx, state)
    need = ctx.policy.promotion_consecutive_passes
    if state.consecutive_passes < need:
        return hold(state, f"all SLIs pass ({state.consecutive_passes} of {need} periods)")
    left = step_periods_left(ctx, state)
    if left > 0:
        interval = f"{ctx.plan.step_seconds:g}s"
        return hold(
            state,
            f"all SLIs passed {need} consecutive periods; a step lasts at least {interval}"
            f" (spec.rollout.interval): {left} more period{'s' if left > 1 else ''}",
        )
    return advance(ctx, state, f"all SLIs passed {need} consecutive periods")


def step_periods_left(ctx: Context, state: AnalysisState) -> int:
    """Periods the current step must still last for spec.rollout.interval (0: none).

    Counted in whole policy periods, the unit every other clock of the analysis uses, so
    that an evaluation a moment early (timer jitter) never costs one more period: a step
    entered in period p may advance from period p + ceil(interval / policy interval).
    """
    if ctx.plan.step_seconds is None or state.step_started_at is None:
        return 0
    period_seconds = max(ctx.policy.interval_seconds, 1e-9)
    periods = math.ceil(ctx.plan.step_seconds / period_seconds - 1e-9)
    entered = period_index(state.step_started_at, period_seconds, ctx.phase)
    return max(0, entered + periods - ctx.period)


def _on_pause_step(ctx: Context, state: AnalysisState) -> Transition:
    """A timed pause step ends after its duration (on a healthy period); else wait."""
    index = state.step_index
    seconds = pause_duration(ctx.plan, index)
    if seconds is None:
        return hold(state, f"step {index}: paused until sits.dev/resume")
    elapsed = ctx.now - _since(state.step_started_at, ctx.now)
    if elapsed >= seconds:
        return advance(ctx, state, f"step {index}: pause of {seconds:g}s over")
    return hold(state, f"step {index}: pause, {seconds - elapsed:g}s left")


def _containers_failing(results: Results) -> bool:
    return any(r.rule.name == CONTAINERS_RULE and r.verdict is Verdict.FAIL for r in results)


def _failing(ctx: Context, state: AnalysisState, results: Results) -> str:
    return "; ".join(
        breach_rules.describe(r, state.breaches.get(r.rule.name, Breach()), ctx.now)
        for r in results
        if r.verdict is Verdict.FAIL
    )


def _errors(results: Results) -> str:
    return "; ".join(
        f"{r.rule.name}: {r.error or 'rule cannot be judged'}"
        for r in results
        if r.verdict is Verdict.ERROR
    )
