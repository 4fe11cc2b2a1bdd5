"""One reconcile pass of a SitsDeployment: observe, plan, apply, write status once.

Thin orchestration over the pure core; every write it makes is also an event and a
metric, so `kubectl describe sitsd` and dashboards tell the same story.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from sits_operator.adapters.gateway import GatewayPod, GatewayReader
from sits_operator.adapters.kube import KubeWriter
from sits_operator.adapters.routers import RouteRefusedError
from sits_operator.core import naming
from sits_operator.core.analysis import scaledown
from sits_operator.core.analysis.identity import SpecChange, spec_change
from sits_operator.core.analysis.schedule import period_phase, seconds_to_next_period
from sits_operator.core.analysis_status import (
    analysis_condition,
    analysis_fields,
    commands_pending,
    rollout_summary,
)
from sits_operator.core.gateway import wants_gateway
from sits_operator.core.naming import Component
from sits_operator.core.plan import Plan, plan_children
from sits_operator.core.render import render_children
from sits_operator.core.rollout_plan import revision_key, running_spec, scaled_down
from sits_operator.core.status import OWNED_FIELDS, StatusInputs, StatusResult, compute_status
from sits_operator.core.validation import semantic_problems
from sits_operator.handlers import metrics
from sits_operator.handlers.analysis import Analyzer, commands_from, policy_from_index
from sits_operator.handlers.metrics import ReconcileResult
from sits_operator.model.analysis import AnalysisState, EventNote
from sits_operator.model.durations import parse_duration
from sits_operator.model.events import EventReason, condition_flipped
from sits_operator.model.observed import GatewayReport, ObservedChild, ObservedState
from sits_operator.model.policy import Policy
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, RouterKind, SitsDeploymentSpec, parse_spec
from sits_operator.model.status import (
    ABNORMAL_FALSE,
    ABNORMAL_TRUE,
    QUIET,
    ConditionReason,
    ConditionType,
    RolloutSummary,
)

log = logging.getLogger("sits_operator.reconcile")

# The watch cache lags our own writes by a moment; remember what we just applied so a
# reconcile woken in between does not apply (and announce) the same object twice.
RECENT_APPLY_SECONDS = 15.0
# A pass whose analysis scaled variants down (or back up) renders that at once: the
# children were converged before the analysis ran.
RESCALE_RECHECK_SECONDS = 0.0
# Wake a moment after a scale-down is due, so the clock has surely passed it.
SCALE_DOWN_MARGIN_SECONDS = 0.5
# Status fields of the analysis, dropped when no candidate is left to analyse.
ANALYSIS_FIELDS = ("analysis", "slis", "candidateSuccessRate", "candidateLatencyP95Ms")

EventPoster = Callable[[Any, str, EventReason, str], None]


def post_event(body: Any, type_: str, reason: EventReason, message: str) -> None:
    """Kubernetes event on the SitsDeployment, posted by Kopf's event queue."""
    kopf.event(body, type=type_, reason=reason, message=message)


def finished_analysis_fields(previous: Mapping[str, Any]) -> dict[str, Any]:
    """No candidate left (the outcome committed in Git): the analysis is over, its fields
    go; a later candidate starts a fresh analysis instead of matching a stale one."""
    return {key: None for key in ANALYSIS_FIELDS if previous.get(key) is not None}


def utc_now(seconds: float | None = None) -> str:
    moment = datetime.now(UTC) if seconds is None else datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class AnalysisView:
    """What the status computation needs from the analysis step of this pass."""

    fields: dict[str, Any]
    decided_weights: dict[str, int] | None = None
    phase: str | None = None
    condition: tuple[bool, str, str] | None = None
    next_in: float | None = None
    # Variants the analysis decided run at zero replicas (None: no decision this pass).
    scaled_down: frozenset[str] | None = None
    # Where the rollout stands, in words (status.message; core/rollout_summary.py).
    summary: RolloutSummary | None = None
    # The decision's events, posted only once its status is written: a refused write
    # (429, 5xx) leaves the decision untaken, and the next pass takes it again.
    events: tuple[EventNote, ...] = ()


@dataclass
class Reconciler:
    writer: KubeWriter
    settings: OperatorSettings
    analyzer: Analyzer | None = None
    # Router builtin: asks the gateway pods what they apply (None: the status is not
    # read back, as in dry runs and tests without gateways).
    gateway_reader: GatewayReader | None = None
    post: EventPoster = post_event
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    # Per owner (namespace, name): (kind, child name) -> (template hash, applied at).
    _recent: dict[tuple[str, str], dict[tuple[str, str], tuple[str, float]]] = field(
        default_factory=dict
    )
    _written_status: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # Per owner: seconds after the last pass when it should run again (gateway applying).
    _recheck: dict[tuple[str, str], float] = field(default_factory=dict)
    # Per owner: why its HTTPRoute may not be used (router gatewayAPI, no ReferenceGrant),
    # as the last analysis found; kept between analyses so TrafficApplied does not flap.
    _refused: dict[tuple[str, str], str] = field(default_factory=dict)

    async def reconcile(
        self,
        body: Any,
        observed: ObservedState,
        *,
        policies: Mapping[str, Any] | None = None,
        analyze: bool = False,
    ) -> float | None:
        """One pass; returns seconds until the next analysis is due (None: no analysis)."""
        started = self.clock()
        try:
            # Not `return` here: a try block that returns skips its `else:`, and the "ok"
            # count would never be taken.
            next_in = await self._reconcile(body, observed, policies or {}, analyze)
        except Exception:
            metrics.RECONCILES.labels(result=ReconcileResult.ERROR.value).inc()
            raise
        else:
            metrics.RECONCILES.labels(result=ReconcileResult.OK.value).inc()
            return next_in
        finally:
            metrics.RECONCILE_SECONDS.observe(self.clock() - started)

    def _previous_status(self, owner: ObjectRef, body: Any) -> dict[str, Any]:
        """The status as last known: the watch cache may not show our last write yet.

        The operator is the only writer of these fields, so what it wrote last is at least
        as new as any cached copy; without this, a pass woken before the cache caught up
        would recompute from stale analysis state (and count or reset it wrongly).
        """
        cached = dict(body.get("status") or {})
        return {**cached, **self._written_status.get((owner.namespace, owner.name), {})}

    def forget(self, namespace: str, name: str) -> None:
        """Drop per-object memory when the SitsDeployment goes away."""
        self._written_status.pop((namespace, name), None)
        self._recent.pop((namespace, name), None)
        self._recheck.pop((namespace, name), None)
        self._refused.pop((namespace, name), None)
        metrics.forget_rollout(namespace, name)

    def recheck_in(self, namespace: str, name: str) -> float | None:
        """Seconds until the last pass wants another look (None: only on events/resync):
        a gateway's catching up with a decision raises no watch event."""
        return self._recheck.get((namespace, name))

    async def _gateway_reports(
        self, spec: SitsDeploymentSpec, observed: ObservedState
    ) -> tuple[GatewayReport, ...] | None:
        if self.gateway_reader is None or not wants_gateway(spec):
            return None
        pods = [
            GatewayPod(p.name, p.ip)
            for p in sorted(observed.component_pods(Component.GATEWAY.value), key=lambda p: p.name)
            if p.ready and p.ip
        ]
        return await self.gateway_reader.read(pods, port=self.settings.gateway_port)

    async def _reconcile(
        self, body: Any, observed: ObservedState, policies: Mapping[str, Any], analyze: bool
    ) -> float | None:
        meta = body["metadata"]
        owner = ObjectRef(
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta["uid"],
            generation=int(meta.get("generation") or 0),
        )
        spec, problems = self._parse(body.get("spec") or {})
        previous = self._previous_status(owner, body)
        at_zero: frozenset[str] = frozenset()
        if spec is not None and not problems:
            # Losers of a terminal decision run at zero replicas (core/analysis/scaledown.py).
            at_zero = scaled_down(spec, AnalysisState.from_dict(previous.get("analysis")))
            spec = running_spec(spec, at_zero)
            observed = await self._converge(body, owner, spec, observed)
        view = AnalysisView(fields={})
        reports, refusal = None, None
        if spec is not None and not problems:
            view = await self._analysis(body, owner, spec, observed, previous, policies, analyze)
            reports = await self._gateway_reports(spec, observed)
            if spec.traffic.router is RouterKind.GATEWAY_API:
                refusal = self._refused.get((owner.namespace, owner.name))
        now = self.wall_clock()
        result = compute_status(
            StatusInputs(
                generation=owner.generation,
                spec=spec,
                problems=tuple(problems),
                observed=observed,
                previous=previous,
                now=utc_now(now),
                decided_weights=view.decided_weights,
                analysis_phase=view.phase,
                analysis_condition=view.condition,
                analysis_summary=view.summary,
                gateway_reports=reports,
                now_seconds=now,
                route_refusal=refusal,
            )
        )
        metrics.observe_rollout(owner.namespace, owner.name, result.status)
        recheck = result.recheck_in
        if view.scaled_down is not None and view.scaled_down != at_zero:
            recheck = RESCALE_RECHECK_SECONDS  # render the scale decision just taken
        if recheck is None:
            self._recheck.pop((owner.namespace, owner.name), None)
        else:
            self._recheck[(owner.namespace, owner.name)] = recheck
        if view.fields:
            result = StatusResult(
                {**result.status, **view.fields},
                result.phase_changed,
                result.flipped,
                result.recheck_in,
            )
        await self._write_status(body, owner, previous, result)
        for note in view.events:
            self.post(body, note.type, note.reason, note.message)
        return view.next_in

    async def _analysis(
        self,
        body: Any,
        owner: ObjectRef,
        spec: SitsDeploymentSpec,
        observed: ObservedState,
        previous: dict[str, Any],
        policies: Mapping[str, Any],
        analyze: bool,
    ) -> AnalysisView:
        """Run the analysis step when due (or a command waits); else reuse stored state."""
        if self.analyzer is None:
            return AnalysisView(fields={})
        key = (owner.namespace, owner.name)
        if not spec.candidates:
            self._refused.pop(key, None)  # no weights left to write
            return AnalysisView(fields=finished_analysis_fields(previous))
        policy = policy_from_index(policies, spec.analysis.policy_ref.name)
        if policy is None:
            name = spec.analysis.policy_ref.name
            message = f"waiting for SitsPolicy {name!r}: not found, no analysis until it exists"
            return AnalysisView(
                fields={}, condition=(False, ConditionReason.POLICY_NOT_FOUND, message)
            )
        state = AnalysisState.from_dict(dict(previous.get("analysis") or {}))
        annotations = dict(body["metadata"].get("annotations") or {})
        next_in = self._next_analysis_in(owner, spec, policy, state)
        if not analyze and not commands_pending(state, commands_from(annotations)):
            return self._stored_analysis(spec, observed, policy, state, next_in)
        try:
            evaluation = await self.analyzer.evaluate(
                owner=owner,
                spec=spec,
                policy=policy,
                observed=observed,
                previous_status=previous,
                annotations=annotations,
            )
        except RouteRefusedError as refused:
            # Nothing decided, nothing written: the rollout waits where it stands, and
            # TrafficApplied says why; a Warning event once, when the refusal starts.
            if self._refused.get(key) != str(refused):
                self.post(body, "Warning", EventReason.REFERENCE_GRANT_MISSING, str(refused))
            self._refused[key] = str(refused)
            return self._stored_analysis(spec, observed, policy, state, next_in)
        self._refused.pop(key, None)
        decision = evaluation.decision
        candidate = spec.candidates[0].name
        return AnalysisView(
            fields=analysis_fields(decision, candidate, self.wall_clock()),
            decided_weights=decision.state.weights or None,
            phase=decision.state.phase.value,
            condition=analysis_condition(decision, spec, observed, policy, evaluation.observations),
            summary=rollout_summary(decision.state, spec, observed, policy),
            next_in=self._next_analysis_in(owner, spec, policy, decision.state),
            scaled_down=frozenset(decision.state.scaled_down),
            events=decision.events,
        )

    def _stored_analysis(
        self,
        spec: SitsDeploymentSpec,
        observed: ObservedState,
        policy: Policy,
        state: AnalysisState,
        next_in: float,
    ) -> AnalysisView:
        """The analysis as last stored, for a pass that does not evaluate."""
        if spec_change(state, revision_key(spec)) is SpecChange.NEW:
            pending = rollout_summary(state, spec, observed, policy, evaluated=False)
            return AnalysisView(
                fields={}, next_in=next_in, phase=pending.phase.value, summary=pending
            )
        return AnalysisView(
            fields={},
            decided_weights=state.weights or None,
            phase=state.phase.value,
            next_in=next_in,
            summary=rollout_summary(state, spec, observed, policy),
        )

    def _next_analysis_in(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, policy: Policy, state: AnalysisState
    ) -> float:
        """The start of this SitsDeployment's next period (core/analysis/schedule.py), or
        sooner when losers are due to be scaled down."""
        now = self.wall_clock()
        phase = period_phase(owner.namespace, owner.name, policy.interval_seconds)
        next_in = seconds_to_next_period(now, policy.interval_seconds, phase)
        delay = parse_duration(spec.rollout.scale_down_delay)
        wait = scaledown.seconds_until(state, delay, now)
        return next_in if wait is None else min(next_in, wait + SCALE_DOWN_MARGIN_SECONDS)

    def _parse(self, raw: Mapping[str, Any]) -> tuple[SitsDeploymentSpec | None, list[str]]:
        try:
            spec = parse_spec(dict(raw))
        except ValidationError as exc:
            fields = "; ".join(
                f"spec.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            return None, [fields]
        return spec, semantic_problems(spec, self.settings)

    async def _converge(
        self, body: Any, owner: ObjectRef, spec: SitsDeploymentSpec, observed: ObservedState
    ) -> ObservedState:
        desired = render_children(owner, spec, self.settings)
        children = self._with_recent_applies(owner, observed.children)
        plan = plan_children(desired, children)
        if not plan.empty:
            await self._execute(body, owner, plan)
        return observed

    def _with_recent_applies(
        self, owner: ObjectRef, children: tuple[ObservedChild, ...]
    ) -> tuple[ObservedChild, ...]:
        """The owner's children as the cache shows them, corrected by this owner's own
        applies of the last moments (which the cache may not show yet)."""
        now = self.clock()
        recent = {
            key: digest
            for key, (digest, at) in self._recent.get((owner.namespace, owner.name), {}).items()
            if now - at < RECENT_APPLY_SECONDS
        }
        patched = [
            ObservedChild(c.kind, c.name, c.variant, recent[(c.kind, c.name)])
            if (c.kind, c.name) in recent
            else c
            for c in children
        ]
        known = {(c.kind, c.name) for c in children}
        patched += [
            ObservedChild(kind, name, None, digest)
            for (kind, name), digest in recent.items()
            if (kind, name) not in known
        ]
        return tuple(patched)

    async def _execute(self, body: Any, owner: ObjectRef, plan: Plan) -> None:
        """Apply (concurrently: they are independent) and delete; one event per kind of write."""
        await asyncio.gather(*(self.writer.apply(m) for m in plan.apply))
        applied = []
        for manifest in plan.apply:
            kind, name = manifest["kind"], manifest["metadata"]["name"]
            digest = manifest["metadata"]["annotations"][naming.ANNOTATION_TEMPLATE_HASH]
            mine = self._recent.setdefault((owner.namespace, owner.name), {})
            mine[(kind, name)] = (digest, self.clock())
            metrics.CHILD_WRITES.labels(kind=kind, action="apply").inc()
            applied.append(f"{kind} {name} ({digest[:8]})")
            log.info("applied", extra={"kind": kind, "child": name, "hash": digest})
        if applied:
            self.post(body, "Normal", EventReason.APPLIED, "applied " + ", ".join(applied))
        for key in plan.delete:
            await self.writer.delete(kind=key.kind, namespace=owner.namespace, name=key.name)
            self._recent.get((owner.namespace, owner.name), {}).pop((key.kind, key.name), None)
            metrics.CHILD_WRITES.labels(kind=key.kind, action="delete").inc()
            message = f"{key.kind} {key.name} deleted: not in spec"
            self.post(body, "Normal", EventReason.DELETED, message)
            log.info("deleted", extra={"kind": key.kind, "child": key.name})

    async def _write_status(
        self, body: Any, owner: ObjectRef, previous: dict[str, Any], result: StatusResult
    ) -> None:
        key = (owner.namespace, owner.name)
        if not result.differs_from(previous):
            return
        patch = dict(result.status)
        for field_name in OWNED_FIELDS:
            patch.setdefault(field_name, None)  # merge patch: drop owned fields we no longer set
        await self.writer.patch_status(namespace=owner.namespace, name=owner.name, status=patch)
        written = {**self._written_status.get(key, {}), **patch}
        self._written_status[key] = {k: v for k, v in written.items() if v is not None}
        metrics.STATUS_WRITES.inc()
        self._announce(body, previous, result)

    def _announce(self, body: Any, previous: dict[str, Any], result: StatusResult) -> None:
        phase = result.status["phase"]
        if result.phase_changed:
            metrics.PHASE_TRANSITIONS.labels(phase=phase).inc()
            before = previous.get("phase") or "(none)"
            self.post(body, "Normal", EventReason.PHASE_CHANGED, f"{before} -> {phase}")
        for cond in result.flipped:
            warn = (cond.type in ABNORMAL_TRUE and cond.status == "True") or (
                cond.type in ABNORMAL_FALSE and cond.status == "False"
            )
            if cond.type in QUIET:
                continue  # a rollout converging is normal: PhaseChanged says it
            if cond.type in (ConditionType.READY, ConditionType.STALLED) and result.phase_changed:
                continue  # "Progressing -> Ready", "-> RolledBack", "-> Invalid" already say it
            if cond.status == "False" and not previous.get("conditions"):
                continue  # a first status needs no "X is False" events: PhaseChanged says it
            self.post(
                body,
                "Warning" if warn else "Normal",
                condition_flipped(cond.type, cond.status),
                cond.message or cond.reason,
            )
