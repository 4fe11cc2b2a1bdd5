"""A SitsDeployment, its pods and its policy reduced to the rows the screens show.

Reads the operator's status as the operator writes it (core/status.py, the analysis'
`status.analysis` and `status.slis`) through the operator's own model types, so a field
renamed there breaks here at once instead of silently showing nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sits_kubectl.snapshot import Obj, Snapshot
from sits_kubectl.text import parse_time
from sits_operator.core.naming import LABEL_COMPONENT, LABEL_VARIANT, Component
from sits_operator.model.analysis import AnalysisState, Command, DecisionAction, command_annotation
from sits_operator.model.mig import RESOURCE_PREFIX
from sits_operator.model.policy import ActionType, CompareTo, Comparison, Policy, Rule, parse_policy
from sits_operator.model.spec import SitsDeploymentSpec, Strategy, parse_spec
from sits_operator.model.status import ABNORMAL_FALSE, ABNORMAL_TRUE, ConditionType

DECISIONS_SHOWN = 5


@dataclass(frozen=True)
class SliRow:
    """One SLI of one variant in the last evaluation, with what breaches it."""

    variant: str
    sli: str
    value: float | None
    window: str
    verdict: str
    observed_at: float | None
    breach: str  # "< 0.95 for 2 periods -> rollback"; "" when the policy is unknown


@dataclass(frozen=True)
class PodRow:
    name: str
    status: str  # Running, Pending, Terminating, or a container's waiting reason
    ready: bool
    node: str
    slices: str  # "mig-1g.10gb x1"
    restarts: int
    created: float | None


@dataclass(frozen=True)
class VariantRow:
    name: str
    role: str
    revision: str
    weight: int | None
    replicas: int
    ready: int
    restarts: int
    profile: str
    scaled_down: bool
    slis: tuple[SliRow, ...]
    pods: tuple[PodRow, ...]


@dataclass(frozen=True)
class GatewayRow:
    """Router builtin: the gateway pods and how many apply the decided weights."""

    asked: int | None
    applying: int | None
    pods: tuple[PodRow, ...]


@dataclass(frozen=True)
class DecisionRow:
    at: float
    action: DecisionAction
    weights: dict[str, int]
    reason: str


@dataclass(frozen=True)
class ConditionRow:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class RolloutView:
    name: str
    namespace: str
    exists: bool
    phase: str
    message: str
    stale: bool  # the status is older than the spec (observedGeneration < generation)
    strategy: str
    policy_name: str
    policy: Policy | None
    router: str
    decided_at: float | None
    variants: tuple[VariantRow, ...]
    gateway: GatewayRow | None
    decisions: tuple[DecisionRow, ...]  # newest first
    attention: tuple[ConditionRow, ...]
    pending: tuple[tuple[str, str], ...]  # command annotations the operator has not acted on
    state: AnalysisState
    candidate: str
    candidate_success: float | None
    candidate_p95: float | None
    notes: tuple[str, ...]


def candidate_values(view: RolloutView) -> str:
    """The printer columns SUCCESS and P95MS in words; they outlive status.slis, which a
    terminal phase empties."""
    parts = []
    if view.candidate_success is not None:
        parts.append(f"success rate {view.candidate_success:g}")
    if view.candidate_p95 is not None:
        parts.append(f"p95 {view.candidate_p95:g} ms")
    return f"{view.candidate}: {', '.join(parts)}" if parts and view.candidate else ""


def build(snapshot: Snapshot) -> RolloutView:
    """Everything `get` and `explain` show, from one snapshot."""
    obj = snapshot.obj or {}
    status: Mapping[str, Any] = obj.get("status") or {}
    spec = _spec(obj.get("spec") or {})
    policy_name = spec.analysis.policy_ref.name if spec else ""
    policy = _policy(snapshot.policy, policy_name)
    state = AnalysisState.from_dict(dict(status.get("analysis") or {}))
    traffic: Mapping[str, Any] = status.get("traffic") or {}
    pods = snapshot.pods or ()
    return RolloutView(
        name=snapshot.name,
        namespace=snapshot.namespace,
        exists=snapshot.obj is not None,
        phase=str(status.get("phase") or ""),
        message=str(status.get("message") or ""),
        stale=_stale(obj),
        strategy=strategy_text(spec),
        policy_name=policy_name,
        policy=policy,
        router=str(traffic.get("router") or (spec.traffic.router.value if spec else "")),
        decided_at=parse_time(traffic.get("decidedAt")),
        variants=_variants(status, spec, policy, pods, state),
        gateway=_gateway(traffic, pods, snapshot.pods is not None),
        decisions=tuple(
            DecisionRow(h.at, h.action, dict(h.weights), h.reason)
            for h in reversed(state.history[-DECISIONS_SHOWN:])
        ),
        attention=_attention(status),
        pending=_pending(obj, state),
        state=state,
        candidate=str(status.get("candidateVariant") or ""),
        candidate_success=_float(status.get("candidateSuccessRate")),
        candidate_p95=_float(status.get("candidateLatencyP95Ms")),
        notes=snapshot.notes,
    )


def policy_name(obj: Obj | None) -> str:
    """The SitsPolicy a SitsDeployment names (the CRD's default when it names none)."""
    spec = _spec((obj or {}).get("spec") or {}) if obj is not None else None
    return spec.analysis.policy_ref.name if spec is not None else ""


def _spec(raw: Mapping[str, Any]) -> SitsDeploymentSpec | None:
    """The typed spec; None for one the operator could not parse either (status says why)."""
    try:
        return parse_spec(dict(raw))
    except ValueError:  # pydantic's ValidationError is one
        return None


def _policy(raw: Obj | None, name: str) -> Policy | None:
    if raw is None:
        return None
    try:
        return parse_policy(name, dict(raw.get("spec") or {}))
    except (KeyError, ValueError, TypeError):
        return None


def _stale(obj: Obj) -> bool:
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    return isinstance(generation, int) and isinstance(observed, int) and observed < generation


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def strategy_text(spec: SitsDeploymentSpec | None) -> str:
    """The rollout as the spec states it ("canary: 10 % steps up to 50 %, each at least 2m")."""
    if spec is None:
        return ""
    rollout = spec.rollout
    if rollout.strategy is Strategy.AB_TEST:
        return "A/B test: the split holds until promoted or aborted"
    if rollout.steps:
        parts = []
        for step in rollout.steps:
            if step.set_weight is not None:
                parts.append(f"{step.set_weight} %")
            elif step.pause is not None:
                parts.append(f"pause {step.pause.duration}" if step.pause.duration else "pause")
        text = "canary: " + " -> ".join(parts)
    else:
        text = f"canary: {rollout.step_weight} % steps up to {rollout.max_weight} %"
    return f"{text}, each at least {rollout.interval}" if rollout.interval else text


def breach_text(rule: Rule) -> str:
    """When the rule acts, in the policy's own terms: "< 0.95 for 2 periods -> rollback"."""
    if rule.compare_to is CompareTo.STABLE:
        sign = "-" if rule.comparison in (Comparison.LT, Comparison.LE) else "+"
        slack = f" {sign} {rule.tolerance * 100:g} %" if rule.tolerance else ""
        reference = f"stable{slack}"
    else:
        reference = "?" if rule.threshold is None else f"{rule.threshold:g}"
    return f"{rule.comparison.value} {reference} {lasting_text(rule)} -> {action_text(rule)}"


def lasting_text(rule: Rule) -> str:
    if rule.for_seconds is not None:
        return f"for {rule.for_seconds:g}s"
    periods = rule.for_periods or 1
    return f"for {periods} period" if periods == 1 else f"for {periods} periods"


def action_text(rule: Rule) -> str:
    if rule.action.type is ActionType.SET_WEIGHT:
        return f"setWeight {rule.action.weight}"
    return rule.action.type.value


def _sli_rows(status: Mapping[str, Any], policy: Policy | None) -> dict[str, tuple[SliRow, ...]]:
    """status.slis per variant; the k-th row of an SLI goes with the k-th rule reading it."""
    rules: dict[str, list[Rule]] = {}
    for rule in policy.rules if policy else ():
        rules.setdefault(rule.sli, []).append(rule)
    seen: dict[tuple[str, str], int] = {}
    rows: dict[str, list[SliRow]] = {}
    for raw in status.get("slis") or ():
        variant, sli = str(raw.get("variant", "")), str(raw.get("name", ""))
        index = seen.get((variant, sli), 0)
        seen[(variant, sli)] = index + 1
        matching = rules.get(sli, [])
        breach = breach_text(matching[index]) if index < len(matching) else ""
        rows.setdefault(variant, []).append(
            SliRow(
                variant=variant,
                sli=sli,
                value=_float(raw.get("value")),
                window=str(raw.get("window") or ""),
                verdict=str(raw.get("verdict") or ""),
                observed_at=parse_time(raw.get("observedAt")),
                breach=breach,
            )
        )
    return {variant: tuple(found) for variant, found in rows.items()}


def _variants(
    status: Mapping[str, Any],
    spec: SitsDeploymentSpec | None,
    policy: Policy | None,
    pods: Iterable[Obj],
    state: AnalysisState,
) -> tuple[VariantRow, ...]:
    """status.variants in the operator's order; the spec's variants before any status."""
    observed = {str(v.get("name")): v for v in status.get("variants") or ()}
    declared = {v.name: v for v in spec.variants} if spec else {}
    names = list(observed) + [n for n in declared if n not in observed]
    slis = _sli_rows(status, policy)
    by_variant: dict[str, list[PodRow]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if LABEL_VARIANT in labels:
            by_variant.setdefault(str(labels[LABEL_VARIANT]), []).append(pod_row(pod))
    rows = []
    for name in names:
        seen, wanted = observed.get(name, {}), declared.get(name)
        rows.append(
            VariantRow(
                name=name,
                role=str(seen.get("role") or (wanted.role.value if wanted else "")),
                revision=str(seen.get("revision") or (wanted.revision if wanted else "")),
                weight=seen.get("weight") if isinstance(seen.get("weight"), int) else None,
                replicas=int(seen.get("replicas") or (wanted.replicas if wanted else 0)),
                ready=int(seen.get("readyReplicas") or 0),
                restarts=int(seen.get("restarts") or 0),
                profile=wanted.mig_profile if wanted else "",
                scaled_down=name in state.scaled_down,
                slis=slis.get(name, ()),
                pods=tuple(sorted(by_variant.get(name, ()), key=lambda p: p.name)),
            )
        )
    return tuple(rows)


def pod_row(pod: Obj) -> PodRow:
    """Name, what it is doing, readiness, node, MIG slices (its containers' limits)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    conditions = status.get("conditions") or ()
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    slices: dict[str, int] = {}
    for container in spec.get("containers") or ():
        limits = (container.get("resources") or {}).get("limits") or {}
        for resource, amount in limits.items():
            if str(resource).startswith(RESOURCE_PREFIX):
                profile = str(resource).removeprefix(RESOURCE_PREFIX)
                slices[profile] = slices.get(profile, 0) + _int(amount)
    return PodRow(
        name=str(meta.get("name", "")),
        status=_pod_status(meta, status),
        ready=ready,
        node=str(spec.get("nodeName") or "-"),
        slices=", ".join(f"{profile} x{count}" for profile, count in slices.items()),
        restarts=sum(_int(c.get("restartCount")) for c in status.get("containerStatuses") or ()),
        created=parse_time(meta.get("creationTimestamp")),
    )


def _pod_status(meta: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    """What kubectl's STATUS column would say: Terminating, a waiting reason, or the phase."""
    if meta.get("deletionTimestamp"):
        return "Terminating"
    for container in status.get("containerStatuses") or ():
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"])
    return str(status.get("phase") or "Unknown")


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _gateway(traffic: Mapping[str, Any], pods: Iterable[Obj], pods_read: bool) -> GatewayRow | None:
    gateway = [
        pod_row(p)
        for p in pods
        if ((p.get("metadata") or {}).get("labels") or {}).get(LABEL_COMPONENT)
        == Component.GATEWAY.value
    ]
    asked, applying = traffic.get("gatewayPods"), traffic.get("gatewayPodsApplied")
    if not gateway and asked is None:
        return None
    return GatewayRow(
        asked=asked if isinstance(asked, int) else None,
        applying=applying if isinstance(applying, int) else None,
        pods=tuple(sorted(gateway, key=lambda p: p.name)) if pods_read else (),
    )


def _attention(status: Mapping[str, Any]) -> tuple[ConditionRow, ...]:
    """Conditions in their abnormal state, unless status.message already says the same."""
    message = str(status.get("message") or "")
    rows = []
    for raw in status.get("conditions") or ():
        kind, value = str(raw.get("type", "")), str(raw.get("status", ""))
        bad = (kind in ABNORMAL_TRUE and value == "True") or (
            kind in (*ABNORMAL_FALSE, ConditionType.ANALYSIS) and value == "False"
        )
        text = str(raw.get("message") or "")
        if bad and text not in message:
            rows.append(ConditionRow(kind, value, str(raw.get("reason", "")), text))
    return tuple(rows)


def _pending(obj: Obj, state: AnalysisState) -> tuple[tuple[str, str], ...]:
    """Command annotations whose value the operator has not acknowledged yet."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    found = []
    for command in Command:
        key = command_annotation(command)
        value = annotations.get(key)
        if value is not None and state.acknowledged.get(command.value) != value:
            found.append((key, str(value)))
    return tuple(found)
