"""Compute a SitsDeployment's status from its spec and what was observed.

The reconciler writes the result once, and only when it differs from what is stored.
Only the fields this module owns are computed; fields owned by the analysis loop
(SLIs, analysis counters) pass through untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sits_operator.core import kstatus
from sits_operator.core.conditions import find, flipped, set_condition
from sits_operator.core.containers import (
    failing_containers,
    failing_message,
    failing_reason,
    variant_restarts,
)
from sits_operator.core.gateway import wants_gateway
from sits_operator.core.naming import Component
from sits_operator.core.traffic import TrafficView, traffic_view
from sits_operator.model.observed import GatewayReport, ObservedState
from sits_operator.model.spec import Role, SitsDeploymentSpec, Variant
from sits_operator.model.status import (
    Condition,
    ConditionReason,
    ConditionType,
    Phase,
    RolloutSummary,
)

OWNED_FIELDS = (
    "observedGeneration",
    "phase",
    "message",
    "stableVariant",
    "candidateVariant",
    "candidateWeight",
    "variants",
    "conditions",
    "traffic",
)


@dataclass(frozen=True)
class StatusInputs:
    generation: int
    spec: SitsDeploymentSpec | None
    problems: tuple[str, ...]
    observed: ObservedState
    previous: dict[str, Any]
    now: str
    # Weights the analysis loop decided (None: no analysis, use spec's initial weights).
    decided_weights: Mapping[str, int] | None = None
    # The analysis phase (Progressing, Paused, ...) when a candidate is under analysis.
    analysis_phase: str | None = None
    # (healthy, reason, message) of the Analysis condition; None leaves it as it was.
    analysis_condition: tuple[bool, str, str] | None = None
    # Router builtin: what each ready gateway pod reports applying (None: not asked).
    gateway_reports: tuple[GatewayReport, ...] | None = None
    # `now` in seconds (the same injected wall clock): the TrafficApplied grace period and
    # how long a blocker has lasted (Stalled).
    now_seconds: float = 0.0
    # Where the analysed rollout stands, in words (core/rollout_summary.py); None without
    # an analysis (no candidate, no policy).
    analysis_summary: RolloutSummary | None = None
    # Router gatewayAPI: why the operator may not use the HTTPRoute (a ReferenceGrant is
    # missing, core/reference_grant.py); None when it may, or was not asked.
    route_refusal: str | None = None


@dataclass(frozen=True)
class StatusResult:
    """The owned part of the new status, and what changed (for events)."""

    status: dict[str, Any]
    phase_changed: bool
    flipped: tuple[Condition, ...]
    # Seconds after which a reconcile should look again (a gateway still applying).
    recheck_in: float | None = None

    def differs_from(self, previous: dict[str, Any]) -> bool:
        return any(previous.get(key) != value for key, value in self.status.items())


def initial_weights(spec: SitsDeploymentSpec) -> dict[str, int]:
    """Weights from spec.traffic.initialWeights; by default everything on stable."""
    if spec.traffic.initial_weights:
        given = {e.variant: e.weight for e in spec.traffic.initial_weights}
        return {v.name: given.get(v.name, 0) for v in spec.variants}
    return {v.name: (100 if v.role is Role.STABLE else 0) for v in spec.variants}


def _ready_replicas(variant: Variant, observed: ObservedState) -> int:
    deployment = observed.deployment(variant.name)
    return deployment.ready_replicas if deployment is not None else 0


def effective_weights(
    spec: SitsDeploymentSpec,
    observed: ObservedState,
    decided: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """A variant without ready pods gets no traffic; its share goes back to stable."""
    weights = initial_weights(spec)
    if decided is not None:
        weights = {name: int(decided.get(name, 0)) for name in weights}
    stable = spec.stable.name
    if _ready_replicas(spec.stable, observed) == 0:
        return weights  # nothing better to route to; keep the intent visible
    for variant in spec.candidates:
        if weights[variant.name] and _ready_replicas(variant, observed) == 0:
            weights[stable] += weights[variant.name]
            weights[variant.name] = 0
    return weights


def _variant_done(variant: Variant, observed: ObservedState) -> bool:
    deployment = observed.deployment(variant.name)
    if deployment is None:
        return False
    return (
        deployment.observed_generation >= deployment.generation
        and deployment.updated_replicas >= variant.replicas
        and deployment.ready_replicas >= variant.replicas
        and deployment.replicas == variant.replicas
    )


def _gateway_summary(spec: SitsDeploymentSpec, observed: ObservedState) -> str:
    """ "gateway 0/2 ready" while router builtin's gateway is not fully ready, else ""."""
    if not wants_gateway(spec):
        return ""
    wanted = spec.traffic.gateway.replicas
    deployment = observed.component_deployment(Component.GATEWAY.value)
    ready = deployment.ready_replicas if deployment is not None else 0
    done = deployment is not None and (
        deployment.observed_generation >= deployment.generation
        and deployment.updated_replicas >= wanted
        and ready >= wanted
    )
    return "" if done else f"gateway {ready}/{wanted} ready"


def _not_ready_summary(spec: SitsDeploymentSpec, observed: ObservedState) -> str:
    parts = []
    for variant in spec.variants:
        if not _variant_done(variant, observed):
            ready = _ready_replicas(variant, observed)
            parts.append(f"{variant.name} {ready}/{variant.replicas} ready")
    gateway = _gateway_summary(spec, observed)
    return ", ".join([*parts, gateway] if gateway else parts)


def _unschedulable_message(spec: SitsDeploymentSpec, observed: ObservedState) -> str:
    messages = []
    for variant in spec.variants:
        reasons = sorted(
            {
                p.unschedulable_message
                for p in observed.pods_of(variant.name)
                if p.unschedulable_message
            }
        )
        if reasons:
            messages.append(f"variant {variant.name} ({variant.mig_profile}): {reasons[0]}")
    return "; ".join(messages)


def _variant_rows(
    spec: SitsDeploymentSpec, observed: ObservedState, weights: Mapping[str, int]
) -> list[dict[str, Any]]:
    rows = []
    for variant in spec.variants:
        deployment = observed.deployment(variant.name)
        rows.append(
            {
                "name": variant.name,
                "role": variant.role.value,
                "revision": variant.revision,
                "replicas": variant.replicas,
                "readyReplicas": deployment.ready_replicas if deployment else 0,
                "updatedReplicas": deployment.updated_replicas if deployment else 0,
                "restarts": variant_restarts(observed, variant.name),
                "weight": int(weights.get(variant.name, 0)),
            }
        )
    return rows


def _previous_conditions(previous: dict[str, Any]) -> list[Condition]:
    raw = previous.get("conditions") or []
    return [Condition.from_dict(c) for c in raw if isinstance(c, dict)]


def _conditions(inputs: StatusInputs, traffic: TrafficView | None) -> list[Condition]:
    now, gen = inputs.now, inputs.generation
    conds = _previous_conditions(inputs.previous)
    invalid = "; ".join(inputs.problems)
    conds = set_condition(
        conds,
        type_=ConditionType.INVALID,
        status=bool(invalid),
        reason=ConditionReason.INVALID_SPEC if invalid else ConditionReason.SPEC_VALID,
        message=invalid,
        now=now,
        generation=gen,
    )
    if inputs.spec is None or invalid:
        return conds  # keep the last known Progressing/Unschedulable... (Ready: core/kstatus.py)
    conds = _pod_conditions(conds, inputs.spec, inputs)
    if inputs.analysis_condition is not None:
        healthy, reason, message = inputs.analysis_condition
        conds = set_condition(
            conds,
            type_=ConditionType.ANALYSIS,
            status=healthy,
            reason=reason,
            message=message,
            now=now,
            generation=gen,
        )
    conds = _traffic_condition(conds, inputs, traffic)
    return _rollout_conditions(conds, inputs.spec, inputs)


def _traffic_condition(
    conds: list[Condition], inputs: StatusInputs, traffic: TrafficView | None
) -> list[Condition]:
    """TrafficApplied for router builtin; for gatewayAPI, False while its HTTPRoute is
    refused; dropped otherwise (routers the operator cannot ask)."""
    condition: tuple[bool, str, str] | None
    if inputs.route_refusal is not None:
        condition = (False, ConditionReason.REFERENCE_GRANT_MISSING, inputs.route_refusal)
    elif traffic is None or inputs.gateway_reports is None:
        return [c for c in conds if c.type != ConditionType.TRAFFIC_APPLIED]
    else:
        condition = traffic.condition
    if condition is None:
        return conds
    applied, reason, message = condition
    return set_condition(
        conds,
        type_=ConditionType.TRAFFIC_APPLIED,
        status=applied,
        reason=reason,
        message=message,
        now=inputs.now,
        generation=inputs.generation,
    )


def _traffic(inputs: StatusInputs) -> TrafficView | None:
    spec = inputs.spec
    if spec is None or inputs.problems:
        return None
    return traffic_view(
        router=spec.traffic.router,
        decided=effective_weights(spec, inputs.observed, inputs.decided_weights),
        previous=dict(inputs.previous.get("traffic") or {}),
        reports=inputs.gateway_reports,
        now=inputs.now_seconds,
    )


def _pod_conditions(
    conds: list[Condition], spec: SitsDeploymentSpec, inputs: StatusInputs
) -> list[Condition]:
    """What keeps pods from serving: no slice to schedule on, or containers that fail."""
    unsched = _unschedulable_message(spec, inputs.observed)
    conds = set_condition(
        conds,
        type_=ConditionType.UNSCHEDULABLE,
        status=bool(unsched),
        reason=(
            ConditionReason.INSUFFICIENT_GPU_RESOURCES if unsched else ConditionReason.SCHEDULED
        ),
        message=unsched,
        now=inputs.now,
        generation=inputs.generation,
    )
    failures = failing_containers(spec, inputs.observed)
    return set_condition(
        conds,
        type_=ConditionType.CONTAINERS_FAILING,
        status=bool(failures),
        reason=failing_reason(failures),
        message=failing_message(failures),
        now=inputs.now,
        generation=inputs.generation,
    )


def _rollout_conditions(
    conds: list[Condition], spec: SitsDeploymentSpec, inputs: StatusInputs
) -> list[Condition]:
    """Progressing: the variants' Deployments (and the gateway's) are still rolling out.

    Ready, Reconciling and Stalled are about the whole SitsDeployment (core/kstatus.py).
    """
    pending = _not_ready_summary(spec, inputs.observed)
    return set_condition(
        conds,
        type_=ConditionType.PROGRESSING,
        status=bool(pending),
        reason=ConditionReason.ROLLING_OUT if pending else ConditionReason.ROLLOUT_COMPLETE,
        message=pending,
        now=inputs.now,
        generation=inputs.generation,
    )


def _phase(conds: list[Condition], analysis_phase: str | None) -> Phase:
    def true(type_: str) -> bool:
        cond = find(conds, type_)
        return cond is not None and cond.status == "True"

    if true(ConditionType.INVALID):
        return Phase.INVALID
    if analysis_phase == Phase.ROLLED_BACK:
        return Phase.ROLLED_BACK  # the verdict; a loser's crash shows in ContainersFailing
    if true(ConditionType.UNSCHEDULABLE) or true(ConditionType.CONTAINERS_FAILING):
        return Phase.DEGRADED
    if analysis_phase is not None:
        return Phase(analysis_phase)
    return Phase.PROGRESSING if true(ConditionType.PROGRESSING) else Phase.READY


def _pending(inputs: StatusInputs) -> str:
    """Which pods are not ready yet ("v2 0/1 ready, gateway 0/2 ready"); "" when all are."""
    if inputs.spec is None or inputs.problems:
        return ""
    return _not_ready_summary(inputs.spec, inputs.observed)


def _wrong(conds: list[Condition], type_: str, bad: str) -> Condition | None:
    cond = find(conds, type_)
    return cond if cond is not None and cond.status == bad else None


def _message(
    conds: list[Condition], phase: Phase, pending: str, summary: RolloutSummary | None
) -> str:
    """What the SitsDeployment waits for (never empty): a broken spec or pod first, then
    where the rollout stands and what holds it (pods, data, queries, the gateway)."""
    invalid = _wrong(conds, ConditionType.INVALID, "True")
    if invalid is not None:
        return invalid.message
    if summary is not None and summary.phase is Phase.ROLLED_BACK:
        return summary.text
    for type_ in (ConditionType.UNSCHEDULABLE, ConditionType.CONTAINERS_FAILING):
        broken = _wrong(conds, type_, "True")
        if broken is not None:
            return broken.message
    analysis = _wrong(conds, ConditionType.ANALYSIS, "False")
    traffic = _wrong(conds, ConditionType.TRAFFIC_APPLIED, "False")
    waiting = f"waiting for pods to be Ready: {pending}" if pending else ""
    if summary is None:
        parts = (analysis.message if analysis else "", waiting, traffic.message if traffic else "")
        return "; ".join(p for p in parts if p) or "all variants ready"
    settled = summary.phase in (Phase.ROLLED_BACK, Phase.SUCCEEDED, Phase.PAUSED)
    if settled or not (waiting or analysis or traffic):
        return summary.text
    if waiting:
        return f"{summary.position}: {waiting}"
    if analysis is not None:  # what is missing, and (no data) how long the policy waits
        held = analysis.reason == ConditionReason.NO_DATA and summary.progress
        tail = f"; {summary.progress}" if held else ""
        return f"{summary.position}: {analysis.message}{tail}"
    assert traffic is not None
    return f"{summary.position}: {traffic.message}"


def compute_status(inputs: StatusInputs) -> StatusResult:
    """The whole owned status for this generation, plus the transitions worth an event."""
    traffic = _traffic(inputs)
    conds = _conditions(inputs, traffic)
    phase = _phase(conds, inputs.analysis_phase)
    pending = _pending(inputs)
    message = _message(conds, phase, pending, inputs.analysis_summary)
    health = kstatus.assess(
        conds, phase=phase, pending=pending, message=message, now=inputs.now_seconds
    )
    conds = kstatus.apply(conds, health, now=inputs.now, generation=inputs.generation)
    status: dict[str, Any] = {
        "observedGeneration": inputs.generation,
        "phase": phase.value,
        "message": message,
        "conditions": [c.to_dict() for c in conds],
    }
    spec = inputs.spec
    if spec is not None and not inputs.problems:
        assert traffic is not None  # computed for every valid spec
        rows = _variant_rows(spec, inputs.observed, traffic.shown)
        status["traffic"] = traffic.field
        candidate = spec.candidates[0] if spec.candidates else None
        status["stableVariant"] = spec.stable.name
        status["candidateVariant"] = candidate.name if candidate else ""
        status["candidateWeight"] = next(
            (r["weight"] for r in rows if candidate and r["name"] == candidate.name), 0
        )
        status["variants"] = rows
    before = _previous_conditions(inputs.previous)
    traffic_recheck = traffic.recheck_in if traffic is not None else None
    rechecks = [t for t in (traffic_recheck, health.recheck_in) if t is not None]
    return StatusResult(
        status=status,
        phase_changed=inputs.previous.get("phase") != phase.value,
        flipped=tuple(flipped(before, conds)),
        recheck_in=min(rechecks, default=None),
    )
