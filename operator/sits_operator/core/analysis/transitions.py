"""The rollout state machine's moves: restart, step, promote, cut, pause, resume, roll back.

Each move is shared by the policy path and the manual commands, so "abort" and a failing
rollback rule leave exactly the same state apart from the reason.
"""

from __future__ import annotations

from dataclasses import replace

from sits_operator.core.analysis.transition import (
    Context,
    Transition,
    hold,
    normal,
    record,
    transition,
    warning,
)
from sits_operator.core.analysis.weights import (
    capped,
    is_pause_step,
    pause_duration,
    position_for,
    promotion_weights,
    rollback_weights,
    start_position,
    variants,
    weights_for,
)
from sits_operator.model.analysis import AnalysisPhase, AnalysisState, DecisionAction
from sits_operator.model.events import EventReason

PROGRESSING = AnalysisPhase.PROGRESSING
PAUSED = AnalysisPhase.PAUSED


def restart(
    ctx: Context, state: AnalysisState, reason: str, event_reason: EventReason
) -> Transition:
    """A fresh analysis: counters gone, weights back to the start, acknowledgements kept.

    The period in which it restarts is marked evaluated and not counted: its samples were
    taken before the new weights (or the new revision) carried traffic.
    """
    weights, index = start_position(ctx.plan)
    fresh = AnalysisState(
        revision_key=ctx.plan.revision_key,
        weights=weights,
        step_index=index,
        step_started_at=ctx.now,
        last_period=ctx.period,
        last_evaluated_at=ctx.now,
        acknowledged=dict(state.acknowledged),
        history=state.history,
        unready_since=None if ctx.plan.candidates_ready else ctx.now,
    )
    event = normal(event_reason, reason)
    return record(state, fresh, ctx.now, DecisionAction.RESTART, reason, event=event, force=True)


def rollback(
    ctx: Context,
    state: AnalysisState,
    reason: str,
    *,
    event_reason: EventReason = EventReason.ROLLED_BACK,
) -> Transition:
    """All traffic to stable; terminal until a new revision or sits.dev/retry.

    Every variant runs again (a variant scaled down after an earlier decision may be the
    one that now takes the traffic); the losers are scaled down after the delay. The
    event's reason may say more than RolledBack (ProgressDeadlineExceeded).
    """
    return transition(
        state,
        ctx.now,
        DecisionAction.ROLLBACK,
        reason,
        event=warning(event_reason, reason),
        phase=AnalysisPhase.ROLLED_BACK,
        weights=rollback_weights(ctx.plan),
        paused_reason="",
        consecutive_passes=0,
        finished_at=ctx.now,
        scaled_down=(),
    )


def succeed(ctx: Context, state: AnalysisState, reason: str) -> Transition:
    """Candidates take all traffic; terminal until a new revision or sits.dev/retry.

    As for rollback, every variant runs again until the scale-down delay has passed.
    """
    return transition(
        state,
        ctx.now,
        DecisionAction.PROMOTE,
        reason,
        event=normal(EventReason.PROMOTED, reason),
        phase=AnalysisPhase.SUCCEEDED,
        weights=promotion_weights(ctx.plan),
        paused_reason="",
        finished_at=ctx.now,
        scaled_down=(),
    )


def adopt(ctx: Context, state: AnalysisState, reason: str, event_reason: EventReason) -> Transition:
    """The spec now states the terminal outcome (core/analysis/identity.py): take its key.

    Phase, counters and every remaining variant's weight stay; variants the spec dropped
    leave the weights (they had none) and the scaled-down list.
    """
    names = variants(ctx.plan)
    return record(
        state,
        replace(
            state,
            revision_key=ctx.plan.revision_key,
            weights={name: state.weights.get(name, 0) for name in names},
            scaled_down=tuple(name for name in state.scaled_down if name in names),
        ),
        ctx.now,
        DecisionAction.ADOPT,
        reason,
        event=normal(event_reason, reason),
        force=True,
    )


def scale_down(ctx: Context, state: AnalysisState, names: tuple[str, ...]) -> Transition:
    """The losers of the terminal decision go to zero replicas; weights stay."""
    delay = f"{ctx.plan.scale_down_seconds:g}s"
    reason = (
        f"{', '.join(names)} scaled to zero replicas {delay} after {state.phase.value}"
        " (spec.rollout.scaleDownDelay), freeing its GPU slices; sits.dev/retry scales it back"
    )
    after = replace(state, scaled_down=(*state.scaled_down, *names))
    return record(
        state,
        after,
        ctx.now,
        DecisionAction.SCALE_DOWN,
        reason,
        event=normal(EventReason.SCALED_DOWN, reason),
        force=True,
    )


def pause(ctx: Context, state: AnalysisState, reason: str, *, by_hand: bool = False) -> Transition:
    """Stop stepping until sits.dev/resume; a policy-made pause is a Warning."""
    paused = EventReason.PAUSED
    event = normal(paused, reason) if by_hand else warning(paused, reason)
    return transition(
        state,
        ctx.now,
        DecisionAction.PAUSE,
        reason,
        event=event,
        phase=PAUSED,
        paused_reason=reason,
    )


def resume(ctx: Context, state: AnalysisState, reason: str) -> Transition:
    """Back to Progressing with a clean slate: no breaches, no pass streak, no no-data clock,
    and the progress deadline counts again from now (as in Argo Rollouts)."""
    return transition(
        state,
        ctx.now,
        DecisionAction.RESUME,
        reason,
        event=normal(EventReason.RESUMED, reason),
        phase=PROGRESSING,
        paused_reason="",
        no_data_since=None,
        breaches={},
        consecutive_passes=0,
        unready_since=None if ctx.plan.candidates_ready else ctx.now,
    )


def cut(ctx: Context, state: AnalysisState, rule: str, limit: int, reason: str) -> Transition:
    """setWeight: candidates down to at most `limit` %, then climb again from there.

    The rule's breach and the pass streak restart either way, so the rule needs a whole new
    sustained breach before it acts again. The next step is the first heavier than `limit`;
    a pause step just before it runs again (a manual gate is never skipped).
    """
    breaches = {k: v for k, v in state.breaches.items() if k != rule}
    calmer = replace(state, breaches=breaches, consecutive_passes=0)
    weights = capped(ctx.plan, state.weights, limit)
    if weights == state.weights:
        return hold(calmer, f"{reason}; candidates already at or below {limit} %")
    phase = PAUSED if state.phase is PAUSED else PROGRESSING
    return transition(
        calmer,
        ctx.now,
        DecisionAction.SET_WEIGHT,
        reason,
        event=warning(EventReason.WEIGHT_CUT, reason),
        weights=weights,
        phase=phase,
        step_index=position_for(ctx.plan, limit),
        step_started_at=ctx.now,
    )


def advance(ctx: Context, state: AnalysisState, why: str) -> Transition:
    """Next step, or Promoting (candidates at 100 %) after the last one."""
    index = state.step_index + 1
    if index >= len(ctx.plan.step_weights):
        return _promoting(ctx, state, why)
    weight = ctx.plan.step_weights[index]
    weights = state.weights if weight is None else weights_for(ctx.plan, weight)
    reason = f"{why}: step {index} ({_step_text(ctx, index)})"
    return transition(
        state,
        ctx.now,
        DecisionAction.STEP,
        reason,
        event=normal(EventReason.STEP, reason),
        step_index=index,
        step_started_at=ctx.now,
        consecutive_passes=0,
        weights=weights,
    )


def _promoting(ctx: Context, state: AnalysisState, why: str) -> Transition:
    """Candidates at 100 %; Succeeded after one more healthy period at full traffic."""
    reason = f"{why}: all steps done, promoting (candidates at 100 %)"
    return transition(
        state,
        ctx.now,
        DecisionAction.PROMOTE,
        reason,
        event=normal(EventReason.PROMOTING, reason),
        phase=AnalysisPhase.PROMOTING,
        weights=promotion_weights(ctx.plan),
        step_index=len(ctx.plan.step_weights),
        step_started_at=ctx.now,
        consecutive_passes=0,
    )


def _step_text(ctx: Context, index: int) -> str:
    weight = ctx.plan.step_weights[index]
    if weight is not None:
        return f"candidate at {weight} %"
    seconds = pause_duration(ctx.plan, index)
    return "pause until sits.dev/resume" if seconds is None else f"pause for {seconds:g}s"


def on_pause_step(ctx: Context, state: AnalysisState) -> bool:
    return state.phase is PROGRESSING and is_pause_step(ctx.plan, state.step_index)
