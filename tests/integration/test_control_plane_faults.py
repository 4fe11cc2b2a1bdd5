"""Control-plane faults mid-rollout (issue 18, item 4): the real operator process talks
to the real apiserver through a fault-injecting proxy (sits_operator_testing.apiserver_proxy)
while a SITS2026-fast rollout runs (as in test_analysis.py).

(a) a storm of 429 (with Retry-After) or 503 answers: the operator backs off (the rate of
requests reaching the proxy stays bounded), says so in its log, and the rollout resumes
and is promoted once the storm is over; (b) every watch stream cut, several times: the
operator watches again and acts on a change made after the cuts; (c) etcd stopped and
started again (same data) mid-rollout: the operator resumes. In every case each decision
is taken and announced once (no Step, Promoting or Promoted event twice, steps at least
two periods apart, no period counted twice) and none is lost (the rollout is promoted).

The test itself reads and writes through the admin's kubeconfig, straight to the
apiserver: only the operator sees the faults.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.analysis_env import (
    assert_each_decision_announced_once,
    assert_nothing_counted_twice,
)
from tests.integration.test_analysis import (
    HEALTHY,
    Scenario,
    capacity,  # noqa: F401  (the same room for pods)
)

from sits_localcluster.prometheus import LocalPrometheus
from sits_localcluster.synthetic import SyntheticServer
from sits_operator_testing.apiserver_proxy import ApiserverProxy, Fault
from sits_operator_testing.process import OperatorProcess, running_operator

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("capacity"), pytest.mark.timeout(150)]

STORM_SECONDS = 12.0  # three analysis periods: a step falls due inside every storm
# Requests per second the operator may send while every answer is an error. Its watch
# streams stay open; what is left is a status write per 5 s backoff, an event post per
# Kopf backoff (1, 1, 2, 3, 5... s) and each re-watch's retries: a few per second. A
# client retrying without a pause would send hundreds.
STORM_RATE_BOUND = 8.0
STORM_PEAK_BOUND = 25  # in any one second (retries that fell due together)
WATCH_CUTS = 3
ETCD_DOWN_SECONDS = 8.0
PROMOTED_WITHIN = 90.0


@pytest.fixture(scope="module")
def proxy(local_cluster: Any) -> Iterator[ApiserverProxy]:
    pki = local_cluster.pki
    with ApiserverProxy(
        local_cluster.server,
        ca_cert=pki.ca_cert,
        serving_cert=pki.serving_cert,
        serving_key=pki.serving_key,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def operator(
    operator_kubeconfig: Path, proxy: ApiserverProxy, tmp_path_factory: Any
) -> Iterator[OperatorProcess]:
    """The operator, as the chart's ServiceAccount, with the proxy as its apiserver."""
    logs = tmp_path_factory.mktemp("operator")
    kubeconfig = proxy.kubeconfig(operator_kubeconfig, logs / "kubeconfig-via-proxy")
    with running_operator(kubeconfig, logs) as proc:
        yield proc


@pytest.fixture
def scenario(
    local_cluster: Any,
    namespace: str,
    traffic: SyntheticServer,
    prometheus: LocalPrometheus,
    operator: OperatorProcess,
    proxy: ApiserverProxy,
) -> Iterator[Scenario]:
    """test_analysis's Scenario with this module's operator; no fault outlives a test."""
    try:
        yield (made := Scenario(local_cluster, namespace, traffic, prometheus, operator))
    finally:
        proxy.fail(None)
    made.cleanup()


def at_first_step(scenario: Scenario) -> int:
    """Start a 25 %-step rollout (25, 50, promoted); the operator's log size once at 25 %."""
    scenario.start(HEALTHY)
    scenario.watch.until("first step", lambda s: s.get("candidateWeight") == 25)
    return scenario.operator.log_path.stat().st_size


def promoted_once(scenario: Scenario) -> dict[str, Any]:
    """The rollout is promoted (no decision lost), and no decision was taken twice."""
    final = scenario.watch.phase("Succeeded", timeout=PROMOTED_WITHIN)
    assert [w for w in scenario.candidate_weights() if w] == [25, 50, 100], scenario.watch.timeline
    assert_nothing_counted_twice(scenario.watch, final)
    time.sleep(1)  # events a retrying poster still had queued
    assert_each_decision_announced_once(scenario.events(), final)
    return final


def log_since(operator: OperatorProcess, offset: int) -> str:
    with operator.log_path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


def held_still(scenario: Scenario, seconds: float) -> None:
    """Poll for `seconds` (the test's own view, straight to the apiserver)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        scenario.watch.status()
        time.sleep(0.5)


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        pytest.param(Fault(429, retry_after=1), "429", id="429-all"),
        pytest.param(Fault(503, share=0.5, retry_after=None), "503", id="503-half"),
    ],
)
def test_error_storm_backs_off_and_the_rollout_resumes(
    scenario: Scenario, proxy: ApiserverProxy, fault: Fault, words: str
) -> None:
    offset = at_first_step(scenario)
    with proxy.storm(fault) as window:
        # The streams drop too (an overloaded apiserver's load balancer): the operator
        # must list and watch again through the storm.
        assert proxy.cut_watches() > 0
        held_still(scenario, STORM_SECONDS)
    since, until = window
    rate, peak = proxy.rate(since, until), proxy.peak(since, until)
    answered = [s for s in proxy.requests(since, until) if s.answered]
    assert answered, "the storm answered nothing: the operator sent no request"
    assert rate <= STORM_RATE_BOUND, f"{rate:.1f} requests/s during the storm (peak {peak})"
    assert peak <= STORM_PEAK_BOUND, f"{peak} requests in one second during the storm"
    if fault.share == 1.0:  # nothing could be written: the rollout stood still
        weights = {s.get("candidateWeight") for s in scenario.watch.snapshots[-8:]}
        assert weights == {25}, scenario.watch.timeline
    log = log_since(scenario.operator, offset)
    assert words in log, "the operator's log says nothing of the errors"
    assert "will retry" in log, "Kopf's requests did not retry"
    promoted_once(scenario)
    print(f"{fault}: {rate:.2f} requests/s, peak {peak}/s, {len(answered)} answered")


def test_cut_watch_streams_are_watched_again(scenario: Scenario, proxy: ApiserverProxy) -> None:
    at_first_step(scenario)
    streams = proxy.open_watches()
    assert streams > 0
    for _ in range(WATCH_CUTS):
        cut_at = time.monotonic()
        assert proxy.cut_watches() > 0
        deadline = time.monotonic() + 10
        while proxy.open_watches() < streams:
            assert time.monotonic() < deadline, "the operator did not watch again"
            time.sleep(0.2)
        rewatched = [s for s in proxy.requests(cut_at) if s.watch]
        assert len(rewatched) >= streams
        time.sleep(1)
    # Seen only through the SitsDeployment's watch: the loop acts on the body it delivers.
    scenario.annotate("pause", "1")
    scenario.watch.phase("Paused", timeout=10)
    scenario.annotate("resume", "1")
    scenario.watch.phase("Progressing", timeout=10)
    promoted_once(scenario)


def test_etcd_restarted_mid_rollout(scenario: Scenario, local_cluster: Any) -> None:
    at_first_step(scenario)
    local_cluster.stop_component("etcd")
    try:
        time.sleep(ETCD_DOWN_SECONDS)  # the apiserver cannot read or write anything
    finally:
        local_cluster.start_component("etcd")
    deadline = time.monotonic() + 60
    while not local_cluster.readyz()[0]:  # the test's own kubectl needs it back too
        assert time.monotonic() < deadline, "the apiserver did not recover from etcd's restart"
        time.sleep(0.5)
    promoted_once(scenario)


def test_a_refused_status_write_does_not_announce_a_decision_twice(
    scenario: Scenario, proxy: ApiserverProxy
) -> None:
    """The status write that records a step fails (500) while everything else works: the
    step is taken, and announced, once, when its status is written."""
    at_first_step(scenario)
    scenario.watch.until(
        "one passing period at 25 %",
        lambda s: (
            (s.get("analysis") or {}).get("consecutivePasses") == 1
            and s.get("candidateWeight") == 25
        ),
        timeout=20,
    )
    status_writes = Fault(
        500, retry_after=None, methods=frozenset({"PATCH"}), path_contains="/status"
    )
    with proxy.storm(status_writes) as window:
        held_still(scenario, STORM_SECONDS)
    refused = [s for s in proxy.requests(*window) if s.answered]
    assert refused, "no status write fell into the window"
    promoted_once(scenario)
