"""Two operator replicas, one acting: two real operator processes with `--leader-elect`
against the real apiserver, the chart's ServiceAccount and its leader-election Role, a
rollout driven by the synthetic Prometheus source (as in test_analysis.py).

(a) only the Lease's holder writes; (b) SIGKILL of the leader mid-rollout: the other
takes over within lease duration + retry period of the kill, the rollout finishes, no
decision or period counted twice; (c) SIGSTOP of the leader: the other takes over after
the lease expires; SIGCONT: the old leader steps down and writes nothing afterwards.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.analysis_env import Watcher, assert_nothing_counted_twice
from tests.integration.conftest import CHART, OPERATOR_NAMESPACE, RELEASE
from tests.integration.test_analysis import capacity  # noqa: F401  (the same room for pods)

from sits_localcluster.helm import apply_chart_parts
from sits_localcluster.prometheus import LocalPrometheus, free_port
from sits_localcluster.synthetic import Profile, SyntheticServer
from sits_operator.core.leadership import LEASE_DURATION_SECONDS, RETRY_PERIOD_SECONDS
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.process import OperatorProcess
from sits_operator_testing.rbac import watched

# Room for the rollout's pods: test_analysis.py's extra GPU node.
pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("capacity")]
HEALTHY = Profile(rps=40, error_ratio=0.0, latency_ms=60)
LEASE = RELEASE  # the chart's default Lease name: its Role grants get/update on it only
# From the kill to the new holder: the follower notices the last renewal up to a retry
# period late, then waits the lease duration; plus polling and an API round trip.
TAKEOVER_BOUND = LEASE_DURATION_SECONDS + RETRY_PERIOD_SECONDS + 1.5


@pytest.fixture(scope="module")
def lease_rbac(local_cluster: Any, operator_kubeconfig: Path) -> None:
    """The chart's leader-election Role and RoleBinding, beside its ClusterRole."""
    docs = apply_chart_parts(
        local_cluster,
        CHART,
        RELEASE,
        OPERATOR_NAMESPACE,
        ("leader-election.yaml",),
        field_manager="sits-tests",
    )
    assert {d["kind"] for d in docs} == {"Role", "RoleBinding"}


class Candidate:
    """One operator process with an identity (POD_NAME) and its own /metrics."""

    def __init__(self, name: str, kubeconfig: Path, log_dir: Path, namespace: str) -> None:
        self.name = name
        self.metrics_port = free_port()
        log_dir.mkdir(parents=True, exist_ok=True)
        self.proc = OperatorProcess(
            kubeconfig,
            log_dir,
            extra_args=("--leader-elect", "--metrics-address", f"127.0.0.1:{self.metrics_port}"),
            extra_env={"POD_NAME": name, "SITS_LEADER_ELECTION_NAMESPACE": OPERATOR_NAMESPACE},
            # SITS_TEST_RBAC=namespaced: the test's namespace only (its Role is there).
            namespaces=watched(namespace),
        )

    def log(self) -> str:
        return self.proc.log_path.read_text(errors="replace")

    def metric(self, name: str) -> float:
        """Sum of every sample of `name` (all label sets) on this process's /metrics."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def writes(self) -> float:
        return self.metric("sits_operator_status_writes_total") + self.metric(
            "sits_operator_child_writes_total"
        )


class Pair:
    def __init__(self, cluster: Any, namespace: str, a: Candidate, b: Candidate) -> None:
        self.cluster, self.ns, self.a, self.b = cluster, namespace, a, b
        self.policy = f"fast-{uuid.uuid4().hex[:6]}"

    def lease(self) -> dict[str, Any]:
        out = self.cluster.kubectl(
            "get", "lease", LEASE, "-n", OPERATOR_NAMESPACE, "-o", "json", check=False
        )
        return dict(json.loads(out.stdout).get("spec") or {}) if out.returncode == 0 else {}

    def holder(self) -> str:
        return str(self.lease().get("holderIdentity") or "")

    def wait_holder(self, name: str, timeout: float) -> float:
        """Seconds until `name` holds the Lease (polled every 0.1 s)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.holder() == name:
                return time.monotonic() - started
            time.sleep(0.1)
        pytest.fail(f"{name} did not take the Lease within {timeout} s: {self.lease()}")

    def events(self) -> list[dict[str, Any]]:
        out = self.cluster.kubectl(
            "get",
            "events",
            "-n",
            self.ns,
            "-o",
            "json",
            "--field-selector",
            "involvedObject.kind=SitsDeployment",
        )
        return list(json.loads(out.stdout)["items"])

    def events_of(self, instance: str) -> set[tuple[str, int]]:
        """(name, count) of every event one process posted: a repeat raises the count."""
        return {
            (e["metadata"]["name"], int(e.get("count") or 1))
            for e in self.events()
            if e.get("reportingInstance") == instance
        }

    def start_rollout(
        self, traffic: SyntheticServer, prometheus: LocalPrometheus, **rollout: Any
    ) -> Watcher:
        traffic.traffic.set(self.ns, "chat", "v1", HEALTHY)
        traffic.traffic.set(self.ns, "chat", "v2", HEALTHY)
        self.cluster.kubectl(
            "apply", "-f", "-", input=json.dumps(fast_policy(self.policy, prometheus.url))
        )
        manifest = deployment("chat", self.policy, **rollout)
        self.cluster.kubectl("apply", "-n", self.ns, "-f", "-", input=json.dumps(manifest))
        return Watcher(self.cluster, self.ns, "chat")

    def at_first_step(self, traffic: SyntheticServer, prometheus: LocalPrometheus) -> Watcher:
        """A rollout of 10 % steps up to 40 %, watched until its first step (20 %)."""
        watch = self.start_rollout(traffic, prometheus, stepWeight=10, maxWeight=40)
        watch.until("first step", lambda s: s.get("candidateWeight") == 20)
        return watch


@pytest.fixture
def pair(
    local_cluster: Any,
    namespace: str,
    operator_kubeconfig: Path,
    lease_rbac: None,
    tmp_path: Path,
) -> Iterator[Pair]:
    """op-a started first (it takes the fresh Lease), then op-b (it follows)."""
    local_cluster.kubectl(
        "delete", "lease", LEASE, "-n", OPERATOR_NAMESPACE, "--ignore-not-found", check=False
    )
    a = Candidate("op-a", operator_kubeconfig, tmp_path / "op-a", namespace)
    b = Candidate("op-b", operator_kubeconfig, tmp_path / "op-b", namespace)
    a.proc.start()
    a.proc.wait_for_log("leading", "op-a became the leader", timeout=20)
    b.proc.start()
    b.proc.wait_for_log("following", "op-b follows op-a", timeout=20)
    pair = Pair(local_cluster, namespace, a, b)
    try:
        yield pair
        # Stop the SitsDeployments while an operator still runs (their finalizer).
        local_cluster.kubectl(
            "delete",
            "sitsdeployments",
            "--all",
            "-n",
            namespace,
            "--wait=true",
            "--timeout=30s",
            check=False,
        )
        local_cluster.kubectl("delete", "sitspolicy", pair.policy, "--wait=false", check=False)
    finally:
        for candidate in (a, b):
            candidate.proc.stop()
    for candidate in (a, b):
        assert candidate.proc.forbidden() == [], "the chart's Role lacks a verb the election used"


def test_only_the_leader_writes(
    pair: Pair, traffic: SyntheticServer, prometheus: LocalPrometheus
) -> None:
    watch = pair.start_rollout(traffic, prometheus)
    watch.phase("Succeeded", timeout=120)
    assert pair.holder() == "op-a"
    events = pair.events()
    assert events, "the leader posts its decisions"
    assert {e.get("reportingInstance") for e in events} == {"op-a"}, events
    assert pair.a.metric("sits_operator_leader") == 1
    assert pair.b.metric("sits_operator_leader") == 0
    assert pair.a.writes() > 0
    assert pair.b.writes() == 0, "the follower wrote a child or a status"
    assert pair.b.metric("sits_operator_reconciles_total") == 0
    assert "op-b follows op-a" in pair.b.log()
    assert "became the leader" not in pair.b.log()


def test_sigkill_of_the_leader_mid_rollout_hands_over_without_counting_twice(
    pair: Pair, traffic: SyntheticServer, prometheus: LocalPrometheus
) -> None:
    watch = pair.at_first_step(traffic, prometheus)
    transitions = int(pair.lease()["leaseTransitions"])
    pair.a.proc.send_signal(signal.SIGKILL)
    took = pair.wait_holder("op-b", timeout=TAKEOVER_BOUND + 10)
    assert took <= TAKEOVER_BOUND, f"takeover took {took:.1f} s"
    assert took >= LEASE_DURATION_SECONDS - RETRY_PERIOD_SECONDS - 1, "took over a live lease"
    assert int(pair.lease()["leaseTransitions"]) == transitions + 1
    final = watch.phase("Succeeded", timeout=120)
    assert_nothing_counted_twice(watch, final)
    assert pair.b.metric("sits_operator_leader") == 1
    assert pair.b.metric("sits_operator_leader_transitions_total") == 1


def test_a_resumed_leader_steps_down_before_writing(
    pair: Pair, traffic: SyntheticServer, prometheus: LocalPrometheus
) -> None:
    watch = pair.at_first_step(traffic, prometheus)
    pair.a.proc.send_signal(signal.SIGSTOP)
    try:
        pair.wait_holder("op-b", timeout=TAKEOVER_BOUND + 10)
        # Let the new leader act for two periods while the old one is still frozen.
        time.sleep(8)
    finally:
        pair.a.proc.send_signal(signal.SIGCONT)
    pair.a.proc.wait_for_log("stepping down", "op-a stepped down", timeout=10)
    time.sleep(1)  # a request in flight at the SIGSTOP completes now (documented)
    writes = pair.a.writes()
    events_of_a = pair.events_of("op-a")
    final = watch.phase("Succeeded", timeout=120)
    time.sleep(2)  # anything op-a might still send after the rollout ends
    assert pair.holder() == "op-b"
    assert pair.a.metric("sits_operator_leader") == 0
    assert pair.a.writes() == writes, "the resumed old leader wrote a child or a status"
    assert pair.events_of("op-a") == events_of_a, "the resumed old leader posted an event"
    log = pair.a.log()
    after = log[log.index("op-a stepped down") :]
    assert "became the leader" not in after
    assert '"message": "applied"' not in after  # configure_logging's JSON lines
    assert_nothing_counted_twice(watch, final)
