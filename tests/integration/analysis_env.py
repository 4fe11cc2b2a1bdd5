"""Shared pieces of the analysis scenarios: status polling and a crash-looping pod's status.

The fast SITS2026 policy and the deployment are sits_operator_testing.manifests (the
benchmarks use them too)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest


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
