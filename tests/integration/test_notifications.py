"""Notifications end to end: the real operator (a process, with the chart's RBAC) posts
its decisions and phase changes to webhooks on loopback receivers while it rolls a failing
candidate back on real Prometheus' synthetic SLIs (the approach of test_analysis.py).

Four webhooks: a Slack one, a CloudEvents one (with a header), one whose receiver is down
(connection refused) and one whose receiver never answers in time. The last two are
retried and fail, and must delay neither the decision nor the other webhooks.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.integration.analysis_env import Watcher

from sits_localcluster.nodes import GpuNodeSpec
from sits_localcluster.prometheus import LocalPrometheus, free_port
from sits_localcluster.synthetic import Profile, SyntheticServer
from sits_operator.core.analysis.schedule import period_phase, period_start
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.process import OperatorProcess, running_operator

pytestmark = pytest.mark.cluster
HEALTHY = Profile(rps=40, error_ratio=0.0, latency_ms=60)
FAILING = Profile(rps=40, error_ratio=0.10, latency_ms=60)
PERIOD = 4.0  # fast_policy's interval
NODE = "notifications-a100"
CAPACITY_NODE = GpuNodeSpec(NODE, "NVIDIA-A100-SXM4-80GB", 81920, {"mig-1g.10gb": 16}).manifest()


@dataclass(frozen=True)
class Arrival:
    path: str
    headers: dict[str, str]
    body: Any
    at: float  # wall clock, as the operator's decision times are


class Receiver:
    """A loopback HTTP receiver: records every POST; `/slow` answers only after 30 s."""

    def __init__(self) -> None:
        self.arrivals: list[Arrival] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                arrival = Arrival(self.path, dict(self.headers), json.loads(raw), time.time())
                with receiver.lock:
                    receiver.arrivals.append(arrival)
                if self.path == "/slow":
                    receiver.stopping.wait(30)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def on(self, path: str) -> list[Arrival]:
        with self.lock:
            return [a for a in self.arrivals if a.path == path]

    def wait_for(self, what: str, path: str, check: Any, timeout: float = 30) -> Arrival:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [a for a in self.on(path) if check(a.body)]
            if found:
                return found[0]
            time.sleep(0.2)
        pytest.fail(f"no {what} at {path} within {timeout} s; got {self.on(path)}")

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    rx = Receiver().start()
    yield rx
    rx.stop()


@pytest.fixture(scope="module")
def capacity(local_cluster: Any) -> Iterator[None]:
    local_cluster.kubectl("apply", "-f", "-", input=json.dumps(CAPACITY_NODE))
    yield
    local_cluster.kubectl("delete", "node", NODE, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(
    operator_kubeconfig: Path, capacity: None, receiver: Receiver, tmp_path_factory: Any
) -> Iterator[OperatorProcess]:
    """The operator with four webhooks, set as the chart sets them (SITS_NOTIFICATIONS)."""
    config = {
        "webhooks": [
            {"name": "slack", "format": "slack", "url": receiver.url("/slack")},
            {
                "name": "events",
                "format": "cloudevents",
                "url": receiver.url("/ce"),
                "headers": {"X-Sits-Test": "notifications"},
            },
            {"name": "down", "format": "json", "url": f"http://127.0.0.1:{free_port()}/gone"},
            {"name": "slow", "format": "json", "url": receiver.url("/slow")},
        ],
        "timeoutSeconds": 2,
        "maxAttempts": 3,
        "backoffSeconds": 0.5,
        "maxBackoffSeconds": 2,
        "drainSeconds": 1,
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SITS_NOTIFICATIONS", json.dumps(config))
        with running_operator(operator_kubeconfig, tmp_path_factory.mktemp("operator")) as proc:
            yield proc


def test_rollback_is_notified_to_slack_and_as_cloudevents_without_delay(
    local_cluster: Any,
    namespace: str,
    traffic: SyntheticServer,
    prometheus: LocalPrometheus,
    operator: OperatorProcess,
    receiver: Receiver,
) -> None:
    policy = f"fast-{uuid.uuid4().hex[:6]}"
    traffic.traffic.set(namespace, "chat", "v1", HEALTHY)
    traffic.traffic.set(namespace, "chat", "v2", FAILING)
    local_cluster.kubectl("apply", "-f", "-", input=json.dumps(fast_policy(policy, prometheus.url)))
    try:
        manifest = deployment("chat", policy)
        local_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
        status = Watcher(local_cluster, namespace, "chat").phase("RolledBack")
    finally:
        local_cluster.kubectl("delete", "sitspolicy", policy, "--wait=false", check=False)

    # The decision came on schedule: the evaluation that rolled back ran just after its
    # period started (+0.5 s by design; periods start at the deployment's own phase,
    # core/analysis/schedule.py), not held up by the dead or slow receivers.
    (rollback,) = [h for h in status["analysis"]["history"] if h["action"] == "rollback"]
    into_period = rollback["at"] - period_start(
        rollback["at"], PERIOD, period_phase(namespace, "chat", PERIOD)
    )
    assert into_period < 2.5, f"rolled back {into_period:.1f} s into its period: {rollback}"

    subject = f"{namespace}/chat"
    slack = receiver.wait_for(
        "Slack rollback message",
        "/slack",
        lambda b: f"*RolledBack* `{subject}`" in b["blocks"][0]["text"]["text"],
    )
    assert set(slack.body) == {"text", "blocks"}
    assert slack.headers["Content-Type"] == "application/json"
    assert [b["type"] for b in slack.body["blocks"]] == ["section", "context"]
    assert "&lt; 0.95" in slack.body["blocks"][0]["text"]["text"]  # "... < 0.95", escaped
    assert slack.at - rollback["at"] < 5, "the Slack message came late"

    decision = receiver.wait_for(
        "CloudEvent of the rollback",
        "/ce",
        lambda b: b["type"] == "dev.sits.rollout.decision" and b["data"]["reason"] == "RolledBack",
    )
    body = decision.body
    assert body["specversion"] == "1.0"
    assert body["subject"] == subject
    assert body["source"] == f"/apis/sits.dev/v1alpha1/namespaces/{namespace}/sitsdeployments/chat"
    assert body["datacontenttype"] == "application/json"
    assert (body["data"]["stable"], body["data"]["candidate"]) == ("v1", "v2")
    assert decision.headers["Content-Type"].startswith("application/cloudevents+json")
    assert decision.headers["X-Sits-Test"] == "notifications"
    assert decision.at - rollback["at"] < 5, "the CloudEvent came late"

    phase = receiver.wait_for(
        "CloudEvent of the phase change",
        "/ce",
        lambda b: b["type"] == "dev.sits.rollout.phase" and b["data"]["phase"] == "RolledBack",
    )
    assert phase.body["data"]["previousPhase"]
    ids = [a.body["id"] for a in receiver.on("/ce")]
    assert len(ids) == len(set(ids)), "every CloudEvent has its own id"

    # The slow receiver was asked (and timed out); the dead one was retried and given up.
    assert receiver.on("/slow")
    operator.wait_for_log("the dead webhook failing", "webhook down:", timeout=30)
    operator.wait_for_log("a dead webhook given up", "not delivered after 3 attempt(s)", timeout=30)
