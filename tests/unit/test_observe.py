"""Watch-cache entries reduced to the core's values: pods and their container statuses."""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.core.observe import container_entry, pod_entry
from sits_operator.model.observed import ContainerTermination, ObservedContainer

LABELS = {"sits.dev/deployment": "chat", "sits.dev/variant": "v2"}
LAST_WORDS = "api_server.py: error: unrecognized arguments: --bogus\n"
CRASH: dict[str, Any] = {
    "exitCode": 2,
    "reason": "Error",
    "message": LAST_WORDS,
    "startedAt": "2026-12-02T09:59:50Z",
    "finishedAt": "2026-12-02T09:59:58Z",
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {"name": "vllm", "ready": True, "restartCount": 0, "state": {"running": {}}},
            ObservedContainer("vllm", 0, True),
            id="running",
        ),
        pytest.param(
            {
                "name": "vllm",
                "ready": False,
                "restartCount": 5,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 2m40s"}},
                "lastState": {"terminated": CRASH},
            },
            ObservedContainer(
                "vllm",
                5,
                False,
                "CrashLoopBackOff",
                "back-off 2m40s",
                ContainerTermination(2, "Error", LAST_WORDS, "2026-12-02T09:59:58Z"),
            ),
            id="crash-loop-carries-the-last-termination",
        ),
        pytest.param(
            {
                "name": "vllm",
                "restartCount": 1,
                "state": {"terminated": {**CRASH, "exitCode": 137, "reason": "OOMKilled"}},
                "lastState": {"terminated": CRASH},
            },
            ObservedContainer(
                "vllm",
                1,
                False,
                last_termination=ContainerTermination(
                    137, "OOMKilled", LAST_WORDS, "2026-12-02T09:59:58Z"
                ),
            ),
            id="dead-now-the-current-termination-is-the-latest",
        ),
        pytest.param(
            {"name": "vllm", "image": "x", "state": {"waiting": {"reason": "ContainerCreating"}}},
            ObservedContainer("vllm", waiting_reason="ContainerCreating"),
            id="creating-without-restart-count",
        ),
        pytest.param(
            {"name": "vllm", "lastState": {}},
            ObservedContainer("vllm"),
            id="no-state-yet",
        ),
    ],
)
def test_container_entry(raw: dict[str, Any], expected: ObservedContainer) -> None:
    assert container_entry(raw) == expected


def test_pod_entry_keeps_every_container_and_sums_restarts() -> None:
    status = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "vllm", "restartCount": 3, "state": {"running": {}}, "ready": True},
            {"name": "sits-cache", "restartCount": 1, "state": {"running": {}}, "ready": True},
        ],
    }
    entry = pod_entry("chat-v2-x", LABELS, {"nodeName": "gpu-a100-0"}, status)
    assert [c.name for c in entry.containers] == ["vllm", "sits-cache"]
    assert entry.restarts == 4
    assert (entry.variant, entry.node_name, entry.unschedulable_message) == (
        "v2",
        "gpu-a100-0",
        None,
    )


def test_pending_pod_has_no_containers_yet() -> None:
    status = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available"}
        ],
    }
    entry = pod_entry("chat-v2-x", LABELS, {}, status)
    assert (entry.containers, entry.restarts) == ((), 0)
    assert entry.unschedulable_message == "0/3 nodes are available"
