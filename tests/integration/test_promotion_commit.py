"""Committing a decision in Git, and scaling the loser down, against the real apiserver.

The operator runs as in production (its own process, the chart's RBAC) on the local
control plane with kwok's fake GPU nodes. Prometheus is unreachable on purpose: the
analysis freezes, and only the commands (sits.dev/promote, abort, retry) decide, which
makes every test's path exact. "Nothing changes" is checked where Kubernetes records
every write: the resourceVersions of the Deployments and pods.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sits_operator.core.rollout_plan import revision_key
from sits_operator.model.spec import parse_spec
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.process import OperatorProcess, running_operator

pytestmark = pytest.mark.cluster
UNREACHABLE_PROMETHEUS = "http://127.0.0.1:9"
PERIOD = 4.0  # fast_policy's interval


@pytest.fixture(scope="module")
def operator(operator_kubeconfig: Path, tmp_path_factory: Any) -> Iterator[OperatorProcess]:
    with running_operator(operator_kubeconfig, tmp_path_factory.mktemp("operator")) as proc:
        yield proc


class Rollout:
    """One SitsDeployment "chat" in a test's namespace, with its own fast policy."""

    def __init__(self, cluster: Any, namespace: str, operator: OperatorProcess) -> None:
        self.cluster, self.ns, self.operator = cluster, namespace, operator
        self.policy = f"commit-{uuid.uuid4().hex[:6]}"
        cluster.kubectl(
            "apply", "-f", "-", input=json.dumps(fast_policy(self.policy, UNREACHABLE_PROMETHEUS))
        )
        self.manifest = deployment("chat", self.policy)
        self.manifest["spec"]["traffic"]["router"] = "none"  # no gateway pods to wait for

    def kubectl_json(self, *args: str) -> Any:
        result = self.cluster.kubectl(*args, "-n", self.ns, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def apply(self, **rollout: str) -> None:
        self.manifest["spec"]["rollout"].update(rollout)
        body = json.dumps(self.manifest)
        self.cluster.kubectl("apply", "-n", self.ns, "-f", "-", input=body)

    def commit(self, change: Callable[[list[dict[str, Any]]], None]) -> str:
        """Change spec.variants as a Git commit would; the revision key it makes."""
        variants = copy.deepcopy(self.manifest["spec"]["variants"])
        change(variants)
        self.manifest["spec"]["variants"] = variants
        self.apply()
        return revision_key(parse_spec(self.manifest["spec"]))

    def annotate(self, command: str, value: str = "1") -> None:
        self.cluster.kubectl(
            "annotate", "sitsd", "chat", "-n", self.ns, "--overwrite", f"sits.dev/{command}={value}"
        )

    def status(self) -> dict[str, Any]:
        obj = self.kubectl_json("get", "sitsd", "chat")
        return dict(obj.get("status") or {}) if obj else {}

    def analysis(self) -> dict[str, Any]:
        return dict(self.status().get("analysis") or {})

    def weights(self) -> dict[str, int]:
        return {v["name"]: v["weight"] for v in self.status().get("variants", [])}

    def items(self, kind: str, variant: str | None = None) -> list[dict[str, Any]]:
        selector = "sits.dev/deployment=chat" + (f",sits.dev/variant={variant}" if variant else "")
        found = self.kubectl_json("get", kind, "-l", selector)
        return list(found["items"]) if found else []

    def versions(self, *variants: str) -> dict[str, str]:
        """resourceVersion of each variant's Deployment and pods, by kind/name."""
        objects = [
            o for v in variants for kind in ("deployments", "pods") for o in self.items(kind, v)
        ]
        return {
            f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in objects
        }

    def settled(self, *variants: str) -> dict[str, str]:
        """The versions once two looks a few seconds apart agree (status updates done)."""
        last: dict[str, str] = {}

        def same() -> dict[str, str] | None:
            nonlocal last
            now = self.versions(*variants)
            stable, last = now == last, now
            time.sleep(2)
            return now if stable else None

        return dict(self.wait("Deployments and pods to settle", same, timeout=60))

    def ready(self, variant: str, replicas: int = 1) -> bool:
        found = self.items("deployments", variant)
        status = found[0].get("status", {}) if found else {}
        pods = [p for p in self.items("pods", variant) if p["status"].get("phase") == "Running"]
        return bool(found) and status.get("readyReplicas", 0) == replicas == len(pods)

    def events(self) -> list[str]:
        found = self.kubectl_json(
            "get", "events", "--field-selector", "involvedObject.kind=SitsDeployment"
        )
        return [e["reason"] for e in found["items"]] if found else []

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(0.5)
        pytest.fail(f"timed out waiting for {what}; status {self.status()}\n{self.operator.tail()}")

    def decided(self, command: str, phase: str) -> None:
        """Started, both variants running, then `command` until `phase`."""
        self.wait("analysis started", lambda: self.analysis().get("revisionKey"))
        self.wait("both variants ready", lambda: self.ready("v1") and self.ready("v2"))
        self.annotate(command)
        self.wait(phase, lambda: self.analysis().get("phase") == phase)

    def cleanup(self) -> None:
        self.cluster.kubectl("delete", "sitspolicy", self.policy, "--wait=false", check=False)


@pytest.fixture
def rollout(local_cluster: Any, namespace: str, operator: OperatorProcess) -> Iterator[Rollout]:
    r = Rollout(local_cluster, namespace, operator)
    yield r
    r.cleanup()


def roles_swapped(variants: list[dict[str, Any]]) -> None:
    for variant in variants:
        variant["role"] = "stable" if variant["role"] == "candidate" else "candidate"


def without(name: str) -> Callable[[list[dict[str, Any]]], None]:
    def change(variants: list[dict[str, Any]]) -> None:
        variants[:] = [v for v in variants if v["name"] != name]

    return change


def test_committing_the_promotion_changes_no_deployment_pod_or_weight(rollout: Rollout) -> None:
    rollout.apply(scaleDownDelay="1h")  # the old stable keeps running through this test
    rollout.decided("promote", "Succeeded")
    assert rollout.weights() == {"v1": 0, "v2": 100}
    before = rollout.settled("v1", "v2")

    key = rollout.commit(roles_swapped)  # v2 the stable, v1 a candidate at 0 %
    rollout.wait("commit adopted", lambda: rollout.analysis().get("revisionKey") == key)
    time.sleep(3 * PERIOD)  # three more analysis periods: nothing may follow
    status = rollout.status()
    assert (status["phase"], status["stableVariant"]) == ("Succeeded", "v2")
    assert rollout.weights() == {"v1": 0, "v2": 100}
    assert rollout.versions("v1", "v2") == before, "a Deployment or pod was written"
    services = {s["metadata"]["name"]: s["metadata"]["labels"] for s in rollout.items("services")}
    assert services["chat-v2"]["sits.dev/role"] == "stable", "roles live on the Services"

    rollout.commit(without("v1"))  # the old stable removed
    rollout.wait("v1 removed", lambda: not rollout.items("deployments", "v1"))
    time.sleep(3 * PERIOD)
    assert rollout.weights() == {"v2": 100}
    assert rollout.versions("v2") == {k: v for k, v in before.items() if "v2" in k}
    assert "analysis" not in rollout.status(), "no candidate left: the analysis is over"
    reasons = rollout.events()
    assert "PromotionCommitted" in reasons
    assert "AnalysisRestarted" not in reasons
    assert reasons.count("AnalysisStarted") == 1


def test_removing_the_rolled_back_candidate_changes_nothing_that_runs(rollout: Rollout) -> None:
    v3 = {**rollout.manifest["spec"]["variants"][1], "name": "v3", "revision": "third"}
    rollout.manifest["spec"]["variants"].append(v3)
    rollout.apply(scaleDownDelay="1h")
    rollout.wait("v3 ready", lambda: rollout.ready("v3"))
    rollout.decided("abort", "RolledBack")
    before = rollout.settled("v1", "v3")

    key = rollout.commit(without("v2"))  # one of the two losers removed
    rollout.wait("commit adopted", lambda: rollout.analysis().get("revisionKey") == key)
    time.sleep(3 * PERIOD)
    assert rollout.analysis()["phase"] == "RolledBack"
    assert rollout.weights() == {"v1": 100, "v3": 0}
    assert rollout.versions("v1", "v3") == before
    reasons = rollout.events()
    assert "RollbackCommitted" in reasons
    assert "AnalysisRestarted" not in reasons


def test_a_new_candidate_revision_after_the_commit_restarts_the_analysis(rollout: Rollout) -> None:
    rollout.apply(scaleDownDelay="1h")
    rollout.decided("promote", "Succeeded")
    key = rollout.commit(roles_swapped)
    rollout.wait("commit adopted", lambda: rollout.analysis().get("revisionKey") == key)

    def new_revision(variants: list[dict[str, Any]]) -> None:
        variants[0]["revision"] = "qwen2.5-1.5b-instruct-fix"

    key = rollout.commit(new_revision)
    rollout.wait("analysis restarted", lambda: rollout.analysis().get("revisionKey") == key)
    assert rollout.analysis()["phase"] == "Progressing"
    assert "AnalysisRestarted" in rollout.events()


def test_the_old_stable_is_scaled_to_zero_after_the_delay_and_retry_brings_it_back(
    rollout: Rollout,
) -> None:
    rollout.apply(scaleDownDelay="6s")
    rollout.decided("promote", "Succeeded")
    rollout.wait(
        "v1 at zero replicas",
        lambda: [d["spec"]["replicas"] for d in rollout.items("deployments", "v1")] == [0],
        timeout=30,
    )
    rollout.wait("v1's pod gone", lambda: not rollout.items("pods", "v1"))
    analysis = rollout.analysis()
    assert analysis["scaledDown"] == ["v1"]
    actions = [h["action"] for h in analysis["history"]]
    promote, scale = (
        next(h["at"] for h in analysis["history"] if h["action"] == a)
        for a in ("promote", "scaleDown")
    )
    assert actions[-1] == "scaleDown"
    assert 6 <= scale - promote <= 6 + 2, "scaled down on time, not a period late"
    assert "ScaledDown" in rollout.events()
    assert rollout.ready("v2"), "the promoted variant is untouched"
    assert rollout.weights() == {"v1": 0, "v2": 100}
    assert next(v for v in rollout.status()["variants"] if v["name"] == "v1")["replicas"] == 0

    rollout.annotate("retry")
    rollout.wait("v1 back", lambda: rollout.ready("v1"), timeout=60)
    assert rollout.analysis()["phase"] == "Progressing"
    assert rollout.analysis()["scaledDown"] == []


def test_a_rolled_back_candidate_gives_its_slice_back(rollout: Rollout) -> None:
    rollout.apply(scaleDownDelay="2s")
    rollout.decided("abort", "RolledBack")
    rollout.wait(
        "v2 at zero replicas",
        lambda: [d["spec"]["replicas"] for d in rollout.items("deployments", "v2")] == [0],
        timeout=30,
    )
    rollout.wait("v2's pod gone", lambda: not rollout.items("pods", "v2"))
    assert rollout.ready("v1")
    assert rollout.weights() == {"v1": 100, "v2": 0}
