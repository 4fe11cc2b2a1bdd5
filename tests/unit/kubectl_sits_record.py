"""Record the SitsDeployments the `kubectl sits` screen tests read, as the operator writes them.

Each scenario runs this checkout's real `Reconciler` (its analysis with a fake Prometheus,
no router, no cluster) period by period, feeding every status it writes back in as the
apiserver would; the pods are the operator's own rendered pod templates with a kubelet-like
status. The result is kept in tests/unit/fixtures/kubectl-sits/ so that the screens are
tested against recorded objects; regenerate after a status change with
`.venv/bin/python -m tests.unit.kubectl_sits_record`.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from sits_operator.adapters.kube import NoopKubeWriter
from sits_operator.adapters.prometheus import Target
from sits_operator.adapters.routers import NoopRouter, TrafficRouter
from sits_operator.core.naming import (
    LABEL_APP_COMPONENT,
    LABEL_COMPONENT,
    LABEL_DEPLOYMENT,
    LABEL_PART_OF,
    LABEL_VARIANT,
    Component,
    Container,
)
from sits_operator.core.render import render_children
from sits_operator.handlers.analysis import Analyzer
from sits_operator.handlers.reconcile import Reconciler
from sits_operator.model.analysis import Command, RuleSamples, Sample, command_annotation
from sits_operator.model.observed import (
    ObservedContainer,
    ObservedDeployment,
    ObservedPod,
    ObservedState,
)
from sits_operator.model.policy import Rule
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, parse_spec

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "kubectl-sits"
POLICY = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
EXAMPLE = yaml.safe_load((REPO / "examples" / "chat-canary.yaml").read_text())
NAMESPACE, NAME, UID = "sits-demo", "chat", "9d1c7f1e-2f4b-4a53-9a55-3b1f0c2d4e5f"
PERIOD = 30.0  # SITS2026's interval
T0 = 1_780_000_000.0 - 1_780_000_000.0 % PERIOD + 1.0  # one second into a period
Values = dict[str, dict[str, tuple[float | None, float]]]  # sli -> variant -> (value, requests)


def values(success: float = 1.0, requests: float = 400.0, p95: float = 61.2) -> Values:
    """Stable healthy; the candidate as given."""
    return {
        "success_rate_5m": {"v1": (0.9987, 1800.0), "v2": (success, requests)},
        "latency_p95_ms": {"v1": (58.4, 1800.0), "v2": (p95, requests)},
    }


class Prometheus:
    def __init__(self) -> None:
        self.values: Values = values()

    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        found = self.values.get(rule.sli, {})
        return RuleSamples(rule.name, {v: Sample(*sample) for v, sample in found.items()})


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


Step = Callable[["Scenario"], None]


class Scenario:
    """One SitsDeployment under the real reconciler, one pass per policy period."""

    def __init__(self) -> None:
        spec = copy.deepcopy(EXAMPLE["spec"])
        spec["traffic"].pop("initialWeights")
        self.body: dict[str, Any] = {
            "apiVersion": "sits.dev/v1alpha1",
            "kind": "SitsDeployment",
            "metadata": {
                "name": NAME,
                "namespace": NAMESPACE,
                "uid": UID,
                "generation": 1,
                "resourceVersion": "4711",
                "creationTimestamp": "2026-05-28T20:20:00Z",
                "annotations": {},
            },
            "spec": spec,
            "status": {},
        }
        self.clock, self.prometheus, self.writer = Clock(), Prometheus(), NoopKubeWriter()
        self.ready = {"v1": True, "v2": True}

        def router(kind: str, api: Any) -> TrafficRouter:
            return NoopRouter()

        analyzer = Analyzer(
            api=None,
            provider_factory=lambda _access: self.prometheus,
            router_factory=router,
            clock=self.clock,
        )
        self.reconciler = Reconciler(
            writer=self.writer,
            settings=OperatorSettings(),
            analyzer=analyzer,
            clock=self.clock,
            wall_clock=self.clock,
            post=lambda *_: None,
        )

    def observed(self) -> ObservedState:
        deployments = [
            ObservedDeployment(v, "r", 1, int(ok), 1, int(ok), 1, 1) for v, ok in self.ready.items()
        ]
        gateway = ObservedDeployment("", None, 2, 2, 2, 2, 1, 1, component="gateway")
        pods = tuple(
            ObservedPod(
                f"{NAME}-{v}-x",
                v,
                "Running",
                node_name="gpu-a100-0",
                containers=(
                    ObservedContainer(
                        "vllm",
                        restart_count=0 if ok else 5,
                        ready=ok,
                        waiting_reason=None if ok else "CrashLoopBackOff",
                        waiting_message=None
                        if ok
                        else "back-off 40s restarting failed container vllm",
                    ),
                ),
            )
            for v, ok in self.ready.items()
        )
        return ObservedState(deployments=(*deployments, gateway), pods=pods)

    async def periods(self, count: int) -> None:
        policies = {POLICY["metadata"]["name"]: [POLICY["spec"]]}
        for _ in range(count):
            self.writer.calls.clear()
            await self.reconciler.reconcile(
                self.body, self.observed(), policies=policies, analyze=True
            )
            for call, written in self.writer.calls:
                if call == "status":
                    self.body["status"] = {**self.body["status"], **written[2]}
            self.clock.now += PERIOD

    def scaled_down(self, pod: dict[str, Any]) -> bool:
        """The pods of a variant the operator scaled to zero are gone."""
        gone = self.body["status"].get("analysis", {}).get("scaledDown", [])
        return pod["metadata"]["labels"].get(LABEL_VARIANT) in gone

    def record(self) -> dict[str, Any]:
        return {
            "object": self.body,
            "pods": [p for p in pods(self.body["spec"], self.ready) if not self.scaled_down(p)],
            "policy": POLICY,
            "now": self.clock.now - PERIOD + 12.0,  # 12 s after the last pass
        }


def pods(raw_spec: dict[str, Any], ready: dict[str, bool]) -> list[dict[str, Any]]:
    """The operator's pod templates as kwok's nodes run them, plus two gateway pods."""
    owner = ObjectRef(name=NAME, namespace=NAMESPACE, uid=UID, generation=1)
    hashes = {"v1": "5c7d9b7f4-x2x9z", "v2": "6f8b4d9c7-k7q4m"}
    found = []
    for manifest in render_children(owner, parse_spec(raw_spec), OperatorSettings()):
        labels = manifest.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {})
        variant = labels.get(LABEL_VARIANT)
        if manifest["kind"] != "Deployment" or variant is None:
            continue
        template = manifest["spec"]["template"]
        containers = [
            {k: c[k] for k in ("name", "image", "resources") if k in c}
            for c in template["spec"]["containers"]
        ]
        found.append(
            pod(
                f"{manifest['metadata']['name']}-{hashes[variant]}",
                labels,
                containers,
                f"gpu-a100-{int(variant[1:]) - 1}",
                ready[variant],
            )
        )
    gateway = Component.GATEWAY.value
    gateway_labels = {
        LABEL_PART_OF: NAME,
        LABEL_DEPLOYMENT: NAME,
        LABEL_COMPONENT: gateway,
        LABEL_APP_COMPONENT: gateway,
    }
    for index, suffix in enumerate(("b8d4q", "m2v7c")):
        container = {"name": "sits-gateway", "image": "ghcr.io/sits-dev/sits-inference:0.1.0"}
        found.append(
            pod(
                f"{NAME}-gateway-7b9d6c5f8-{suffix}",
                gateway_labels,
                [container],
                f"gpu-a100-{index}",
                True,
            )
        )
    return found


def pod(
    name: str, labels: dict[str, str], containers: list[dict[str, Any]], node: str, ready: bool
) -> dict[str, Any]:
    running = {"running": {"startedAt": "2026-05-28T20:20:03Z"}}
    crashing = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels,
            "creationTimestamp": "2026-05-28T20:20:01Z",
        },
        "spec": {"containers": containers, "nodeName": node},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "ready": ok,
                    "restartCount": 0 if ok else 5,
                    "state": running if ok else crashing,
                }
                for c in containers
                for ok in [ready or c["name"] != Container.VLLM]
            ],
        },
    }


def observe(found: Values) -> Step:
    def step(s: Scenario) -> None:
        s.prometheus.values = found

    return step


def annotate(key: str, value: str) -> Step:
    def step(s: Scenario) -> None:
        s.body["metadata"]["annotations"][key] = value

    return step


def crash(s: Scenario) -> None:
    s.ready["v2"] = False


# name -> steps; an int is that many periods.
SCENARIOS: dict[str, list[Step | int]] = {
    "progressing-no-data": [observe(values(requests=3.0)), 2],
    "progressing": [6],
    "paused": [
        5,
        annotate(command_annotation(Command.PAUSE), "2026-05-28T20:22:41Z"),
        1,
        annotate(command_annotation(Command.ABORT), "2026-05-28T20:23:30Z"),  # not acted on yet
    ],
    "rolled-back": [5, observe(values(success=0.75, p95=1381.0)), 3],
    "succeeded": [40],
    "degraded": [4, crash, 1],
}


async def record(name: str) -> dict[str, Any]:
    scenario = Scenario()
    for step in SCENARIOS[name]:
        if isinstance(step, int):
            await scenario.periods(step)
        else:
            step(scenario)
    return scenario.record()


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name in SCENARIOS:
        recorded = asyncio.run(record(name))
        (FIXTURES / f"{name}.json").write_text(json.dumps(recorded, indent=1) + "\n")
        print(name, recorded["object"]["status"]["phase"])


if __name__ == "__main__":
    main()
