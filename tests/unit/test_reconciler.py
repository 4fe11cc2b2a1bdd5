"""The reconcile orchestration with a recording writer passed in (no cluster)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from sits_operator.adapters.kube import NoopKubeWriter
from sits_operator.core.observe import child_entry
from sits_operator.core.render import render_children
from sits_operator.handlers.reconcile import Reconciler
from sits_operator.model.events import EventReason
from sits_operator.model.observed import (
    ContainerTermination,
    ObservedContainer,
    ObservedDeployment,
    ObservedPod,
    ObservedState,
)
from sits_operator.model.settings import OperatorSettings
from tests.unit.factories import OWNER, spec, variant

SETTINGS = OperatorSettings()


def body(raw_spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": OWNER.name,
            "namespace": OWNER.namespace,
            "uid": OWNER.uid,
            "generation": 1,
        },
        "spec": raw_spec,
        "status": status or {},
    }


RAW = {"variants": [variant(), variant("v2", "candidate")]}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[Reconciler, NoopKubeWriter, list[tuple[str, EventReason, str]], Clock]:
    writer, events, clock = NoopKubeWriter(), [], Clock()
    reconciler = Reconciler(
        writer=writer,
        settings=SETTINGS,
        clock=clock,
        post=lambda _body, type_, reason, message: events.append((type_, reason, message)),
    )
    return reconciler, writer, events, clock


async def test_first_pass_applies_everything_and_writes_status_once() -> None:
    reconciler, writer, events, _ = make()
    await reconciler.reconcile(body(RAW), ObservedState())
    kinds = [c[0] for c in writer.calls]
    # Two variants (Deployment + Service each), the root Service, and router builtin's
    # gateway: ServiceAccount, Role, RoleBinding, Deployment, PodDisruptionBudget.
    assert kinds == ["apply"] * 10 + ["status"]
    assert events[0][1] == "Applied"
    assert events[0][2].count("Deployment ") == 3
    assert events[0][2].count("Service ") == 3
    assert "ServiceAccount chat-gateway" in events[0][2]
    assert ("Normal", "PhaseChanged", "(none) -> Progressing") in events


async def test_watch_cache_lag_does_not_cause_a_second_apply() -> None:
    reconciler, writer, _events, clock = make()
    await reconciler.reconcile(body(RAW), ObservedState())
    writer.calls.clear()
    clock.now += 1  # woken again before the index has seen our writes
    await reconciler.reconcile(body(RAW), ObservedState())
    assert [c[0] for c in writer.calls if c[0] == "apply"] == []
    clock.now += 60  # still missing long after: someone deleted them, recreate
    await reconciler.reconcile(body(RAW), ObservedState())
    assert len([c for c in writer.calls if c[0] == "apply"]) == 10


async def test_converged_state_writes_nothing() -> None:
    reconciler, writer, events, _ = make()
    children = tuple(
        child_entry(m["kind"], m["metadata"], m["metadata"]["labels"])
        for m in render_children(OWNER, spec(*RAW["variants"]), SETTINGS)
    )
    await reconciler.reconcile(body(RAW), ObservedState(children=children))
    status = writer.calls[-1][1][2]
    writer.calls.clear()
    events.clear()
    fresh, _, fresh_events, _ = make()  # a restarted operator: no memory, status in the body
    await fresh.reconcile(body(RAW, status), ObservedState(children=children))
    assert fresh.writer.calls == []  # type: ignore[attr-defined]
    assert fresh_events == []


async def test_invalid_spec_touches_no_children() -> None:
    reconciler, writer, events, _ = make()
    bad = {
        "variants": [
            variant(lora={"enabled": False, "adapters": [{"name": "a", "source": "/a"}]}),
            variant("v2", "candidate"),
        ]
    }
    await reconciler.reconcile(body(bad), ObservedState())
    assert [c[0] for c in writer.calls] == ["status"]
    status = writer.calls[0][1][2]
    assert status["phase"] == "Invalid"
    assert events[-1][:2] == ("Warning", "InvalidTrue")
    assert "lora.enabled is false" in events[-1][2]


async def test_unparseable_spec_is_invalid_with_field_path() -> None:
    reconciler, writer, _, _ = make()
    await reconciler.reconcile(body({"variants": [{"name": "v1"}]}), ObservedState())
    status = writer.calls[0][1][2]
    assert status["phase"] == "Invalid"
    assert "spec.variants.0.role" in status["message"]


async def test_two_owners_in_one_namespace_never_touch_each_others_children() -> None:
    """Recent applies are remembered per owner: B's fresh children are not A's strays."""
    reconciler, writer, _, clock = make()
    other = body(RAW)
    other["metadata"] = {**other["metadata"], "name": "summarize", "uid": "uid-2"}
    await reconciler.reconcile(body(RAW), ObservedState())
    await reconciler.reconcile(other, ObservedState())
    writer.calls.clear()
    clock.now += 1  # neither owner's children are in the watch cache yet
    await reconciler.reconcile(body(RAW), ObservedState())
    await reconciler.reconcile(other, ObservedState())
    assert [c for c in writer.calls if c[0] == "delete"] == []


async def test_failing_candidate_container_is_a_warning_and_changes_no_child() -> None:
    """A candidate that cannot start: one Warning with the container's last words, no apply."""
    reconciler, writer, events, _ = make()
    children = tuple(
        child_entry(m["kind"], m["metadata"], m["metadata"]["labels"])
        for m in render_children(OWNER, spec(*RAW["variants"]), SETTINGS)
    )
    deployments = (
        ObservedDeployment("v1", "r1", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("v2", "r1", 1, 0, 1, 0, 1, 1),
    )
    crashing = ObservedContainer(
        "vllm",
        restart_count=3,
        waiting_reason="CrashLoopBackOff",
        last_termination=ContainerTermination(1, "Error", "error: unrecognized arguments: --x"),
    )
    pods = (ObservedPod("chat-v2-abc", "v2", "Running", containers=(crashing,)),)
    observed = ObservedState(children=children, deployments=deployments, pods=pods)
    await reconciler.reconcile(body(RAW), observed)
    assert [c[0] for c in writer.calls] == ["status"]
    status = writer.calls[0][1][2]
    assert status["phase"] == "Degraded"
    warnings = [e for e in events if e[0] == "Warning"]
    assert [w[1] for w in warnings] == ["ContainersFailingTrue"]
    assert "variant v2 pod chat-v2-abc container vllm: CrashLoopBackOff" in warnings[0][2]
    assert "unrecognized arguments: --x" in warnings[0][2]
    events.clear()
    await reconciler.reconcile(body(RAW, status), observed)
    assert events == [], "a condition that stays True is announced once"


def _reconciles(result: str) -> float:
    """sits_operator_reconciles_total{result} as Prometheus would scrape it."""
    value = REGISTRY.get_sample_value("sits_operator_reconciles_total", {"result": result})
    return value or 0.0


class FailingWriter(NoopKubeWriter):
    async def apply(self, manifest: dict[str, Any]) -> None:
        raise RuntimeError("apiserver unreachable")


async def test_every_pass_is_counted_by_its_result() -> None:
    """A pass that returns counts as ok (it once never did), one that raises as error."""
    reconciler, _, _, _ = make()
    ok, error = _reconciles("ok"), _reconciles("error")
    await reconciler.reconcile(body(RAW), ObservedState())
    await reconciler.reconcile(body(RAW), ObservedState())
    assert (_reconciles("ok"), _reconciles("error")) == (ok + 2, error)

    failing = Reconciler(writer=FailingWriter(), settings=SETTINGS, post=lambda *_: None)
    with pytest.raises(RuntimeError, match="apiserver unreachable"):
        await failing.reconcile(body(RAW), ObservedState())
    assert (_reconciles("ok"), _reconciles("error")) == (ok + 2, error + 1)
