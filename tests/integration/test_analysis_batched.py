"""Batched analysis queries end to end: several SitsDeployments of one namespace under
SITS2026 (batched templates), real Prometheus, the real operator. The queries per period
are those of one deployment (2 rules x value and request count), and each rollout still
decides on its own series: one promoted, one rolled back, one without series holds.

Each SitsDeployment's periods start at a phase of its own (core/analysis/schedule.py);
deployments in one phase slot are due together and share the batched answers, so the
three names here are chosen in one slot."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.analysis_env import Watcher

from sits_localcluster.nodes import GpuNodeSpec
from sits_localcluster.prometheus import LocalPrometheus, free_port
from sits_localcluster.synthetic import Profile, SyntheticServer
from sits_operator.core.analysis.schedule import period_phase
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.operator_metrics import queries_sent, scrape
from sits_operator_testing.process import OperatorProcess, running_operator

pytestmark = pytest.mark.cluster
HEALTHY = Profile(rps=40, error_ratio=0.0, latency_ms=60)
BROKEN = Profile(rps=40, error_ratio=0.10, latency_ms=60)
# 8 s periods: loops of a namespace share answers sent within 0.8 s of each other.
INTERVAL = 8.0
# SITS2026: two rules, each a value query and a request-count query.
QUERIES_PER_PERIOD = 4
NODE = GpuNodeSpec("batched-a100", "NVIDIA-A100-SXM4-80GB", 81920, {"mig-1g.10gb": 16}).manifest()


@pytest.fixture(scope="module")
def metrics_address() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def operator(
    local_cluster: Any, operator_kubeconfig: Path, metrics_address: str, tmp_path_factory: Any
) -> Iterator[OperatorProcess]:
    local_cluster.kubectl("apply", "-f", "-", input=json.dumps(NODE))
    log_dir = tmp_path_factory.mktemp("operator")
    extra = ("--metrics-address", metrics_address)
    with running_operator(operator_kubeconfig, log_dir, extra_args=extra) as proc:
        yield proc
    local_cluster.kubectl("delete", "node", "batched-a100", "--wait=false", check=False)


def apply(cluster: Any, namespace: str, body: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(body))


def in_one_slot(namespace: str, roles: tuple[str, ...]) -> dict[str, str]:
    """A name per role (`<role>-<n>`), all with the first role's period phase."""
    phase = period_phase(namespace, f"{roles[0]}-0", INTERVAL)
    return {
        role: next(
            f"{role}-{n}"
            for n in itertools.count()
            if period_phase(namespace, f"{role}-{n}", INTERVAL) == phase
        )
        for role in roles
    }


def weights(status: dict[str, Any]) -> dict[str, int]:
    return {v["name"]: v["weight"] for v in status.get("variants", [])}


def test_one_namespace_one_query_per_rule_and_period_and_each_rollout_decides_alone(
    local_cluster: Any,
    namespace: str,
    traffic: SyntheticServer,
    prometheus: LocalPrometheus,
    operator: OperatorProcess,
    metrics_address: str,
) -> None:
    policy = f"batched-{uuid.uuid4().hex[:6]}"
    apply(local_cluster, namespace, fast_policy(policy, prometheus.url, interval="8s"))
    names = in_one_slot(namespace, ("healthy", "broken", "quiet"))
    for role, candidate in (("healthy", HEALTHY), ("broken", BROKEN)):
        traffic.traffic.set(namespace, names[role], "v1", HEALTHY)
        traffic.traffic.set(namespace, names[role], "v2", candidate)
    # "quiet" has no series at all: absent from every batched answer, it has no data.
    for name in names.values():
        apply(local_cluster, namespace, deployment(name, policy))
    watch = {role: Watcher(local_cluster, namespace, names[role]) for role in ("healthy", "broken")}
    for role, watcher in watch.items():
        watcher.until(f"{role} progressing", lambda s: (s.get("candidateWeight") or 0) > 0)

    before = queries_sent(scrape(metrics_address))
    time.sleep(3 * INTERVAL)
    after = queries_sent(scrape(metrics_address))
    per_period = (after["true"] - before["true"]) / 3
    print(f"batched queries per period with 3 SitsDeployments: {per_period:.1f}")
    assert after["false"] == before["false"], "SITS2026's templates are all batched"
    assert 0 < per_period <= QUERIES_PER_PERIOD * 1.5, "one deployment's count, not three"

    healthy = watch["healthy"].phase("Succeeded", timeout=120)
    assert weights(healthy) == {"v1": 0, "v2": 100}
    broken = watch["broken"].phase("RolledBack", timeout=60)
    assert weights(broken) == {"v1": 100, "v2": 0}
    assert broken["candidateSuccessRate"] == pytest.approx(0.9, abs=0.02)
    quiet = Watcher(local_cluster, namespace, names["quiet"]).status()
    assert quiet.get("phase") in ("Progressing", "Paused"), quiet
    assert quiet.get("candidateSuccessRate") is None
