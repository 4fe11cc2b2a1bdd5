"""Reduce a SitsDeployment spec (plus readiness) to the engine's RolloutPlan."""

from __future__ import annotations

from sits_operator.core.analysis import step_weights_for
from sits_operator.core.status import initial_weights
from sits_operator.model.analysis import RolloutPlan
from sits_operator.model.durations import parse_duration
from sits_operator.model.observed import ObservedState
from sits_operator.model.spec import SitsDeploymentSpec


def revision_key(spec: SitsDeploymentSpec) -> str:
    """Identity of what is under analysis: a change of any variant's revision restarts it."""
    return ",".join(f"{v.name}:{v.role.value}:{v.revision}" for v in spec.variants)


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


def candidates_ready(spec: SitsDeploymentSpec, observed: ObservedState) -> bool:
    """Every candidate that should run has at least one ready pod."""
    for variant in spec.candidates:
        deployment = observed.deployment(variant.name)
        if variant.replicas > 0 and (deployment is None or deployment.ready_replicas == 0):
            return False
    return True


def build_plan(spec: SitsDeploymentSpec, observed: ObservedState) -> RolloutPlan:
    step_weights, pauses = _steps(spec)
    return RolloutPlan(
        stable=spec.stable.name,
        candidates=tuple(v.name for v in spec.candidates),
        revision_key=revision_key(spec),
        strategy=spec.rollout.strategy.value,
        initial_weights=initial_weights(spec),
        step_weights=step_weights,
        pause_seconds=pauses,
        candidates_ready=candidates_ready(spec, observed),
    )
