"""A reconcile pass with an analysis, end to end without a cluster: what status says, the
events it posts, and the per-SitsDeployment metrics (read from the Prometheus registry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from sits_operator.adapters.kube import NoopKubeWriter
from sits_operator.adapters.prometheus import Target
from sits_operator.adapters.routers import NoopRouter
from sits_operator.handlers import metrics
from sits_operator.handlers.analysis import Analyzer
from sits_operator.handlers.reconcile import Reconciler
from sits_operator.model.analysis import RuleSamples, Sample
from sits_operator.model.events import EventReason
from sits_operator.model.observed import ObservedDeployment, ObservedState
from sits_operator.model.policy import Rule
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.status import Phase
from tests.unit.factories import OWNER, variant

ROOT = Path(__file__).resolve().parents[2]
SITS2026 = yaml.safe_load((ROOT / "policies" / "sits2026.yaml").read_text())["spec"]
POLICIES = {"sits2026": [SITS2026]}
READY = ObservedState(
    deployments=(
        ObservedDeployment("v1", "r1", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("v2", "r2", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("", None, 2, 2, 2, 2, 1, 1, component="gateway"),
    )
)
T0 = 30.0 * 100_000 + 1.0  # one second into a policy period


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Trickle:
    """Prometheus as it looks while the candidate gets almost no traffic."""

    def __init__(self, requests: float) -> None:
        self.requests = requests

    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        by_variant = {
            "v1": Sample(0.99 if rule.sli == "success_rate_5m" else 90.0, 500.0),
            "v2": Sample(1.0 if rule.sli == "success_rate_5m" else 80.0, self.requests),
        }
        return RuleSamples(rule.name, by_variant)


def body(name: str = OWNER.name, variants: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": OWNER.namespace,
            "uid": f"uid-{name}",
            "generation": 2,
        },
        "spec": {"variants": variants or [variant(), variant("v2", "candidate", revision="r2")]},
        "status": {},
    }


def reconciler(
    requests: float = 3.0,
) -> tuple[Reconciler, NoopKubeWriter, list[tuple[str, EventReason, str]], Clock]:
    writer, events, clock = NoopKubeWriter(), [], Clock()
    provider = Trickle(requests)
    analyzer = Analyzer(
        None,
        provider_factory=lambda _access: provider,
        router_factory=lambda _kind, _api: NoopRouter(),
        clock=clock,
    )
    return (
        Reconciler(
            writer=writer,
            settings=OperatorSettings(),
            analyzer=analyzer,
            post=lambda _body, type_, reason, message: events.append((type_, reason, message)),
            wall_clock=clock,
        ),
        writer,
        events,
        clock,
    )


def last_status(writer: NoopKubeWriter) -> dict[str, Any]:
    return dict(next(c[1][2] for c in reversed(writer.calls) if c[0] == "status"))


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


async def test_no_data_says_which_variant_lacks_how_many_requests() -> None:
    recon, writer, events, clock = reconciler(requests=3.0)
    await recon.reconcile(body(), READY, policies=POLICIES, analyze=True)
    started = last_status(writer)
    assert started["message"] == "step 1 of 5 at 10 %: 0 of 3 passing periods before step 2"
    clock.now += 30
    await recon.reconcile(body(), READY, policies=POLICIES, analyze=True)
    status = last_status(writer)
    assert status["phase"] == "Progressing"
    assert status["message"] == (
        "step 1 of 5 at 10 %: waiting for data: v2 has 3 of 20 requests in the 5m window "
        "(success-rate); v2 has 3 of 20 requests in the 1m window (latency-p95); "
        "no data for 0s of 10m, then noData.action hold"
    )
    assert conditions(status)["Analysis"] == ("False", "NoData")
    assert conditions(status)["Reconciling"] == ("True", "RolloutProgressing")
    assert conditions(status)["Ready"] == ("False", "RolloutProgressing")
    assert not [e for e in events if e[1].startswith(("Reconciling", "Stalled"))]


async def test_a_pass_between_evaluations_keeps_the_words_and_writes_nothing() -> None:
    recon, writer, _events, clock = reconciler(requests=3.0)
    for _ in range(2):
        await recon.reconcile(body(), READY, policies=POLICIES, analyze=True)
        clock.now += 30
    written = len(writer.calls)
    clock.now -= 20  # within the period: a pod event wakes the loop, no analysis due
    await recon.reconcile(body(), READY, policies=POLICIES, analyze=False)
    assert len(writer.calls) == written


async def test_missing_policy_is_reconciling_and_not_ready() -> None:
    recon, writer, _events, _clock = reconciler()
    await recon.reconcile(body(), READY, policies={}, analyze=True)
    status = last_status(writer)
    assert status["phase"] == "Ready"  # the pods are; the rollout cannot start
    assert status["message"] == (
        "waiting for SitsPolicy 'sits2026': not found, no analysis until it exists"
    )
    assert conditions(status)["Reconciling"] == ("True", "PolicyNotFound")
    assert conditions(status)["Ready"] == ("False", "PolicyNotFound")


def phase_sample(name: str, phase: Phase) -> float | None:
    labels = {"namespace": OWNER.namespace, "sits_deployment": name, "phase": phase.value}
    return REGISTRY.get_sample_value("sits_rollout_phase", labels)


def weight_sample(
    name: str, variant_name: str, metric: str = "sits_rollout_weight"
) -> float | None:
    labels = {"namespace": OWNER.namespace, "sits_deployment": name, "variant": variant_name}
    return REGISTRY.get_sample_value(metric, labels)


def candidate_sample(name: str, variant_name: str) -> float | None:
    return weight_sample(name, variant_name, "sits_rollout_candidate")


async def test_rollout_metrics_name_the_rollout_and_go_with_it() -> None:
    recon, _writer, _events, _clock = reconciler(requests=500.0)
    await recon.reconcile(body("metrics-a"), READY, policies=POLICIES, analyze=True)
    assert phase_sample("metrics-a", Phase.PROGRESSING) == 1
    others = {p: phase_sample("metrics-a", p) for p in Phase if p is not Phase.PROGRESSING}
    assert set(others.values()) == {0}, others
    assert (weight_sample("metrics-a", "v1"), weight_sample("metrics-a", "v2")) == (90, 10)
    assert (candidate_sample("metrics-a", "v1"), candidate_sample("metrics-a", "v2")) == (0, 1)

    recon.forget(OWNER.namespace, "metrics-a")
    assert phase_sample("metrics-a", Phase.PROGRESSING) is None
    assert weight_sample("metrics-a", "v2") is None
    assert candidate_sample("metrics-a", "v2") is None


@pytest.mark.parametrize(
    ("phase", "candidate"),
    [("Progressing", 1), ("Paused", 1), ("Promoting", 1), ("Succeeded", 0), ("RolledBack", 0)],
)
def test_a_candidate_counts_only_while_it_is_analysed(phase: str, candidate: int) -> None:
    rows = [{"name": "v1", "role": "stable", "weight": 90}, {"name": "v2", "role": "candidate"}]
    metrics.observe_rollout(OWNER.namespace, "metrics-c", {"phase": phase, "variants": rows})
    assert (candidate_sample("metrics-c", "v1"), candidate_sample("metrics-c", "v2")) == (
        0,
        candidate,
    )
    metrics.forget_rollout(OWNER.namespace, "metrics-c")


def test_a_variant_removed_from_the_spec_loses_its_weight_series() -> None:
    rows = [{"name": "v1", "weight": 0}, {"name": "v2", "weight": 100}]
    metrics.observe_rollout(OWNER.namespace, "metrics-b", {"phase": "Succeeded", "variants": rows})
    assert weight_sample("metrics-b", "v1") == 0
    metrics.observe_rollout(OWNER.namespace, "metrics-b", {"phase": "Ready", "variants": [rows[1]]})
    assert weight_sample("metrics-b", "v1") is None
    assert (phase_sample("metrics-b", Phase.READY), phase_sample("metrics-b", Phase.SUCCEEDED)) == (
        1,
        0,
    )
    metrics.observe_rollout(OWNER.namespace, "metrics-b", {"phase": "Invalid"})
    assert weight_sample("metrics-b", "v2") == 100, "an invalid spec keeps the last weights"
    metrics.forget_rollout(OWNER.namespace, "metrics-b")
    assert phase_sample("metrics-b", Phase.INVALID) is None
    metrics.forget_rollout(OWNER.namespace, "metrics-b")  # twice: harmless
