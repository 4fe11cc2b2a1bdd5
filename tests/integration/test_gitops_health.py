"""Health as Argo CD and Flux read it, over statuses recorded from real rollouts.

The analysis scenarios' set-up (real operator, real apiserver, real Prometheus scraping
synthetic request metrics, tests/integration/test_analysis.py): each test polls the whole
SitsDeployment while a rollout moves and runs the chart's Argo CD check
(charts/sits-operator/argocd/health.lua) with a real Lua interpreter, and the kstatus
reading, over every object seen.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.integration import test_analysis as scenarios
from tests.integration.test_analysis import HEALTHY, Scenario
from tests.unit.test_argocd_health import argocd_health, kstatus

from sits_localcluster.synthetic import Profile
from sits_operator_testing.manifests import deployment, fast_policy

pytestmark = pytest.mark.cluster

# kwok runs no gateway pod: with the builtin router TrafficApplied could never be True here
# (the live scenarios check health with real gateways), so these rollouts route nothing.
NO_GATEWAY = {"router": "none"}

# The analysis scenarios' fixtures (traffic and prometheus come from conftest.py).
capacity = scenarios.capacity
operator = scenarios.operator
scenario = scenarios.scenario


@dataclass(frozen=True)
class Seen:
    phase: str
    argocd: str
    kstatus: str
    message: str
    conditions: dict[str, dict[str, Any]]


class Recorder:
    """Polls the SitsDeployment and reads each distinct status as the tools would."""

    def __init__(self, scenario: Scenario, tmp_path: Path) -> None:
        self.scenario, self.tmp_path = scenario, tmp_path
        self.seen: list[Seen] = []

    def poll(self) -> Seen:
        out = self.scenario.cluster.kubectl(
            "get", "sitsd", "chat", "-n", self.scenario.ns, "-o", "json"
        )
        obj = json.loads(out.stdout)
        status = obj.get("status") or {}
        health, _ = argocd_health(obj, self.tmp_path)
        seen = Seen(
            str(status.get("phase")),
            health,
            kstatus(obj),
            str(status.get("message", "")),
            {c["type"]: c for c in status.get("conditions", [])},
        )
        if not self.seen or self.seen[-1] != seen:
            self.seen.append(seen)
        return seen

    def until(self, what: str, check: Any, timeout: float = 120) -> Seen:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = self.poll()
            if check(seen):
                return seen
            time.sleep(0.4)
        pytest.fail(f"timed out waiting for {what}; seen: {self.summary()}")

    def summary(self) -> list[tuple[str, str, str, str]]:
        return [(s.phase, s.argocd, s.kstatus, s.message) for s in self.seen]


def test_healthy_rollout_is_progressing_then_healthy(scenario: Scenario, tmp_path: Path) -> None:
    scenario.start(HEALTHY, traffic=NO_GATEWAY)
    record = Recorder(scenario, tmp_path)
    done = record.until("Succeeded", lambda s: s.phase == "Succeeded")
    assert (done.argocd, done.kstatus) == ("Healthy", "Current"), record.summary()
    assert done.conditions["Ready"]["reason"] == "Succeeded"
    assert done.message.startswith("succeeded: all traffic on v2"), done.message
    moving = [s for s in record.seen if s.phase in ("Progressing", "Promoting")]
    assert moving, record.summary()
    assert {(s.argocd, s.kstatus) for s in moving} == {("Progressing", "InProgress")}
    assert "Degraded" not in {s.argocd for s in record.seen}, record.summary()
    steps = [s.message for s in moving if re.match(r"step \d of 2 at \d+ %: ", s.message)]
    assert steps, record.summary()
    # From the operator's first status write on (before it, the object has no status).
    written = [s for s in record.seen if s.phase != "None"]
    assert all(s.message for s in written), f"status.message was empty: {record.summary()}"


def test_rolled_back_rollout_is_degraded_and_stalled(scenario: Scenario, tmp_path: Path) -> None:
    scenario.start(Profile(rps=40, error_ratio=0.10, latency_ms=60), traffic=NO_GATEWAY)
    record = Recorder(scenario, tmp_path)
    done = record.until("RolledBack", lambda s: s.phase == "RolledBack")
    assert (done.argocd, done.kstatus) == ("Degraded", "Failed"), record.summary()
    stalled = done.conditions["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("True", "RolledBack")
    assert done.conditions["Ready"]["status"] == "False"
    assert done.message.startswith("rolled back: all traffic on v1: success-rate"), done.message
    assert done.message.endswith("waiting for a new revision or sits.dev/retry")


def test_paused_rollout_is_suspended_until_resumed(scenario: Scenario, tmp_path: Path) -> None:
    scenario.start(HEALTHY, traffic=NO_GATEWAY, stepWeight=10, maxWeight=90)
    record = Recorder(scenario, tmp_path)
    record.until("the first step", lambda s: s.message.startswith("step 1 of 9 at 10 %"))
    scenario.annotate("pause", "1")
    paused = record.until("Paused", lambda s: s.phase == "Paused", timeout=20)
    assert (paused.argocd, paused.kstatus) == ("Suspended", "InProgress")
    pattern = r"paused at step \d of 9 at \d+ %: paused by sits.dev/pause=1; waiting for"
    assert re.match(pattern, paused.message), paused.message
    scenario.annotate("resume", "1")
    resumed = record.until("Progressing", lambda s: s.phase == "Progressing", timeout=20)
    assert resumed.argocd == "Progressing"


def test_candidate_without_traffic_says_what_data_is_missing(
    scenario: Scenario, tmp_path: Path
) -> None:
    scenario.start(Profile(rps=0), traffic=NO_GATEWAY)
    record = Recorder(scenario, tmp_path)
    waiting = record.until("waiting for data", lambda s: "waiting for data: " in s.message)
    assert re.search(r"v2 (has \d+ of 5 requests|has no value)|no series for v2", waiting.message)
    assert (waiting.argocd, waiting.kstatus) == ("Progressing", "InProgress")
    assert waiting.conditions["Analysis"]["reason"] == "NoData"
    # The fast policy's noData: pause after 12 s: a paused rollout waits for a person.
    paused = record.until("Paused", lambda s: s.phase == "Paused", timeout=60)
    assert paused.argocd == "Suspended"


def test_a_gitops_reapply_after_a_rollout_shows_no_drift(
    scenario: Scenario, tmp_path: Path
) -> None:
    """As Argo CD syncs with server-side apply (field manager argocd-controller): apply the
    manifest, let the rollout run to Succeeded, then diff and re-apply the same manifest.
    Nothing differs, the re-apply changes nothing (same generation), and no manager but
    the GitOps tool's owns a field of spec: the operator writes status, its children and
    its own annotations, never the user's spec."""
    scenario.set("v1", HEALTHY)
    scenario.set("v2", HEALTHY)
    policy = fast_policy(scenario.policy, scenario.prometheus.url)
    scenario.cluster.kubectl("apply", "-f", "-", input=json.dumps(policy))
    manifest = deployment("chat", scenario.policy)
    manifest["spec"]["traffic"].update(NO_GATEWAY)
    manifest_file = tmp_path / "chat.json"
    manifest_file.write_text(json.dumps(manifest))
    ssa = [
        "--server-side",
        f"--field-manager={ARGOCD}",
        "-n",
        scenario.ns,
        "-f",
        str(manifest_file),
    ]
    scenario.cluster.kubectl("apply", *ssa)
    Recorder(scenario, tmp_path).until("Succeeded", lambda s: s.phase == "Succeeded")
    before = _sitsd(scenario)
    diff = scenario.cluster.kubectl("diff", *ssa, check=False)
    assert diff.returncode == 0, f"drift after the rollout:\n{diff.stdout}{diff.stderr}"
    scenario.cluster.kubectl("apply", *ssa)
    after = _sitsd(scenario)
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    owners = {
        entry["manager"]
        for entry in after["metadata"]["managedFields"]
        if "f:spec" in (entry.get("fieldsV1") or {})
    }
    assert owners == {ARGOCD}, f"spec fields owned by {owners}"


ARGOCD = "argocd-controller"


def _sitsd(scenario: Scenario) -> dict[str, Any]:
    out = scenario.cluster.kubectl(
        "get", "sitsd", "chat", "-n", scenario.ns, "-o", "json", "--show-managed-fields"
    )
    return dict(json.loads(out.stdout))
