"""One reconcile pass of a SitsDeployment: observe, plan, apply, write status once.

Thin orchestration over the pure core; every write it makes is also an event and a
metric, so `kubectl describe sitsd` and dashboards tell the same story.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import kopf
from pydantic import ValidationError

from sits_operator.adapters.kube import KubeWriter
from sits_operator.core import naming
from sits_operator.core.plan import Plan, plan_children
from sits_operator.core.render import render_children
from sits_operator.core.status import OWNED_FIELDS, StatusInputs, StatusResult, compute_status
from sits_operator.core.validation import semantic_problems
from sits_operator.handlers import metrics
from sits_operator.model.observed import ObservedChild, ObservedState
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, SitsDeploymentSpec, parse_spec
from sits_operator.model.status import ConditionType

log = logging.getLogger("sits_operator.reconcile")

# The watch cache lags our own writes by a moment; remember what we just applied so a
# reconcile woken in between does not apply (and announce) the same object twice.
RECENT_APPLY_SECONDS = 15.0

EventPoster = Callable[[Any, str, str, str], None]


def post_event(body: Any, type_: str, reason: str, message: str) -> None:
    """Kubernetes event on the SitsDeployment, posted by Kopf's event queue."""
    kopf.event(body, type=type_, reason=reason, message=message)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Reconciler:
    writer: KubeWriter
    settings: OperatorSettings
    post: EventPoster = post_event
    clock: Callable[[], float] = time.monotonic
    _recent: dict[tuple[str, str, str], tuple[str, float]] = field(default_factory=dict)
    _written_status: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    async def reconcile(self, body: Any, observed: ObservedState) -> None:
        started = self.clock()
        try:
            await self._reconcile(body, observed)
        except Exception:
            metrics.RECONCILES.labels(result="error").inc()
            raise
        else:
            metrics.RECONCILES.labels(result="ok").inc()
        finally:
            metrics.RECONCILE_SECONDS.observe(self.clock() - started)

    def forget(self, namespace: str, name: str) -> None:
        """Drop per-object memory when the SitsDeployment goes away."""
        self._written_status.pop((namespace, name), None)
        for key in [k for k in self._recent if k[0] == namespace and k[2].startswith(name)]:
            self._recent.pop(key, None)

    async def _reconcile(self, body: Any, observed: ObservedState) -> None:
        meta = body["metadata"]
        owner = ObjectRef(
            name=meta["name"], namespace=meta["namespace"], uid=meta["uid"],
            generation=int(meta.get("generation") or 0),
        )  # fmt: skip
        spec, problems = self._parse(body.get("spec") or {})
        if spec is not None and not problems:
            observed = await self._converge(body, owner, spec, observed)
        previous = dict(body.get("status") or {})
        result = compute_status(StatusInputs(
            generation=owner.generation, spec=spec, problems=tuple(problems),
            observed=observed, previous=previous, now=utc_now(),
        ))  # fmt: skip
        await self._write_status(body, owner, previous, result)

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
        children = self._with_recent_applies(owner.namespace, observed.children)
        plan = plan_children(desired, children)
        if not plan.empty:
            await self._execute(body, owner, plan)
        return observed

    def _with_recent_applies(
        self, namespace: str, children: tuple[ObservedChild, ...]
    ) -> tuple[ObservedChild, ...]:
        now = self.clock()
        patched = []
        for child in children:
            recent = self._recent.get((namespace, child.kind, child.name))
            if recent is not None and now - recent[1] < RECENT_APPLY_SECONDS:
                child = ObservedChild(child.kind, child.name, child.variant, recent[0])
            patched.append(child)
        known = {(c.kind, c.name) for c in children}
        for (ns, kind, name), (digest, at) in self._recent.items():
            if ns == namespace and (kind, name) not in known and now - at < RECENT_APPLY_SECONDS:
                patched.append(ObservedChild(kind, name, None, digest))
        return tuple(patched)

    async def _execute(self, body: Any, owner: ObjectRef, plan: Plan) -> None:
        for manifest in plan.apply:
            kind, name = manifest["kind"], manifest["metadata"]["name"]
            digest = manifest["metadata"]["annotations"][naming.ANNOTATION_TEMPLATE_HASH]
            await self.writer.apply(manifest)
            self._recent[(owner.namespace, kind, name)] = (digest, self.clock())
            metrics.CHILD_WRITES.labels(kind=kind, action="apply").inc()
            self.post(body, "Normal", "Applied", f"{kind} {name} applied (template {digest})")
            log.info("applied", extra={"kind": kind, "child": name, "hash": digest})
        for key in plan.delete:
            await self.writer.delete(kind=key.kind, namespace=owner.namespace, name=key.name)
            self._recent.pop((owner.namespace, key.kind, key.name), None)
            metrics.CHILD_WRITES.labels(kind=key.kind, action="delete").inc()
            self.post(body, "Normal", "Deleted", f"{key.kind} {key.name} deleted: not in spec")
            log.info("deleted", extra={"kind": key.kind, "child": key.name})

    async def _write_status(
        self, body: Any, owner: ObjectRef, previous: dict[str, Any], result: StatusResult
    ) -> None:
        key = (owner.namespace, owner.name)
        if not result.differs_from(previous) or result.status == self._written_status.get(key):
            return
        patch = dict(result.status)
        for field_name in OWNED_FIELDS:
            patch.setdefault(field_name, None)  # merge patch: drop owned fields we no longer set
        await self.writer.patch_status(namespace=owner.namespace, name=owner.name, status=patch)
        self._written_status[key] = result.status
        metrics.STATUS_WRITES.inc()
        self._announce(body, previous, result)

    def _announce(self, body: Any, previous: dict[str, Any], result: StatusResult) -> None:
        phase = result.status["phase"]
        if result.phase_changed:
            metrics.PHASE_TRANSITIONS.labels(phase=phase).inc()
            before = previous.get("phase") or "(none)"
            self.post(body, "Normal", "PhaseChanged", f"{before} -> {phase}")
        for cond in result.flipped:
            warn = (cond.type in (ConditionType.INVALID, ConditionType.UNSCHEDULABLE)
                    and cond.status == "True")  # fmt: skip
            if cond.status == "False" and cond.type != ConditionType.READY and not previous:
                continue  # a healthy first status needs no "X is False" events
            self.post(
                body, "Warning" if warn else "Normal", f"{cond.type}{cond.status}",
                cond.message or cond.reason,
            )  # fmt: skip
