"""The reconcile pass around the analysis: a promotion committed in Git and the scale-down
of the losing variant, with the operator's clocks injected (simulated time, no sleeps)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sits_operator.adapters.kube import KubeApiError, NoopKubeWriter
from sits_operator.adapters.prometheus import Target
from sits_operator.adapters.routers import TrafficRouter
from sits_operator.handlers.analysis import Analyzer
from sits_operator.handlers.reconcile import Reconciler
from sits_operator.model.analysis import RuleSamples
from sits_operator.model.observed import ObservedDeployment, ObservedState
from sits_operator.model.policy import Rule
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, SitsDeploymentSpec
from tests.unit.factories import OWNER, variant

ROOT = Path(__file__).resolve().parents[2]
POLICIES = {"sits2026": [yaml.safe_load((ROOT / "policies" / "sits2026.yaml").read_text())["spec"]]}
V1 = variant("v1", "stable", revision="a")
V2 = variant("v2", "candidate", revision="b")
# One second into a 30 s period of the policy, so the next boundary is 29.5 s away.
START = 30.0 * 100_000 + 1.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


class DownPrometheus:
    """Every query fails: the analysis freezes, and only commands move it."""

    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        return RuleSamples(rule.name, error="connection refused")


class Operator:
    """A reconciler with a recording writer, an analyzer on the same simulated clock."""

    def __init__(
        self, *variants: dict[str, Any], router: TrafficRouter | None = None, **rollout: str
    ) -> None:
        self.clock, self.writer = Clock(), NoopKubeWriter()
        self.events: list[tuple[str, str, str]] = []
        # Variants whose Deployment has no ready pod in the next passes.
        self.unready: set[str] = set()
        analyzer = Analyzer(None, lambda _access: DownPrometheus(), clock=self.clock)
        if router is not None:
            analyzer.router_factory = lambda _kind, _api: router
        self.reconciler = Reconciler(
            writer=self.writer,
            settings=OperatorSettings(),
            analyzer=analyzer,
            post=lambda _body, type_, reason, message: self.events.append((type_, reason, message)),
            clock=self.clock,
            wall_clock=self.clock,
        )
        self.spec: dict[str, Any] = {"variants": list(variants), "rollout": rollout}
        self.annotations: dict[str, str] = {}
        self.status: dict[str, Any] = {}

    def body(self) -> dict[str, Any]:
        meta = {"name": OWNER.name, "namespace": OWNER.namespace, "uid": OWNER.uid}
        return {
            "metadata": {**meta, "generation": 1, "annotations": dict(self.annotations)},
            "spec": self.spec,
            "status": self.status,
        }

    async def run(self, *, after: float = 0.0, analyze: bool = True) -> float | None:
        """One pass `after` seconds later; the writer's calls are those of this pass."""
        self.clock.now += after
        self.writer.calls.clear()
        self.events.clear()
        ready = ObservedState(
            deployments=tuple(
                ObservedDeployment(v["name"], v["revision"], 1, ready, 1, ready, 1, 1)
                for v in self.spec["variants"]
                for ready in [0 if v["name"] in self.unready else 1]
            )
        )
        next_in = await self.reconciler.reconcile(
            self.body(), ready, policies=POLICIES, analyze=analyze
        )
        for kind, args in self.writer.calls:
            if kind == "status":  # what the watch cache will show next
                merged = {**self.status, **args[2]}
                self.status = {k: v for k, v in merged.items() if v is not None}
        return next_in

    def applied(self) -> dict[str, dict[str, Any]]:
        return {
            f"{m['kind']}/{m['metadata']['name']}": m
            for kind, m in self.writer.calls
            if kind == "apply"
        }

    def deleted(self) -> list[str]:
        return [f"{k}/{n}" for kind, (k, _ns, n) in self.writer.calls if kind == "delete"]

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.events]

    def weights(self) -> dict[str, int]:
        return {row["name"]: row["weight"] for row in self.status["variants"]}

    async def promoted(self) -> None:
        await self.run()
        self.annotations["sits.dev/promote"] = "1"
        await self.run(after=1)
        assert self.status["analysis"]["phase"] == "Succeeded"


async def test_committing_the_promotion_applies_only_the_services() -> None:
    op = Operator(V1, V2)
    await op.promoted()
    op.spec["variants"] = [{**V1, "role": "candidate"}, {**V2, "role": "stable"}]
    await op.run(after=1)
    assert sorted(op.applied()) == ["Service/chat-v1", "Service/chat-v2"]
    assert op.reasons() == ["Applied", "PromotionCommitted"]
    assert "AnalysisRestarted" not in op.reasons()
    assert (op.status["phase"], op.weights()) == ("Succeeded", {"v1": 0, "v2": 100})

    op.spec["variants"] = [{**V2, "role": "stable"}]
    await op.run(after=1)
    assert sorted(op.deleted()) == ["Deployment/chat-v1", "Service/chat-v1"]
    assert [k for k in op.applied() if k.startswith("Deployment/")] == []
    assert op.weights() == {"v2": 100}
    assert "analysis" not in op.status, "no candidate left: the analysis is over"


async def test_a_commit_with_a_new_revision_restarts_and_rolls_that_variant() -> None:
    op = Operator(V1, V2)
    await op.promoted()
    op.spec["variants"] = [{**V1, "role": "candidate", "revision": "a2"}, {**V2, "role": "stable"}]
    await op.run(after=1)
    assert "Deployment/chat-v1" in op.applied()
    assert "Deployment/chat-v2" not in op.applied()
    assert "AnalysisRestarted" in op.reasons()
    assert op.status["analysis"]["phase"] == "Progressing"


async def test_the_old_stable_scales_to_zero_after_the_delay_and_retry_brings_it_back() -> None:
    op = Operator(V1, V2, scaleDownDelay="10s")
    await op.promoted()
    # Due 10 s after the promotion (0.5 s ago), plus a 0.5 s margin; the period is later.
    assert await op.run(after=0.5) == 10.0, "woken when the scale-down is due"
    await op.run(after=9.0)
    assert "ScaledDown" not in op.reasons()
    await op.run(after=1.0)
    assert op.reasons() == ["ScaledDown"]
    assert op.status["analysis"]["scaledDown"] == ["v1"]
    assert op.reconciler.recheck_in(OWNER.namespace, OWNER.name) == 0.0, "render it at once"
    await op.run(after=0.1, analyze=False)
    assert op.applied()["Deployment/chat-v1"]["spec"]["replicas"] == 0
    assert {r["name"]: r["replicas"] for r in op.status["variants"]} == {"v1": 0, "v2": 1}
    assert op.status["phase"] == "Succeeded"

    op.annotations["sits.dev/retry"] = "1"
    await op.run(after=5, analyze=False)
    assert "Retry" in op.reasons()
    await op.run(after=0.1, analyze=False)
    assert op.applied()["Deployment/chat-v1"]["spec"]["replicas"] == 1


async def test_a_rolled_back_candidate_scales_to_zero() -> None:
    op = Operator(V1, V2, scaleDownDelay="0s")
    await op.run()
    op.annotations["sits.dev/abort"] = "1"
    await op.run(after=1)
    await op.run(after=1)
    assert op.reasons() == ["ScaledDown"]
    await op.run(after=0.1, analyze=False)
    assert op.applied()["Deployment/chat-v2"]["spec"]["replicas"] == 0
    assert op.weights() == {"v1": 100, "v2": 0}


class RefusingStatusWriter(NoopKubeWriter):
    """The apiserver refuses status writes (429) while `refusing`."""

    refusing = False

    async def patch_status(self, *, namespace: str, name: str, status: dict[str, Any]) -> None:
        if self.refusing:
            raise KubeApiError(status=429, reason="Too Many Requests")
        await super().patch_status(namespace=namespace, name=name, status=status)


async def test_a_decision_whose_status_write_is_refused_is_announced_once_written() -> None:
    """A refused write leaves the decision untaken: the next pass takes it again, so
    announcing it before the write would say it twice (issue 18, control-plane faults)."""
    op = Operator(V1, V2)
    writer = op.reconciler.writer = op.writer = RefusingStatusWriter()
    await op.run()
    op.annotations["sits.dev/promote"] = "1"
    writer.refusing = True
    with pytest.raises(KubeApiError):
        await op.run(after=1)
    assert "Promoted" not in op.reasons()
    writer.refusing = False
    await op.run(after=5)
    assert op.reasons().count("Promoted") == 1
    assert op.status["analysis"]["phase"] == "Succeeded"


class StatusFollowingGateway:
    """The built-in gateway's read-back: the weights of status.traffic as last written
    (what every gateway pod applies once its watch has seen the status)."""

    def __init__(self, op: Callable[[], Operator]) -> None:
        self.op = op

    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        rows = self.op().status.get("traffic", {}).get("weights", [])
        return {row["variant"]: row["weight"] for row in rows}

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        return None


async def test_a_candidate_ready_late_gets_its_step_weight_not_the_unready_zero() -> None:
    """While v2 has no ready pod, status.traffic routes it nothing; the pass that first
    sees it ready must not take that 0 for a decision (it left the candidate at 0 %, with
    no data ever, in a live run)."""
    holder: list[Operator] = []
    op = Operator(V1, V2, router=StatusFollowingGateway(lambda: holder[0]))
    holder.append(op)
    op.unready = {"v2"}
    await op.run()
    assert op.status["analysis"]["weights"] == {"v1": 90, "v2": 10}
    assert op.weights() == {"v1": 100, "v2": 0}
    op.unready = set()
    for _ in range(3):
        await op.run(after=30)
        assert op.status["analysis"]["weights"] == {"v1": 90, "v2": 10}
        assert op.weights() == {"v1": 90, "v2": 10}
