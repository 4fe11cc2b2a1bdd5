"""Reduce a SitsDeployment spec (plus readiness) to the engine's RolloutPlan, and the spec
to the one that should run (losers of a decision at zero replicas)."""

from __future__ import annotations

from sits_operator.core.analysis import step_weights_for
from sits_operator.core.analysis.identity import SpecChange, spec_change
from sits_operator.core.containers import variant_failures
from sits_operator.core.status import initial_weights
from sits_operator.model.analysis import (
    PROGRESS_DEADLINE_ALLOWANCE_SECONDS,
    AnalysisState,
    RolloutPlan,
    VariantRevision,
    format_revision_key,
)
from sits_operator.model.durations import parse_duration
from sits_operator.model.observed import ObservedState
from sits_operator.model.spec import SitsDeploymentSpec


def revision_key(spec: SitsDeploymentSpec) -> str:
    """Identity of what is under analysis: every variant's name, role and revision.

    A change restarts the analysis unless it only states a terminal outcome
    (core/analysis/identity.py): the role is in the key, not in any pod.
    """
    return format_revision_key(VariantRevision(v.name, v.role, v.revision) for v in spec.variants)


def _steps(spec: SitsDeploymentSpec) -> tuple[tuple[int | None, ...], tuple[float | None, ...]]:
    if not spec.rollout.steps:
        weights = step_weights_for(spec.rollout.step_weight, spec.rollout.max_weight)
        return tuple(weights), tuple(None for _ in weights)
    step_weights: list[int | None] = []
    pauses: list[float | None] = []
    for step in spec.rollout.steps:
        step_weights.append(step.set_weight)
        duration = step.pause.duration if step.pause is not None else None
        pauses.append(parse_duration(duration) if duration else None)
    return tuple(step_weights), tuple(pauses)


def unready_candidates(spec: SitsDeploymentSpec, observed: ObservedState) -> tuple[str, ...]:
    """Candidates that should run but have no ready pod."""
    return tuple(
        variant.name
        for variant in spec.candidates
        if variant.replicas > 0 and _ready_replicas(observed, variant.name) == 0
    )


def _ready_replicas(observed: ObservedState, variant: str) -> int:
    deployment = observed.deployment(variant)
    return 0 if deployment is None else deployment.ready_replicas


def progress_deadline(spec: SitsDeploymentSpec) -> float:
    """Seconds a candidate may go without a ready pod: the longest startupTimeout of the
    candidates (what their vLLM may take to load) plus the time before vLLM starts."""
    budgets = [parse_duration(v.startup_timeout) for v in spec.candidates]
    return max(budgets, default=0.0) + PROGRESS_DEADLINE_ALLOWANCE_SECONDS


def build_plan(spec: SitsDeploymentSpec, observed: ObservedState) -> RolloutPlan:
    step_weights, pauses = _steps(spec)
    interval = spec.rollout.interval
    return RolloutPlan(
        stable=spec.stable.name,
        candidates=tuple(v.name for v in spec.candidates),
        revision_key=revision_key(spec),
        strategy=spec.rollout.strategy.value,
        initial_weights=initial_weights(spec),
        step_weights=step_weights,
        pause_seconds=pauses,
        unready=unready_candidates(spec, observed),
        failing=variant_failures(spec, observed),
        progress_deadline_seconds=progress_deadline(spec),
        step_seconds=parse_duration(interval) if interval else None,
        scale_down_seconds=parse_duration(spec.rollout.scale_down_delay),
    )


def scaled_down(spec: SitsDeploymentSpec, state: AnalysisState) -> frozenset[str]:
    """Variants of this spec the analysis scaled to zero.

    None while the spec starts a new analysis: its variants must run for it (the analysis
    clears the list when it restarts, at its next period; this does not wait for that).
    """
    if spec_change(state, revision_key(spec)) is SpecChange.NEW:
        return frozenset()
    return frozenset(state.scaled_down) & {v.name for v in spec.variants}


def running_spec(spec: SitsDeploymentSpec, at_zero: frozenset[str]) -> SitsDeploymentSpec:
    """The spec as it should run: the variants in `at_zero` with zero replicas.

    Rendering, readiness and status all read replicas from here, so a scaled-down variant
    is rendered at zero, needs no ready pod, and shows 0 wanted replicas.
    """
    if not at_zero:
        return spec
    variants = tuple(
        v.model_copy(update={"replicas": 0}) if v.name in at_zero else v for v in spec.variants
    )
    return spec.model_copy(update={"variants": variants})
