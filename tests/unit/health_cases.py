"""SitsDeployment objects as the operator writes them, one per health an SRE must tell apart.

Built by the operator's own code, never by hand: the analysis engine (`decide`) moves a
rollout period by period, `compute_status` (what the reconciler writes) turns it into a
status, and the result goes through JSON as the apiserver would return it. The Argo CD
check (charts/sits-operator/argocd/health.lua) and the kstatus reading are tested over
these; `tests/unit/fixtures/sitsdeployment-health.json` is a recorded copy of them
(regenerate: `.venv/bin/python -m tests.unit.health_cases`), for people trying the check
with `argocd admin settings resource-overrides health`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from sits_operator.core.analysis import decide
from sits_operator.core.analysis_status import analysis_fields
from sits_operator.core.kstatus import STALL_AFTER_SECONDS
from sits_operator.core.rollout_plan import build_plan
from sits_operator.core.rollout_summary import analysis_condition, summarize
from sits_operator.core.status import StatusInputs, compute_status
from sits_operator.model.analysis import AnalysisState, Command, Decision, RuleSamples, Sample
from sits_operator.model.observed import (
    ContainerTermination,
    ObservedContainer,
    ObservedDeployment,
    ObservedPod,
    ObservedState,
)
from sits_operator.model.policy import parse_policy
from tests.unit.factories import spec, variant

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "sitsdeployment-health.json"
POLICY = parse_policy(
    "sits2026", yaml.safe_load((ROOT / "policies" / "sits2026.yaml").read_text())["spec"]
)
SPEC = spec(variant(), variant("v2", "candidate", revision="r2"))
GENERATION = 3
T0 = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC).timestamp()
GATEWAY = ObservedDeployment("", None, 2, 2, 2, 2, 1, 1, component="gateway")
READY = ObservedState(
    deployments=(
        ObservedDeployment("v1", "r1", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("v2", "r2", 1, 1, 1, 1, 1, 1),
        GATEWAY,
    )
)
CRASH_LOG = "api_server.py: error: unrecognized arguments: --max-model-lenght=8192"
CRASHING = ObservedState(
    deployments=(
        ObservedDeployment("v1", "r1", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("v2", "r2", 1, 0, 1, 0, 1, 1),
        GATEWAY,
    ),
    pods=(
        ObservedPod(
            "chat-v2-7d9f",
            "v2",
            "Running",
            containers=(
                ObservedContainer(
                    "vllm",
                    restart_count=4,
                    waiting_reason="CrashLoopBackOff",
                    last_termination=ContainerTermination(1, "Error", CRASH_LOG),
                ),
            ),
        ),
    ),
)
PLAN = build_plan(SPEC, READY)


def observations(v2_success: float = 1.0, v2_requests: float = 400.0) -> tuple[RuleSamples, ...]:
    """One period of Prometheus answers for both SITS2026 rules."""
    good = {"success-rate": 0.995, "latency-p95": 90.0}
    v2 = {"success-rate": v2_success, "latency-p95": 80.0}
    return tuple(
        RuleSamples(
            rule.name,
            {"v1": Sample(good[rule.name], 900.0), "v2": Sample(v2[rule.name], v2_requests)},
        )
        for rule in POLICY.rules
    )


HEALTHY = observations()
FAILING = observations(v2_success=0.80)
TRICKLE = observations(v2_requests=3.0)
PROMETHEUS_DOWN = tuple(RuleSamples(r.name, error="ConnectionError: refused") for r in POLICY.rules)


@dataclass
class Rollout:
    """The engine, period after period, as the reconcile loop drives it."""

    state: AnalysisState = field(default_factory=AnalysisState)
    now: float = T0
    decision: Decision | None = None
    samples: tuple[RuleSamples, ...] = ()

    def periods(self, samples: tuple[RuleSamples, ...], count: int = 1, **commands: str) -> Rollout:
        for _ in range(count):
            self.decision = decide(
                policy=POLICY,
                plan=PLAN,
                state=self.state,
                observations=samples,
                observed_weights={},
                commands={Command(name): value for name, value in commands.items()},
                now=self.now,
            )
            self.state, self.samples = self.decision.state, samples
            self.now += POLICY.interval_seconds
        return self


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(
    rollout: Rollout | None,
    *,
    observed: ObservedState = READY,
    problems: tuple[str, ...] = (),
    condition: tuple[bool, str, str] | None = None,
    held: float = 0.0,
) -> dict[str, Any]:
    """What the reconciler writes after a pass, the same inputs having held `held` s."""
    now = T0 + 3600 if rollout is None else rollout.now

    def at(seconds: float, previous: dict[str, Any]) -> dict[str, Any]:
        state = rollout.state if rollout is not None else None
        decision = rollout.decision if rollout is not None else None
        judged = condition
        if decision is not None and rollout is not None:
            judged = analysis_condition(decision, PLAN, POLICY, rollout.samples) or condition
        inputs = StatusInputs(
            generation=GENERATION,
            spec=SPEC,
            problems=problems,
            observed=observed,
            previous=previous,
            now=iso(seconds),
            decided_weights=(state.weights or None) if state is not None else None,
            analysis_phase=state.phase.value if state is not None else None,
            analysis_condition=judged,
            now_seconds=seconds,
            analysis_summary=summarize(state, PLAN, POLICY) if state is not None else None,
        )
        written = compute_status(inputs).status
        if decision is not None:
            written = {**written, **analysis_fields(decision, "v2", seconds)}
        return written

    first = at(now - held, {}) if held else {}
    return at(now, first)


def sitsdeployment(written: dict[str, Any] | None, generation: int = GENERATION) -> dict[str, Any]:
    """The object as `kubectl get -o json` shows it (through JSON: no tuples, no NaN)."""
    obj: dict[str, Any] = {
        "apiVersion": "sits.dev/v1alpha1",
        "kind": "SitsDeployment",
        "metadata": {"name": "chat", "namespace": "prod", "generation": generation},
        "spec": {"variants": [variant(), variant("v2", "candidate", revision="r2")]},
    }
    if written is not None:
        obj["status"] = written
    loaded: dict[str, Any] = json.loads(json.dumps(obj, allow_nan=False))
    return loaded


def started() -> Rollout:
    return Rollout().periods(HEALTHY)


NO_POLICY = (False, "PolicyNotFound", "waiting for SitsPolicy 'sits2026': not found")

# name -> (builder, Argo CD health, kstatus reading: Current, InProgress or Failed)
CASES: Mapping[str, tuple[Callable[[], dict[str, Any]], str, str]] = {
    # kstatus has nothing to read before the first status (no observedGeneration, no
    # condition): Current. The operator writes one on its first pass, within a second.
    "created-not-yet-seen": (lambda: sitsdeployment(None), "Progressing", "Current"),
    "spec-edited-not-yet-observed": (
        lambda: sitsdeployment(status(None), generation=GENERATION + 1),
        "Progressing",
        "InProgress",
    ),
    "pods-starting": (
        lambda: sitsdeployment(status(None, observed=ObservedState(deployments=(GATEWAY,)))),
        "Progressing",
        "InProgress",
    ),
    "steady-without-a-rollout": (
        lambda: sitsdeployment(status(None)),
        "Healthy",
        "Current",
    ),
    "policy-missing": (
        lambda: sitsdeployment(status(None, condition=NO_POLICY)),
        "Progressing",
        "InProgress",
    ),
    "policy-missing-for-long": (
        lambda: sitsdeployment(status(None, condition=NO_POLICY, held=STALL_AFTER_SECONDS)),
        "Degraded",
        "Failed",
    ),
    "stepping": (
        lambda: sitsdeployment(status(started().periods(HEALTHY, 2))),
        "Progressing",
        "InProgress",
    ),
    "waiting-for-data": (
        lambda: sitsdeployment(status(started().periods(TRICKLE, 2))),
        "Progressing",
        "InProgress",
    ),
    "candidate-pods-not-ready": (
        lambda: sitsdeployment(
            status(
                started(),
                observed=ObservedState(deployments=(*READY.deployments[:1], GATEWAY)),
            )
        ),
        "Progressing",
        "InProgress",
    ),
    "prometheus-down": (
        lambda: sitsdeployment(status(started().periods(PROMETHEUS_DOWN))),
        "Progressing",
        "InProgress",
    ),
    "prometheus-down-for-long": (
        lambda: sitsdeployment(
            status(started().periods(PROMETHEUS_DOWN), held=STALL_AFTER_SECONDS)
        ),
        "Degraded",
        "Failed",
    ),
    "paused-by-hand": (
        lambda: sitsdeployment(status(started().periods(HEALTHY, pause="1"))),
        "Suspended",
        "InProgress",
    ),
    "promoting": (
        lambda: sitsdeployment(status(started().periods(HEALTHY, 15))),
        "Progressing",
        "InProgress",
    ),
    "succeeded": (
        lambda: sitsdeployment(status(started().periods(HEALTHY, 16))),
        "Healthy",
        "Current",
    ),
    "promoted-by-hand": (
        lambda: sitsdeployment(status(started().periods(HEALTHY, promote="1"))),
        "Healthy",
        "Current",
    ),
    "rolled-back": (
        lambda: sitsdeployment(status(started().periods(FAILING, 2))),
        "Degraded",
        "Failed",
    ),
    "aborted-by-hand": (
        lambda: sitsdeployment(status(started().periods(HEALTHY, abort="1"))),
        "Degraded",
        "Failed",
    ),
    "candidate-crash-looping": (
        lambda: sitsdeployment(status(started(), observed=CRASHING)),
        "Degraded",
        "InProgress",
    ),
    "candidate-crash-looping-for-long": (
        lambda: sitsdeployment(status(started(), observed=CRASHING, held=STALL_AFTER_SECONDS)),
        "Degraded",
        "Failed",
    ),
    "invalid-spec": (
        lambda: sitsdeployment(
            status(None, problems=("spec.variants[1].lora: lora.enabled is false",))
        ),
        "Degraded",
        "Failed",
    ),
}


def recorded() -> list[dict[str, Any]]:
    """Every case as the fixture file holds it."""
    return [
        {"name": name, "argocd": argocd, "kstatus": kstatus, "object": build()}
        for name, (build, argocd, kstatus) in CASES.items()
    ]


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(recorded(), indent=2) + "\n")
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({len(CASES)} SitsDeployments)")
