"""Shared pieces of the analysis scenarios: the fast SITS2026 policy and status polling."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SITS2026 = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
EXAMPLE = yaml.safe_load((REPO / "examples" / "chat-canary.yaml").read_text())


def fast_policy(name: str, **overrides: Any) -> dict[str, Any]:
    """SITS2026's rules on short windows: 4 s periods, 10 s windows, 12 s latency duration.

    The thresholds, comparisons, period counts and actions stay exactly SITS2026's.
    """
    policy = copy.deepcopy(SITS2026)
    policy["metadata"] = {"name": name}
    spec = policy["spec"]
    spec.update(
        {
            "interval": "4s",
            "minRequests": 5,
            "noData": {"action": "pause", "after": "12s"},
            "promotion": {"consecutivePasses": 2},
        }
    )
    for rule in spec["rules"]:
        rule["window"] = "10s"
        if "duration" in rule.get("for", {}):
            rule["for"] = {"duration": "12s"}
    spec.update(overrides)
    return dict(policy)


def deployment(name: str, policy: str, prometheus_url: str, **rollout: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(EXAMPLE)
    manifest["metadata"] = {"name": name}
    manifest["spec"]["traffic"].pop("initialWeights")
    manifest["spec"]["rollout"] = {
        "strategy": "canary",
        "stepWeight": 25,
        "maxWeight": 50,
        "interval": "4s",
        **rollout,
    }
    manifest["spec"]["analysis"] = {
        "policyRef": {"name": policy},
        "prometheus": {"url": prometheus_url},
    }
    return dict(manifest)


def crash_looping_status(pod: dict[str, Any], restarts: int, last_words: str) -> dict[str, Any]:
    """A status patch: what a kubelet reports for a pod whose vLLM exits at start (a bad
    argument). kwok runs no container, so a test writes it through the status
    subresource, as the kubelet would; kwok leaves Running pods alone."""
    crashed = {
        "exitCode": 1,
        "reason": "Error",
        "message": last_words,
        "startedAt": "2026-12-02T10:00:00Z",
        "finishedAt": "2026-12-02T10:00:04Z",
    }
    statuses = []
    for container in pod["spec"]["containers"]:
        status: dict[str, Any] = {
            "name": container["name"],
            "image": container["image"],
            "imageID": "",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": "2026-12-02T09:59:00Z"}},
        }
        if container["name"] == "vllm":
            waiting = {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting"}
            status.update(
                ready=False,
                started=False,
                restartCount=restarts,
                state={"waiting": waiting},
                lastState={"terminated": crashed},
            )
        statuses.append(status)
    conditions = [
        {**c, "status": "False", "reason": "ContainersNotReady"}
        if c["type"] in ("Ready", "ContainersReady")
        else c
        for c in pod["status"]["conditions"]
    ]
    return {"status": {"containerStatuses": statuses, "conditions": conditions}}


class Watcher:
    """Poll a SitsDeployment's status and keep the distinct (phase, weights) it went through."""

    def __init__(self, cluster: Any, namespace: str, name: str) -> None:
        self.cluster, self.namespace, self.name = cluster, namespace, name
        self.timeline: list[tuple[str, dict[str, int]]] = []
        self.snapshots: list[dict[str, Any]] = []

    def status(self) -> dict[str, Any]:
        out = self.cluster.kubectl("get", "sitsd", self.name, "-n", self.namespace, "-o", "json")
        status = dict(json.loads(out.stdout).get("status") or {})
        self.snapshots.append(status)
        weights = {v["name"]: v["weight"] for v in status.get("variants", [])}
        point = (str(status.get("phase")), weights)
        if not self.timeline or self.timeline[-1] != point:
            self.timeline.append(point)
        return status

    def until(self, what: str, check: Any, timeout: float = 90) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if check(status):
                return status
            time.sleep(0.4)
        pytest.fail(f"timed out waiting for {what}; timeline: {self.timeline}")

    def phase(self, phase: str, timeout: float = 90) -> dict[str, Any]:
        return self.until(f"phase {phase}", lambda s: s.get("phase") == phase, timeout)

    def history(self) -> list[tuple[str, dict[str, int]]]:
        entries = self.status().get("analysis", {}).get("history", [])
        return [(h["action"], h["weights"]) for h in entries]
