"""Shared pieces of the analysis scenarios: status polling, a crash-looping pod's status,
and the checks that no decision was taken twice or lost (leader election, faults).

The fast SITS2026 policy and the deployment are sits_operator_testing.manifests (the
benchmarks use them too)."""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
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


def history(status: dict[str, Any]) -> list[dict[str, Any]]:
    return list((status.get("analysis") or {}).get("history") or [])


def assert_nothing_counted_twice(watch: Watcher, final: dict[str, Any]) -> None:
    """No decision twice in the history; no period counted twice (each period has one set
    of counters; two steps are at least the policy's two passing periods apart). A decision
    is its action, weights and reason: "promoting" and "promoted" are two promote entries
    at the same weights, a step repeated by a second writer would repeat its reason."""
    entries = history(final)
    decisions = [
        (h["action"], json.dumps(h["weights"], sort_keys=True), h["reason"]) for h in entries
    ]
    assert len(decisions) == len(set(decisions)), entries
    steps = [h["at"] for h in entries if h["action"] == "step"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(steps)]
    assert all(gap >= 6.0 for gap in gaps), f"a step after one 4 s period: {gaps}"
    # A manual command (sits.dev/resume: a clean slate) changes the counters without
    # counting a period: a period's counters are those after the same commands.
    seen: dict[tuple[int, str], tuple[int, int]] = {}
    for snapshot in watch.snapshots:
        state = dict(snapshot.get("analysis") or {})
        if state.get("lastPeriod") is None or snapshot.get("phase") != "Progressing":
            continue
        counters = (state["consecutivePasses"], state["stepIndex"])
        key = (state["lastPeriod"], json.dumps(state.get("acknowledged") or {}, sort_keys=True))
        first = seen.setdefault(key, counters)
        assert first == counters, (
            f"period {key[0]} counted twice: (passes, step) {first} then {counters}; "
            f"history {history(final)}"
        )


#: The events that announce a decision (core/analysis/transitions.py): each says its
#: reason, which names the step, so one decision taken twice posts the same words twice.
DECISION_EVENTS = frozenset(
    {"AnalysisStarted", "Step", "Promoting", "Promoted", "RolledBack", "Paused", "Resumed"}
)


def announcements(events: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """How often each decision event (reason, message) was posted; an Event whose count
    a client raised (aggregated repeats) counts that many times."""
    said: Counter[tuple[str, str]] = Counter()
    for event in events:
        if event["reason"] in DECISION_EVENTS:
            said[(event["reason"], event["message"])] += int(event.get("count") or 1)
    return said


def assert_each_decision_announced_once(
    events: list[dict[str, Any]], final: dict[str, Any]
) -> None:
    """Every decision event once (none repeated, e.g. after a failed status write), and
    every step, promotion and rollback the history records announced (none lost)."""
    said = announcements(events)
    repeated = {key: n for key, n in said.items() if n > 1}
    assert not repeated, f"decisions announced more than once: {repeated}"
    decided = ("step", "promote", "rollback", "pause", "resume")
    recorded = {h["reason"] for h in history(final) if h["action"] in decided}
    missing = recorded - {message for _, message in said}
    assert not missing, f"decisions never announced: {missing}"
