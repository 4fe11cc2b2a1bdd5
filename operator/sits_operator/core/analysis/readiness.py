"""Candidates whose pods cannot run or do not get ready: judged from the pods, not Prometheus.

Why: a candidate started with a bad vLLM argument never turns ready. The analysis used to
hold such a candidate forever ("candidates not ready"), and only the ContainersFailing
condition said why; Flagger and Argo Rollouts roll it back (progressDeadlineSeconds).
Here, in each evaluated period (docs/architecture.md section 5):

- a candidate with a failing container (CrashLoopBackOff, ImagePullBackOff,
  CreateContainerConfigError...: `core/containers.is_failing`) fails the built-in rule
  `containers`; the period is counted, and after the policy's `failingContainers.periods`
  consecutive failing periods its action runs (rollback by default). The rule goes
  through the breach counters of every SLI rule, so a candidate that recovers (ready, its
  containers running) resets it like a passing SLI;
- a candidate merely starting (no ready pod, nothing failing) holds without counting, but
  for at most the progress deadline: the candidates' `startupTimeout` plus the time before
  vLLM starts (scheduling, the image pull); then it is rolled back with the event reason
  ProgressDeadlineExceeded. Not while Paused: whoever paused is looking, and resume starts
  the clock again (as in Argo Rollouts);
- a stable with failing containers holds the analysis, period not counted: a broken stable
  is no yardstick, and neither a promotion away from it nor a rollback onto it would be
  the candidate's doing. A candidate that fails on its own is still counted.
"""

from __future__ import annotations

from sits_operator.core.analysis.transition import Context, Transition, hold
from sits_operator.core.analysis.transitions import PAUSED, rollback
from sits_operator.core.analysis.verdicts import Judgement, RuleResult, combined
from sits_operator.model.analysis import (
    PROGRESS_DEADLINE_ALLOWANCE_SECONDS,
    AnalysisState,
    RolloutPlan,
    Verdict,
)
from sits_operator.model.durations import format_duration
from sits_operator.model.events import EventReason


def containers_results(ctx: Context, state: AnalysisState) -> tuple[RuleResult, ...]:
    """The built-in containers rule this period, or nothing when no variant fails and the
    rule has no open breach (a healthy rollout shows no row of it in status.slis)."""
    rule = ctx.policy.containers_rule
    if not ctx.plan.failing and rule.name not in state.breaches:
        return ()
    candidates = tuple(_judge(ctx.plan, name) for name in ctx.plan.candidates)
    stable = _judge(ctx.plan, ctx.plan.stable)
    return (RuleResult(rule, combined(tuple(j.verdict for j in candidates)), candidates, stable),)


def _judge(plan: RolloutPlan, variant: str) -> Judgement:
    """Fail with the kubelet's words when the variant has failing containers, else Pass;
    the value is the number of failing containers."""
    failure = plan.failure_of(variant)
    if failure is None:
        return Judgement(variant, Verdict.PASS, 0.0, 0.0)
    detail = f"{variant}: {failure.detail}"
    return Judgement(variant, Verdict.FAIL, float(failure.containers), 0.0, detail=detail)


def unready_since(ctx: Context, state: AnalysisState) -> float | None:
    """The progress clock: since when a candidate has had no ready pod (None: all ready)."""
    if ctx.plan.candidates_ready:
        return None
    return ctx.now if state.unready_since is None else state.unready_since


def gate(ctx: Context, state: AnalysisState) -> Transition | None:
    """Roll back past the progress deadline, or hold without counting; None: count the
    period (`state` already carries this period's progress clock)."""
    if _past_deadline(ctx, state):
        return rollback(
            ctx,
            state,
            _deadline_reason(ctx, state),
            event_reason=EventReason.PROGRESS_DEADLINE_EXCEEDED,
        )
    if any(ctx.plan.failure_of(name) is not None for name in ctx.plan.candidates):
        return None  # the containers rule fails: a counted period
    if not ctx.plan.candidates_ready:
        return hold(
            state, f"candidates not ready: holding, period not counted ({_clock(ctx, state)})"
        )
    stable = ctx.plan.failure_of(ctx.plan.stable)
    if stable is not None:
        return hold(
            state,
            f"stable {stable.variant} failing: {stable.detail}: holding, period not counted"
            " (a failing stable neither promotes nor rolls back a candidate)",
        )
    return None


def _past_deadline(ctx: Context, state: AnalysisState) -> bool:
    if state.unready_since is None or state.phase is PAUSED:
        return False
    return ctx.now - state.unready_since >= ctx.plan.progress_deadline_seconds


def _span(seconds: float) -> str:
    return format_duration(max(0, round(seconds)))


def _deadline_reason(ctx: Context, state: AnalysisState) -> str:
    waited = ctx.now - (state.unready_since or ctx.now)
    names = ", ".join(ctx.plan.unready)
    deadline = _span(ctx.plan.progress_deadline_seconds)
    return (
        f"rolled back: progress deadline exceeded: {names} without a ready pod for"
        f" {_span(waited)} (deadline {deadline}: the candidates' startupTimeout plus"
        f" {_span(PROGRESS_DEADLINE_ALLOWANCE_SECONDS)} to schedule and pull the image)"
    )


def _clock(ctx: Context, state: AnalysisState) -> str:
    names = ", ".join(ctx.plan.unready)
    waited = _span(ctx.now - (state.unready_since or ctx.now))
    if state.phase is PAUSED:
        return f"{names} without a ready pod for {waited}; paused: no progress deadline"
    deadline = _span(ctx.plan.progress_deadline_seconds)
    return f"{names} without a ready pod for {waited} of the {deadline} progress deadline"
