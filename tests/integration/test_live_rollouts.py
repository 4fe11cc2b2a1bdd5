"""The whole system live on the real node: real traffic makes the SLIs, real faults are
rolled back.

Two SitsDeployments run at once (their vLLM pods start together): ``healthy`` (v2 the
same model and adapter as v1) and ``broken`` (v2 ships its LoRA adapter truncated, so
vLLM refuses to load it and v2's sidecar answers 502 to every request for it). Each has
two gateway pods the operator deploys (router builtin); the operator runs from its chart;
Prometheus finds the pods through the apiserver; the load generator sends session-flow
traffic (base model and adapter) through each root Service's ClusterIP. The timelines
(weights, SLIs, request rates, the operator's events) are written as JSON and PNG next to the test
cluster's state (their paths are printed).
"""

from __future__ import annotations

import base64
import itertools
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.integration.alertmanager import LocalAlertmanager
from tests.integration.conftest import render_chart
from tests.integration.real_node import kill_container, wait

from sits_dashboards import ANNOTATION, dashboard_queries
from sits_live import stack, stories
from sits_live.environment import LiveNamespace
from sits_live.scenario import (
    LoadThread,
    PhaseWatch,
    Story,
    StoryResult,
    Traffic,
    cluster_story,
    run_stories,
    save,
)
from sits_live.timeline import Sample
from sits_loadgen import DROPPED, SUCCESS
from sits_loadgen.summary import percentile
from sits_localcluster.cluster import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.vllm, pytest.mark.live, pytest.mark.timeout(2400)]

ROLLOUT_TIMEOUT_S = 300.0
#: Two variant pods and two gateway pods per SitsDeployment.
PODS = 4


@dataclass
class Live:
    cluster: LocalCluster
    env: LiveNamespace
    namespace: str
    healthy: StoryResult
    broken: StoryResult
    rolled_back_at: float | None
    artefacts: list[Path]


def _root_url(cluster: LocalCluster, namespace: str, name: str) -> str:
    service = stack.get(cluster, "service", name, "-n", namespace)
    return f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}/v1"


@pytest.fixture(scope="module")
def live(local_cluster: LocalCluster, crds_installed: tuple[str, ...]) -> Iterator[Live]:
    cluster = local_cluster
    env = LiveNamespace(cluster, "sits-rollouts")
    namespace = env.namespace
    watch: PhaseWatch | None = None
    try:
        env.up()
        stack.apply(
            cluster,
            namespace,
            stories.healthy("healthy"),
            stories.broken("broken"),
        )
        for name in ("healthy", "broken"):

            def ready(name: str = name) -> bool:
                return stack.all_ready(cluster, namespace, name, PODS)

            wait(f"{name}: {PODS} pods Ready", ready, timeout=900, step=2.0)
        watch = PhaseWatch(cluster, namespace, "broken")
        runs = [
            cluster_story(
                cluster,
                env.monitoring.query,
                namespace,
                name,
                ends=frozenset({end}),
                traffic=Traffic(
                    _root_url(cluster, namespace, name), stories.RATES, ROLLOUT_TIMEOUT_S, seed=i
                ),
                window=stories.WINDOW,
                thresholds=stories.THRESHOLDS,
                out=print,
            )
            for i, (name, end) in enumerate((("healthy", "Succeeded"), ("broken", "RolledBack")))
        ]
        healthy, broken = run_stories(runs, timeout_s=ROLLOUT_TIMEOUT_S)
        out = cluster.state_dir / "live-rollouts" / env.suffix
        artefacts = [
            *save(healthy.timeline, healthy.load, out),
            *save(broken.timeline, broken.load, out),
        ]
        print("timelines:", *artefacts, sep="\n  ")
        yield Live(cluster, env, namespace, healthy, broken, watch.first("RolledBack"), artefacts)
    finally:
        if watch is not None:
            watch.stop()
        env.down()


def _candidate_weights(result: StoryResult) -> list[int]:
    weights = [s.variants["v2"].weight for s in result.timeline.samples if "v2" in s.variants]
    return [w for w in weights if w is not None]


def test_healthy_candidate_is_promoted_step_by_step_under_load(live: Live) -> None:
    result = live.healthy
    assert result.finished, f"not promoted; last phase {result.timeline.samples[-1].phase}"
    weights = _candidate_weights(result)
    assert weights == sorted(weights), f"the candidate's weight went down: {weights}"
    assert {20, 40, 60} <= set(weights), f"steps skipped: {sorted(set(weights))}"
    assert weights[-1] == 100
    reasons = [e.reason for e in result.timeline.events]
    assert reasons.count("Step") >= 2
    assert "Promoted" in reasons


def test_no_request_fails_during_any_weight_change(live: Live) -> None:
    records = [r for result in live.healthy.load for r in result.records]
    assert len(records) > 100
    failed = [r for r in records if r.outcome not in (SUCCESS, DROPPED)]
    assert not failed, f"{len(failed)} failed: {failed[:3]}"
    assert {r.variant for r in records} >= {"v1", "v2"}


def test_broken_candidate_is_rolled_back_after_exactly_two_failing_periods(live: Live) -> None:
    result = live.broken
    assert result.finished, f"not rolled back; last phase {result.timeline.samples[-1].phase}"
    (rollback,) = [e for e in result.timeline.events if e.reason == "RolledBack"]
    assert "success-rate" in rollback.message
    assert "for 2 of 2 periods" in rollback.message, rollback.message
    # The failures were real: v2's sidecar answered 502 for the truncated adapter.
    records = [r for load in result.load for r in load.records]
    failed = [r for r in records if r.variant == "v2" and r.status == 502]
    assert failed, "no 502 from v2: the broken adapter did not fail"
    assert all(r.variant == "v2" for r in records if r.status == 502)
    # Two periods are at least one interval apart: not on the first bad sample.
    first_bad = min(r.start for r in failed)
    assert live.rolled_back_at is not None
    assert live.rolled_back_at - first_bad >= 5.0 - 0.5


def test_after_the_rollback_the_gateway_sends_the_candidate_nothing_within_1s(live: Live) -> None:
    assert live.rolled_back_at is not None
    records = [r for load in live.broken.load for r in load.records]
    late = [r for r in records if r.variant == "v2" and r.start > live.rolled_back_at + 1.0]
    assert not late, f"{len(late)} requests reached v2 more than 1 s after the rollback"
    after = [r for r in records if r.start > live.rolled_back_at + 1.0]
    assert after, "no traffic after the rollback: nothing was checked"


def test_timelines_are_written_as_json_and_png(live: Live) -> None:
    for path in live.artefacts:
        assert path.stat().st_size > 1000, path


#: Dashboard panels the live stack cannot feed, and why (each one is still run: a query
#: error fails the test whatever its panel).
_NO_L2 = "the live variants load no L2 vector index (no lists, no hot-list lookups)"
NO_SERIES_LIVE: dict[str, str] = {
    "L2 hot-list hits": _NO_L2,
    "L2 latency p95": _NO_L2,
    "L2 list promotions and demotions": _NO_L2,
    "L2 resident and locked bytes": _NO_L2,
    "L2 resident lists": _NO_L2,
    "L1 evictions and expiry": "minutes of traffic neither fill L1 nor outlive its TTL",
    "Rejected and retried requests": "the gateways reject nothing and retry nothing here",
}
#: The time range the annotations are run over (Grafana's dashboard range).
DASHBOARD_RANGE_S = 1800.0


def test_every_dashboard_query_runs_on_the_live_prometheus_and_returns_series(live: Live) -> None:
    """The chart's Grafana dashboards (e2e/sits_dashboards) against the real Prometheus,
    right after the two rollouts: every panel, annotation and variable query runs, and
    each returns series unless NO_SERIES_LIVE says why it cannot here. Annotations run as
    Grafana runs them, over a time range (the last 30 min: the stories' phase changes and
    decisions are in it however long the set-up took), panels and variables at now."""
    empty = []
    monitoring = live.env.monitoring
    for name in ("healthy", "broken"):
        for dashboard, panel, promql in dashboard_queries(live.namespace, name, rate_interval="2m"):
            if panel.startswith(ANNOTATION):
                found = bool(monitoring.query_range(promql, seconds=DASHBOARD_RANGE_S))
            else:
                found = bool(monitoring.query(promql))
            if not found:
                empty.append((dashboard, panel))
    print("panels without series:", *sorted(set(empty)), sep="\n  ")
    unexplained = {what for what in empty if what[1] not in NO_SERIES_LIVE}
    assert not unexplained, sorted(unexplained)


def test_operator_killed_mid_rollout_resumes_without_counting_a_period_twice(live: Live) -> None:
    """The healthy rollout again (sits.dev/retry); once its first step is taken the
    operator's container is SIGKILLed on the node. The kubelet restarts it; it must pick
    the rollout up from its status (no step taken early, none repeated), and the clients
    see no failed request meanwhile."""
    cluster, namespace = live.cluster, live.namespace
    cluster.kubectl(
        "annotate",
        "sitsd",
        "healthy",
        "-n",
        namespace,
        "--overwrite",
        "sits.dev/retry=operator-killed",
    )
    wait("the analysis restarted", lambda: _phase(cluster, namespace) == "Progressing", 60)
    killed: list[float] = []

    def kill_after_first_step(story: Story, sample: Sample) -> None:
        if killed or not any(e.reason == "Step" for e in story.recorder.timeline.events):
            return
        pod = live.env.operator.pod()
        assert pod is not None
        kill_container(cluster, pod, pod["spec"]["containers"][0]["name"])
        killed.append(time.time())

    story = cluster_story(
        cluster,
        live.env.monitoring.query,
        namespace,
        "healthy",
        ends=frozenset({"Succeeded"}),
        traffic=Traffic(
            _root_url(cluster, namespace, "healthy"), stories.RATES, ROLLOUT_TIMEOUT_S, seed=7
        ),
        window=stories.WINDOW,
        thresholds=stories.THRESHOLDS,
        out=print,
    )
    story.recorder.timeline.scenario = "operator-killed"
    (result,) = run_stories([story], timeout_s=ROLLOUT_TIMEOUT_S, on_sample=kill_after_first_step)
    save(result.timeline, result.load, cluster.state_dir / "live-rollouts" / live.env.suffix)
    assert killed, "the first step never came: nothing was killed"
    assert result.finished, f"not promoted after the kill: {result.timeline.samples[-1].phase}"
    pod = live.env.operator.pod()
    assert pod is not None
    assert pod["status"]["containerStatuses"][0]["restartCount"] >= 1
    steps = [e.t for e in result.timeline.events if e.reason in ("Step", "Promoting")]
    gaps = [b - a for a, b in itertools.pairwise(steps)]
    # Each step needs two new passing periods (5 s each): a period counted twice by the
    # restarted operator would take a step one period early.
    assert len(steps) >= 3, f"step times {steps}"
    assert all(gap >= 2 * 5.0 - 1.5 for gap in gaps), f"step times {steps}"
    records = [r for load in result.load for r in load.records]
    assert not [r for r in records if r.outcome not in (SUCCESS, DROPPED)]


def _phase(cluster: LocalCluster, namespace: str) -> str:
    status = stack.get(cluster, "sitsd", "healthy", "-n", namespace).get("status") or {}
    return str(status.get("phase", ""))


def test_a_gateway_pod_deleted_under_load_loses_no_request(live: Live) -> None:
    """A node drain or a rolling update deletes a gateway pod: its endpoint leaves the
    Service first and it finishes what it holds, so the other replica carries the load and
    no client sees an error."""
    cluster, namespace = live.cluster, live.namespace
    pods = stack.get(
        cluster,
        "pods",
        "-n",
        namespace,
        "-l",
        "sits.dev/component=gateway,sits.dev/deployment=healthy",
    )["items"]
    assert len(pods) == 2
    victim = pods[0]["metadata"]["name"]
    load = LoadThread(
        Traffic(_root_url(cluster, namespace, "healthy"), stories.RATES, 40.0, seed=11)
    ).start()
    time.sleep(8)
    cluster.kubectl("delete", "pod", victim, "-n", namespace, "--wait=false")
    time.sleep(20)
    results = load.stop()
    records = [r for result in results for r in result.records]
    assert len(records) > 50
    failed = [r for r in records if r.outcome not in (SUCCESS, DROPPED)]
    assert not failed, f"{len(failed)} of {len(records)} failed: {failed[:3]}"


def test_a_gateway_pod_killed_under_load_fails_at_most_its_requests_in_flight(live: Live) -> None:
    """A gateway container SIGKILLed (an OOM kill, a crash) while the load runs: the other
    replica keeps serving. The client is the official one with its default retries (2), as
    applications use it: a request that never reached a gateway is retried, one the killed
    pod held is lost. So every failure must have been in flight at the kill."""
    cluster, namespace = live.cluster, live.namespace
    pods = stack.get(
        cluster,
        "pods",
        "-n",
        namespace,
        "-l",
        "sits.dev/component=gateway,sits.dev/deployment=healthy",
    )["items"]
    ready = [p for p in pods if stack.pod_ready(p)]
    assert len(ready) == 2, [p["metadata"]["name"] for p in pods]
    traffic = Traffic(
        _root_url(cluster, namespace, "healthy"), stories.RATES, 40.0, seed=13, max_retries=2
    )
    load = LoadThread(traffic).start()
    time.sleep(10)
    victim = ready[0]
    killed_at = time.time()
    kill_container(cluster, victim, victim["spec"]["containers"][0]["name"])
    time.sleep(20)
    records = [r for result in load.stop() for r in result.records]
    assert len(records) > 50
    in_flight = [
        r
        for r in records
        if r.start <= killed_at and r.start + (r.latency_ms or 0) / 1000 >= killed_at
    ]
    failed = [r for r in records if r.outcome not in (SUCCESS, DROPPED)]
    print(
        f"killed {victim['metadata']['name']}: {len(in_flight)} in flight, "
        f"{len(failed)} of {len(records)} failed"
    )
    assert len(failed) <= len(in_flight), f"{failed[:3]}"
    assert all(r in in_flight for r in failed), f"failed outside the kill: {failed[:3]}"
    after = [r for r in records if r.start > killed_at + 2.0]
    assert after, "no traffic after the kill: nothing was checked"
    assert all(r.outcome == SUCCESS for r in after if r.outcome != DROPPED)
    wait("the killed gateway container restarted and Ready", lambda: _restarted(live, victim), 120)


def _restarted(live: Live, old: dict[str, Any]) -> bool:
    pod = stack.get(live.cluster, "pod", old["metadata"]["name"], "-n", live.namespace)
    statuses = pod["status"].get("containerStatuses") or [{}]
    return stack.pod_ready(pod) and int(statuses[0].get("restartCount", 0)) >= 1


ALERT = "SitsCandidateFailing"


def _chart_rules() -> list[dict[str, Any]]:
    """The chart's PrometheusRule groups, at the live policy's time scale (15 s windows)."""
    values = {
        "prometheusRule.enabled": "true",
        "prometheusRule.candidateAlert.window": "15s",
        "prometheusRule.candidateAlert.for": "5s",
        "prometheusRule.candidateAlert.minRequests": "5",
    }
    args = [a for key, value in values.items() for a in ("--set", f"{key}={value}")]
    (rule,) = [d for d in render_chart(*args) if d["kind"] == "PrometheusRule"]
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    assert ALERT in {r.get("alert") for g in groups for r in g["rules"]}
    return groups


def _webhook_token(live: Live) -> str:
    secrets = stack.get(live.cluster, "secrets", "-n", live.env.operator.namespace)["items"]
    (secret,) = [s for s in secrets if s["metadata"]["name"].endswith("-alert-webhook")]
    return base64.b64decode(secret["data"]["token"]).decode()


def _post_alert(url: str, token: str | None) -> int:
    labels = {"alertname": ALERT, "namespace": "x", "sits_deployment": "broken", "variant": "v2"}
    body = json.dumps({"alerts": [{"status": "firing", "labels": labels}]}).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        error.close()
        return int(error.code)


def _success_rate_periods(cluster: LocalCluster, periods: int) -> None:
    patch = [{"op": "replace", "path": "/spec/rules/0/for", "value": {"periods": periods}}]
    cluster.kubectl(
        "patch", "sitspolicy", stories.POLICY_NAME, "--type=json", "-p", json.dumps(patch)
    )


def test_the_sre_path_an_alert_from_the_chart_rolls_the_candidate_back(
    live: Live, tmp_path: Path
) -> None:
    """The chart's SitsCandidateFailing rule, loaded into the real Prometheus, fires on the
    broken candidate (retried); the real Alertmanager calls the operator's webhook on the
    operator pod's IP. Without credentials its calls are refused (401) and nothing
    changes; with the bearer token of the chart's Secret the candidate is rolled back, and
    the event names the alert. The live policy's success-rate rule waits 1000 periods
    meanwhile, so only the alert can roll back."""
    cluster, namespace, env = live.cluster, live.namespace, live.env
    operator_pod = env.operator.pod()
    assert operator_pod is not None
    webhook = f"http://{operator_pod['status']['podIP']}:9465/api/v1/alerts"
    token = _webhook_token(live)
    assert _post_alert(webhook, None) == 401
    assert _post_alert(webhook, "not-the-token") == 401
    monitoring = env.monitoring
    _success_rate_periods(cluster, 1000)
    try:
        with LocalAlertmanager(tmp_path, webhook=webhook, token=None) as alertmanager:
            monitoring.rules, monitoring.alertmanager_url = _chart_rules(), alertmanager.url
            monitoring.start()
            cluster.kubectl(
                "annotate",
                "sitsd",
                "broken",
                "-n",
                namespace,
                "--overwrite",
                "sits.dev/retry=sre-path",
            )
            traffic = Traffic(
                _root_url(cluster, namespace, "broken"), stories.RATES, 240.0, seed=17
            )
            load = LoadThread(traffic).start()
            try:
                _sre_path(live, alertmanager, token)
            finally:
                load.stop()
    finally:
        _success_rate_periods(cluster, 2)
        monitoring.rules, monitoring.alertmanager_url = None, None
        monitoring.start()
    events = [e for e in _events(live, "broken") if e["reason"] == "AlertRollback"]
    assert events, "no AlertRollback event"
    assert ALERT in events[-1]["message"]


def _sre_path(live: Live, alertmanager: LocalAlertmanager, token: str) -> None:
    def firing() -> bool:
        query = f'ALERTS{{alertname="{ALERT}",alertstate="firing",sits_deployment="broken"}}'
        return set(live.env.monitoring.query(query)) == {"v2"}

    wait(f"{ALERT} firing on broken's v2 (and only there)", firing, timeout=240, step=1.0)
    refused = lambda: "401" in alertmanager.log_path.read_text()  # noqa: E731
    wait("Alertmanager's call without credentials refused", refused, timeout=60, step=1.0)
    assert _broken_phase(live) == "Progressing", "rolled back without valid credentials"
    alertmanager.configure(token)
    alertmanager.reload()
    wait("rolled back by the alert", lambda: _broken_phase(live) == "RolledBack", 90, 1.0)


def _broken_phase(live: Live) -> str:
    status = stack.get(live.cluster, "sitsd", "broken", "-n", live.namespace).get("status") or {}
    return str(status.get("phase", ""))


def _events(live: Live, name: str) -> list[dict[str, Any]]:
    items = stack.get(
        live.cluster,
        "events",
        "-n",
        live.namespace,
        "--field-selector",
        f"involvedObject.name={name}",
    )["items"]
    return list(items)


#: The slow story's latency rule: SITS2026's p95 rule with a ceiling the serialised
#: candidate crosses and the stable stays under, and its 90 s duration at 30 s periods
#: scaled to the live 5 s periods: 15 s, three periods. Measured with the load below
#: (2026-12-07): v1's p95 3 to 5 s throughout; v2's 1 to 2.7 s at 20 %, then 8.5 s, 26 s
#: and 29 s within 10 s of the step to 40 % (30 s is the histogram's last finite bucket).
#: The ceiling sits three times above v1's worst.
SLOW_CEILING_MS = 15_000
SLOW_DURATION_S = 15
#: The slow story's load. A serialised vLLM is slow only when requests queue: its one
#: sequence slot must be asked for more than it can give. Answers of a fixed length
#: (``ignore_eos``: the tiny model's random EOS made them short) of 96 tokens hold the
#: slot for about 1 s on these two cores; the story sends 1.5x the other stories' rate
#: (6 requests/s): v2 keeps up at 20 % (1.2/s) and its queue grows once a step gives it
#: 40 %, while v1 batches its share. (On 2026-12-07, with the plain 4 requests/s and
#: answers that ended at the model's EOS, v2 kept up at 20, 40 and 60 % with a p95 of 1 to
#: 2 s and was promoted.) Clients wait up to 120 s for an answer, as a patient client
#: would: the test is about the latency rule, not about timeouts.
SLOW_MAX_TOKENS = 96
SLOW_RATES = {model: 1.5 * rate for model, rate in stories.RATES.items()}
SLOW_REQUEST_TIMEOUT_S = 120.0


def test_a_slow_candidate_is_cut_to_10_percent_once_the_p95_duration_has_passed(
    live: Live,
) -> None:
    """``slow``'s v2 runs vLLM with ``--max-num-seqs=1`` (stories.SERIAL_ARGS): nothing is
    broken, every request is answered, but one at a time. Under the same session-flow load
    as v1 its p95 crosses the ceiling; the latency rule cuts it to 10 % once the breach has
    lasted the rule's duration (WeightCut), not a period before, and not later than one
    period after; no step is taken while it breaches, nothing is rolled back, and the
    clients see no failed request."""
    cluster, namespace = live.cluster, live.namespace
    # The node has memory for four vLLM pods: broken's (its story and the SRE path's
    # are over) make room for slow's.
    cluster.kubectl(
        "delete", "sitsd", "broken", "-n", namespace, "--ignore-not-found", "--timeout=120s"
    )
    wait("broken's pods gone", lambda: not stack.variant_pods(cluster, namespace, "broken"), 120)
    _latency_rule(cluster, SLOW_CEILING_MS, f"{SLOW_DURATION_S}s")
    stack.apply(cluster, namespace, stories.slow("slow"))
    try:
        wait(
            "slow: 3 pods Ready",
            lambda: stack.all_ready(cluster, namespace, "slow", 3),
            timeout=900,
            step=2.0,
        )
        result, breach_since = _slow_story(live)
        save(result.timeline, result.load, cluster.state_dir / "live-rollouts" / live.env.suffix)
        status = stack.get(cluster, "sitsd", "slow", "-n", namespace).get("status") or {}
    finally:
        _latency_rule(cluster, stories.LATENCY_CEILING_MS, "90s")
        cluster.kubectl("delete", "sitsd", "slow", "-n", namespace, "--wait=false", check=False)
    assert result.finished, f"never cut to 10 %: {_candidate_weights(result)}"
    history = status.get("analysis", {}).get("history", [])
    cuts = [h for h in history if h["action"] == "setWeight"]
    assert cuts, history
    cut = cuts[0]
    assert "latency-p95" in cut["reason"], cut
    assert not [h for h in history if h["action"] in ("rollback", "promote")], history
    since = breach_since.before(cut["at"])
    assert since is not None, f"no latency-p95 breach seen before the cut at {cut['at']}"
    held = cut["at"] - since
    print(f"latency-p95 breached from {since:.1f}, cut at {cut['at']:.1f}: {held:.1f} s")
    assert held >= SLOW_DURATION_S - 0.01, "cut before the rule's duration"
    assert held <= SLOW_DURATION_S + 5.0 + 2.0, "cut later than one period after the duration"
    steps = [e.t + result.timeline.started for e in result.timeline.events if e.reason == "Step"]
    assert not [t for t in steps if since < t < cut["at"]], "a step was taken while breaching"
    records = [r for load in result.load for r in load.records]
    assert not [r for r in records if r.outcome not in (SUCCESS, DROPPED)], "slow, not failing"
    latencies = {
        v: _p95([r.latency_ms or 0 for r in records if r.variant == v]) for v in ("v1", "v2")
    }
    print(f"client-side p95 by variant: {latencies}")
    assert latencies["v2"] > SLOW_CEILING_MS > latencies["v1"], latencies


def _p95(values: list[float]) -> float:
    found = percentile(values, 0.95)
    assert found is not None, "no request reached the variant"
    return found


def _latency_rule(cluster: LocalCluster, ceiling_ms: int, duration: str) -> None:
    policy = stack.get(cluster, "sitspolicy", stories.POLICY_NAME)
    (index,) = [i for i, r in enumerate(policy["spec"]["rules"]) if r["name"] == "latency-p95"]
    patch = [
        {"op": "replace", "path": f"/spec/rules/{index}/threshold", "value": ceiling_ms},
        {"op": "replace", "path": f"/spec/rules/{index}/for", "value": {"duration": duration}},
    ]
    cluster.kubectl(
        "patch", "sitspolicy", stories.POLICY_NAME, "--type=json", "-p", json.dumps(patch)
    )


@dataclass
class _Breaches:
    """The ``since`` of the latency-p95 breach each time the status showed one."""

    seen: list[float] = field(default_factory=list)

    def before(self, at: float) -> float | None:
        """When the breach that a cut at ``at`` acted on began (the cut clears it)."""
        earlier = [since for since in self.seen if since <= at]
        return earlier[-1] if earlier else None


def _slow_story(live: Live) -> tuple[StoryResult, _Breaches]:
    cluster, namespace = live.cluster, live.namespace
    breaches = _Breaches()

    def watch(story: Story, sample: Sample) -> None:
        status = stack.get(cluster, "sitsd", "slow", "-n", namespace).get("status") or {}
        breach = status.get("analysis", {}).get("breaches", {}).get("latency-p95") or {}
        if breach.get("since") is not None:
            breaches.seen.append(float(breach["since"]))
        v2 = sample.variants.get("v2")
        if story.finished_at is None and v2 is not None and v2.weight == 10:
            story.finished_at = time.time()

    story = cluster_story(
        cluster,
        live.env.monitoring.query,
        namespace,
        "slow",
        ends=frozenset({"Succeeded", "RolledBack"}),
        traffic=Traffic(
            _root_url(cluster, namespace, "slow"),
            SLOW_RATES,
            ROLLOUT_TIMEOUT_S,
            max_tokens=SLOW_MAX_TOKENS,
            seed=19,
            request_timeout_s=SLOW_REQUEST_TIMEOUT_S,
            extra_body={"ignore_eos": True},
        ),
        window=stories.WINDOW,
        thresholds={**stories.THRESHOLDS, "p95_ms": float(SLOW_CEILING_MS)},
        out=print,
    )
    (result,) = run_stories([story], timeout_s=ROLLOUT_TIMEOUT_S, on_sample=watch)
    return result, breaches


def test_an_unpullable_gateway_image_is_a_condition_and_the_variants_keep_running(
    live: Live,
) -> None:
    """The operator upgraded with a gateway image no registry has: the gateway Deployment's
    new pod cannot pull it; `ContainersFailing` says so (ErrImagePull or ImagePullBackOff,
    naming the gateway pod); the variants' pods are untouched and the old gateway pods go on
    serving. (Last in the module: the operator keeps the bad image until the teardown.)"""
    cluster, namespace, env = live.cluster, live.namespace, live.env
    before = {
        p["metadata"]["uid"]
        for p in stack.variant_pods(cluster, namespace, "healthy")
        if p["metadata"]["labels"].get("sits.dev/component") != "gateway"
    }
    env.operator.values["gatewayImage"] = "sits.local/sits-inference:not-built-anywhere"
    env.operator.install()

    def condition() -> dict[str, Any] | None:
        status = stack.get(cluster, "sitsd", "healthy", "-n", namespace).get("status") or {}
        for c in status.get("conditions") or []:
            if c["type"] == "ContainersFailing" and c["status"] == "True":
                return dict(c)
        return None

    wait("ContainersFailing on the gateway", lambda: condition() is not None, 180, 2.0)
    found = condition()
    assert found is not None
    assert found["reason"] in ("ErrImagePull", "ImagePullBackOff"), found
    assert "gateway pod" in found["message"], found
    after = {
        p["metadata"]["uid"]
        for p in stack.variant_pods(cluster, namespace, "healthy")
        if p["metadata"]["labels"].get("sits.dev/component") != "gateway"
    }
    assert after == before, "a variant's pods changed"
    load = LoadThread(
        Traffic(_root_url(cluster, namespace, "healthy"), stories.RATES, 10.0, seed=19)
    ).start()
    time.sleep(10)
    records = [r for result in load.stop(timeout=60) for r in result.records]
    assert records
    assert all(r.outcome in (SUCCESS, DROPPED) for r in records), "the old gateway pods stopped"
