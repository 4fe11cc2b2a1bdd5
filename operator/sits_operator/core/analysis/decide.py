"""`decide`: one evaluation of one SitsDeployment, from observations to a Decision.

The order matters and is the whole contract:
1. a new candidate revision restarts the analysis (docs/architecture.md section 5); a
   spec that only states a terminal outcome (the promoted candidate named stable, a
   loser removed) is adopted instead (see `identity`);
2. new manual commands act, each acknowledged once;
3. terminal phases (Succeeded, RolledBack) only scale their losers down after the delay
   (see `scaledown`);
4. a period already counted is not counted again (an operator restart is harmless);
5. otherwise the period is judged: the pods first (a candidate past its progress deadline
   is rolled back; one starting, or beside a failing stable, holds uncounted; its failing
   containers fail the built-in `containers` rule: see `readiness`), then it is counted
   (see `period`).
Steps 1-2 do not count the period; step 1 (and retry) marks it evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sits_operator.core.analysis import period, readiness, scaledown
from sits_operator.core.analysis.commands import apply_commands
from sits_operator.core.analysis.identity import SpecChange, describe_commit, spec_change
from sits_operator.core.analysis.transition import (
    TERMINAL,
    Context,
    Transition,
    normal,
    to_decision,
    transition,
)
from sits_operator.core.analysis.transitions import adopt, restart, scale_down
from sits_operator.core.analysis.verdicts import judge_rules, rows
from sits_operator.core.analysis.weights import candidate_weight, current_weights, position_for
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Command,
    Decision,
    DecisionAction,
    RolloutPlan,
    RuleSamples,
)
from sits_operator.model.events import EventReason
from sits_operator.model.policy import Policy


def decide(
    *,
    policy: Policy,
    plan: RolloutPlan,
    state: AnalysisState,
    observations: tuple[RuleSamples, ...],
    observed_weights: Mapping[str, int],
    commands: Mapping[Command, str],
    now: float,
    phase: float = 0.0,
) -> Decision:
    """The whole next analysis state and what to do to traffic, from one observation.

    `phase`: where this SitsDeployment's periods start within the interval
    (core/analysis/schedule.py)."""
    current = current_weights(plan, observed_weights, state)
    ctx = Context(policy, plan, observations, current, now, dict(observed_weights), phase)
    opening = _open(ctx, state, commands)
    if opening is not None:
        return to_decision(opening, ctx.observed)
    if state.phase in TERMINAL:
        return _terminal(ctx, state)
    if state.last_period == ctx.period:
        return Decision(state, DecisionAction.NONE, f"period {ctx.period} already evaluated")
    return _evaluate(ctx, _trusted(ctx, state))


def _open(ctx: Context, state: AnalysisState, commands: Mapping[Command, str]) -> Transition | None:
    """Restart on a new revision (or adopt a committed outcome), then apply new commands;
    None when neither happened."""
    started: Transition | None = None
    change = spec_change(state, ctx.plan.revision_key)
    if change is SpecChange.NEW:
        started = restart(ctx, state, *_restart_words(ctx, state))
    elif change is SpecChange.COMMITTED:
        started = adopt(ctx, state, *_adopt_words(ctx, state))
    base = started.state if started is not None else _trusted(ctx, state)
    acted = apply_commands(ctx, base, commands)
    if started is None or acted is None:
        return started or acted
    return started.then(acted)


def _restart_words(ctx: Context, state: AnalysisState) -> tuple[str, EventReason]:
    revision = ctx.plan.revision_key
    if not state.revision_key:
        return f"analysis started for revision {revision}", EventReason.ANALYSIS_STARTED
    return f"new revision {revision}: analysis restarted", EventReason.ANALYSIS_RESTARTED


def _adopt_words(ctx: Context, state: AnalysisState) -> tuple[str, EventReason]:
    if state.phase is AnalysisPhase.SUCCEEDED:
        outcome, event_reason = "promotion", EventReason.PROMOTION_COMMITTED
    else:
        outcome, event_reason = "rollback", EventReason.ROLLBACK_COMMITTED
    said = describe_commit(state, ctx.plan.revision_key)
    reason = f"{said}: the {outcome} is committed; analysis, weights and pods unchanged"
    return reason, event_reason


def _trusted(ctx: Context, state: AnalysisState) -> AnalysisState:
    """Observed weights are the truth while the rollout moves; terminal weights are kept.

    When traffic stands elsewhere than we left it (someone edited the route), the canary
    continues from there, as Flagger does: the next step is the first one heavier.
    """
    if state.phase in TERMINAL:
        return state
    moved = candidate_weight(ctx.plan, ctx.current) != candidate_weight(ctx.plan, state.weights)
    if not state.weights or not moved or ctx.plan.strategy == "abTest":
        return replace(state, weights=ctx.current)
    position = position_for(ctx.plan, candidate_weight(ctx.plan, ctx.current))
    return replace(state, weights=ctx.current, step_index=position)


def _terminal(ctx: Context, state: AnalysisState) -> Decision:
    """Succeeded and RolledBack wait for a new revision or retry; drifted weights are re-set,
    and the variants left without traffic are scaled down once the delay has passed."""
    losers = scaledown.due(state, ctx.plan.scale_down_seconds, ctx.now)
    if losers:
        return to_decision(scale_down(ctx, state, losers), ctx.observed)
    reason = f"{state.phase.value}: waiting for a new revision or sits.dev/retry"
    return to_decision(Transition(state, DecisionAction.NONE, reason), ctx.observed)


def _evaluate(ctx: Context, state: AnalysisState) -> Decision:
    """Judge and count this period, then take at most one action.

    The pods speak before the SLIs (see `readiness`): a candidate past its progress
    deadline is rolled back, one that is starting or beside a failing stable holds without
    counting, and a candidate's failing containers fail the built-in `containers` rule.
    """
    results = judge_rules(ctx.policy, ctx.plan, ctx.observations)
    results += readiness.containers_results(ctx, state)
    verdicts = rows(results)
    marked = replace(
        state,
        last_period=ctx.period,
        last_evaluated_at=ctx.now,
        unready_since=readiness.unready_since(ctx, state),
    )
    if state.phase is AnalysisPhase.DEGRADED:
        reason = "analysis possible again: back to Progressing (this period not counted)"
        event = normal(EventReason.RESUMED, reason)
        back = transition(
            marked,
            ctx.now,
            DecisionAction.RESUME,
            reason,
            event=event,
            phase=AnalysisPhase.PROGRESSING,
        )
        return to_decision(back, ctx.observed, verdicts)
    waiting = readiness.gate(ctx, marked)
    if waiting is not None:
        return to_decision(waiting, ctx.observed, verdicts)
    counted = period.bookkeep(ctx, marked, results)
    noted = period.error_events(state, counted, results)
    acted = period.act(ctx, state, counted, results).after_events(noted)
    return to_decision(acted, ctx.observed, verdicts)
