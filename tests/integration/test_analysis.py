"""SLI-driven analysis end to end: real Prometheus scraping a synthetic source of the
gateway's metrics, the real operator, the real apiserver. Each scenario asserts the
sequence of weights and phases the SITS2026 rules must produce (on 4 s periods)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.analysis_env import Watcher, crash_looping_status
from tests.integration.conftest import serve_namespaces

from sits_localcluster.nodes import GpuNodeSpec
from sits_localcluster.prometheus import LocalPrometheus
from sits_localcluster.synthetic import Profile, SyntheticServer
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.process import OperatorProcess, running_operator

pytestmark = pytest.mark.cluster
HEALTHY = Profile(rps=40, error_ratio=0.0, latency_ms=60)
# One more A100 in the all-1g.10gb layout: room for every scenario's pods.
CAPACITY_NODE = GpuNodeSpec(
    "analysis-a100", "NVIDIA-A100-SXM4-80GB", 81920, {"mig-1g.10gb": 16}
).manifest()


@pytest.fixture(scope="module")
def capacity(local_cluster: Any) -> Iterator[None]:
    """Room for every scenario's pods, whatever earlier modules left terminating."""
    local_cluster.kubectl("apply", "-f", "-", input=json.dumps(CAPACITY_NODE))
    yield
    local_cluster.kubectl("delete", "node", "analysis-a100", "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(
    operator_kubeconfig: Path, capacity: None, tmp_path_factory: Any
) -> Iterator[OperatorProcess]:
    with running_operator(operator_kubeconfig, tmp_path_factory.mktemp("operator")) as proc:
        yield proc


class Scenario:
    def __init__(
        self,
        cluster: Any,
        namespace: str,
        traffic: SyntheticServer,
        prometheus: LocalPrometheus,
        operator: OperatorProcess,
    ) -> None:
        self.cluster, self.ns, self.traffic = cluster, namespace, traffic
        self.prometheus, self.operator = prometheus, operator
        self.policy = f"fast-{uuid.uuid4().hex[:6]}"
        self.watch = Watcher(cluster, namespace, "chat")

    def set(self, variant: str, profile: Profile) -> None:
        self.traffic.traffic.set(self.ns, "chat", variant, profile)

    def start(
        self,
        candidate: Profile,
        policy: dict[str, Any] | None = None,
        traffic: dict[str, Any] | None = None,
        **rollout: Any,
    ) -> None:
        self.set("v1", HEALTHY)
        self.set("v2", candidate)
        body = policy or fast_policy(self.policy)
        body["metadata"]["name"] = self.policy
        body["spec"].setdefault("prometheus", {"url": self.prometheus.url})
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
        manifest = deployment("chat", self.policy, **rollout)
        manifest["spec"]["traffic"].update(traffic or {})
        self.cluster.kubectl("apply", "-n", self.ns, "-f", "-", input=json.dumps(manifest))

    def annotate(self, key: str, value: str) -> None:
        self.cluster.kubectl(
            "annotate", "sitsd", "chat", "-n", self.ns, "--overwrite", f"sits.dev/{key}={value}"
        )

    def candidate_weights(self) -> list[int]:
        weights = [w.get("v2", 0) for _, w in self.watch.timeline]
        return [w for i, w in enumerate(weights) if i == 0 or weights[i - 1] != w]

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

    def crash(self, variant: str, last_words: str) -> None:
        """The variant's pod as the kubelet shows a vLLM that exits at start."""
        out = self.cluster.kubectl(
            "get", "pods", "-n", self.ns, "-o", "json", "-l", f"sits.dev/variant={variant}"
        )
        (pod,) = json.loads(out.stdout)["items"]
        patch = crash_looping_status(pod, restarts=3, last_words=last_words)
        self.cluster.kubectl(
            "patch",
            "pod",
            pod["metadata"]["name"],
            "-n",
            self.ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(patch),
        )

    def cleanup(self) -> None:
        self.cluster.kubectl("delete", "sitspolicy", self.policy, "--wait=false", check=False)


@pytest.fixture
def scenario(
    local_cluster: Any,
    namespace: str,
    traffic: SyntheticServer,
    prometheus: LocalPrometheus,
    operator: OperatorProcess,
) -> Iterator[Scenario]:
    s = Scenario(local_cluster, namespace, traffic, prometheus, operator)
    yield s
    s.cleanup()


def analysis(status: dict[str, Any]) -> dict[str, Any]:
    return dict(status.get("analysis") or {})


def test_healthy_candidate_is_promoted_step_by_step(scenario: Scenario) -> None:
    scenario.start(HEALTHY)
    status = scenario.watch.phase("Succeeded")
    assert {v["name"]: v["weight"] for v in status["variants"]} == {"v1": 0, "v2": 100}
    assert [w for w in scenario.candidate_weights() if w] == [25, 50, 100], scenario.watch.timeline
    actions = [a for a, _ in scenario.watch.history()]
    assert actions[0] == "restart"
    assert actions[-1] in ("promote", "succeeded")
    assert status["candidateSuccessRate"] == pytest.approx(1.0)
    assert status["candidateLatencyP95Ms"] < 100


def test_error_rate_rolls_back_after_exactly_two_failing_periods(scenario: Scenario) -> None:
    scenario.start(Profile(rps=40, error_ratio=0.10, latency_ms=60))
    status = scenario.watch.phase("RolledBack")
    assert {v["name"]: v["weight"] for v in status["variants"]} == {"v1": 100, "v2": 0}
    before = [s for s in scenario.watch.snapshots if s.get("phase") == "Progressing"]
    counts = [
        analysis(s).get("breaches", {}).get("success-rate", {}).get("periods", 0) for s in before
    ]
    assert max(counts) == 1, "one failing period must not roll back"
    assert any(c == 1 and s["candidateWeight"] == 25 for c, s in zip(counts, before, strict=True))
    assert status["candidateSuccessRate"] == pytest.approx(0.9, abs=0.02)
    rolled = [e for e in scenario.events() if e["reason"] == "RolledBack"]
    assert rolled
    assert "success" in rolled[0]["message"]


def test_slow_candidate_is_cut_to_ten_percent_after_the_duration(scenario: Scenario) -> None:
    scenario.start(Profile(rps=40, error_ratio=0.0, latency_ms=300))
    status = scenario.watch.until("weight cut to 10", lambda s: s.get("candidateWeight") == 10)
    since = min(
        b["since"]
        for s in scenario.watch.snapshots
        if (b := analysis(s).get("breaches", {}).get("latency-p95", {})).get("since")
    )
    cut_at = next(h["at"] for h in analysis(status)["history"] if h["action"] == "setWeight")
    assert cut_at - since >= 12 - 0.01, "cut before the rule's duration"
    assert cut_at - since <= 12 + 4 + 2, "cut later than one period after the duration"
    assert scenario.candidate_weights()[-2:] == [25, 10]
    assert status["phase"] == "Progressing"


BAD_ARG_LAST_WORDS = "api_server.py: error: unrecognized arguments: --max-model-lenght=8192"


def test_crash_looping_candidate_is_rolled_back_after_two_periods(scenario: Scenario) -> None:
    """Each period that finds the candidate's vLLM in CrashLoopBackOff fails the built-in
    rule `containers`; after SITS2026's 2 (failingContainers) it is RolledBack, with the
    kubelet's reason and vLLM's last words in status, history and the event. The synthetic
    traffic still reports v2 healthy: the pods speak before the SLIs."""
    scenario.start(HEALTHY, stepWeight=10, maxWeight=90)
    scenario.watch.until("progressing", lambda s: s.get("candidateWeight") == 10)
    scenario.crash("v2", BAD_ARG_LAST_WORDS)
    status = scenario.watch.until(
        "RolledBack", lambda s: analysis(s).get("phase") == "RolledBack", timeout=40
    )
    before = [s for s in scenario.watch.snapshots if analysis(s).get("phase") == "Progressing"]
    counts = [
        analysis(s).get("breaches", {}).get("containers", {}).get("periods", 0) for s in before
    ]
    assert max(counts) == 1, "one failing period must not roll back"
    assert analysis(status)["breaches"]["containers"]["periods"] == 2
    assert status["phase"] == "RolledBack"
    assert "containers: v2: CrashLoopBackOff" in status["message"], status["message"]
    assert BAD_ARG_LAST_WORDS in status["message"]
    rollback = [h for h in analysis(status)["history"] if h["action"] == "rollback"]
    assert "v2: CrashLoopBackOff" in rollback[-1]["reason"]
    rolled = [e for e in scenario.events() if e["reason"] == "RolledBack"]
    assert rolled
    assert rolled[0]["type"] == "Warning"
    assert "v2: CrashLoopBackOff" in rolled[0]["message"]
    assert analysis(status)["weights"] == {"v1": 100, "v2": 0}


def test_crash_looping_stable_holds_and_never_decides_for_the_candidate(
    scenario: Scenario,
) -> None:
    """A broken stable is no yardstick: the analysis holds (no step, no promotion, no
    rollback) while it crash-loops, and says why."""
    scenario.start(HEALTHY, stepWeight=10, maxWeight=90)
    scenario.watch.until("progressing", lambda s: s.get("candidateWeight") == 10)
    scenario.crash("v1", BAD_ARG_LAST_WORDS)
    held = scenario.watch.until(
        "held on the stable",
        lambda s: analysis(s).get("lastReason", "").startswith("stable v1 failing: Crash"),
        timeout=30,
    )
    weights, step = analysis(held)["weights"], analysis(held)["stepIndex"]
    deadline = time.monotonic() + 16  # 4 periods: healthy SLIs would have stepped twice
    while time.monotonic() < deadline:
        state = analysis(scenario.watch.status())
        assert (state["phase"], state["weights"], state["stepIndex"]) == (
            "Progressing",
            weights,
            step,
        )
        assert "containers" not in state.get("breaches", {})
        time.sleep(0.5)
    assert not [e for e in scenario.events() if e["reason"] == "RolledBack"]


def test_candidate_without_traffic_holds_then_pauses(scenario: Scenario) -> None:
    scenario.start(Profile(rps=0))
    first = scenario.watch.until("analysis started", lambda s: analysis(s).get("noDataSince"))
    paused = scenario.watch.phase("Paused", timeout=60)
    held = [s for s in scenario.watch.snapshots if s.get("phase") == "Progressing"]
    assert {s["candidateWeight"] for s in held if s.get("candidateWeight")} == {25}
    assert analysis(paused)["lastEvaluatedAt"] - analysis(first)["noDataSince"] >= 12 - 0.01
    analysis_cond = next(c for c in paused["conditions"] if c["type"] == "Analysis")
    assert analysis_cond["status"] == "False"


def test_prometheus_outage_freezes_then_resumes(scenario: Scenario) -> None:
    scenario.start(HEALTHY, stepWeight=10, maxWeight=30)
    scenario.watch.until("first step", lambda s: s.get("candidateWeight") == 10)
    scenario.prometheus.stop()
    try:
        frozen = scenario.watch.until(
            "MetricsError",
            lambda s: any(
                c["type"] == "Analysis" and c["reason"] == "MetricsError"
                for c in s.get("conditions", [])
            ),
            timeout=30,
        )
        weight = frozen["candidateWeight"]
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            status = scenario.watch.status()
            assert status["candidateWeight"] == weight
            assert status["phase"] == "Progressing"
            time.sleep(0.5)
    finally:
        scenario.prometheus.start()
    scenario.watch.phase("Succeeded", timeout=90)
    assert any(e["reason"] == "AnalysisError" for e in scenario.events())


def test_operator_restart_mid_analysis_never_counts_a_period_twice(scenario: Scenario) -> None:
    scenario.start(HEALTHY, stepWeight=10, maxWeight=40)
    scenario.watch.until("first step", lambda s: s.get("candidateWeight") == 20)
    scenario.operator.restart()
    scenario.watch.phase("Succeeded", timeout=120)
    seen: dict[int, tuple[int, int]] = {}
    for snapshot in scenario.watch.snapshots:
        state = analysis(snapshot)
        if state.get("lastPeriod") is None or snapshot.get("phase") != "Progressing":
            continue
        counters = (state["consecutivePasses"], state["stepIndex"])
        assert seen.setdefault(state["lastPeriod"], counters) == counters


def test_new_revision_mid_analysis_restarts_it(scenario: Scenario) -> None:
    scenario.start(HEALTHY, stepWeight=10, maxWeight=50)
    scenario.watch.until("second step", lambda s: s.get("candidateWeight") == 20)
    patch = [{"op": "replace", "path": "/spec/variants/1/revision", "value": "qwen3-1.7b-fix"}]
    scenario.cluster.kubectl(
        "patch", "sitsd", "chat", "-n", scenario.ns, "--type=json", "-p", json.dumps(patch)
    )
    status = scenario.watch.until(
        "analysis restarted", lambda s: "qwen3-1.7b-fix" in analysis(s).get("revisionKey", "")
    )
    restarts = [a for a, _ in scenario.watch.history() if a == "restart"]
    assert len(restarts) == 2
    assert analysis(status)["stepIndex"] == 0


def test_manual_commands_by_annotation(scenario: Scenario) -> None:
    scenario.start(HEALTHY, stepWeight=10, maxWeight=90)
    scenario.watch.until("progressing", lambda s: s.get("candidateWeight") == 10)
    scenario.annotate("pause", "1")
    paused = scenario.watch.phase("Paused", timeout=20)
    weight = paused["candidateWeight"]
    time.sleep(9)
    assert scenario.watch.status()["candidateWeight"] == weight
    scenario.annotate("resume", "1")
    scenario.watch.phase("Progressing", timeout=20)
    scenario.annotate("promote", "1")
    promoted = scenario.watch.phase("Succeeded", timeout=20)
    assert promoted["candidateWeight"] == 100
    scenario.annotate("retry", "1")
    scenario.watch.until(
        "retried",
        lambda s: s.get("phase") == "Progressing" and s.get("candidateWeight") == 10,
        timeout=20,
    )
    scenario.annotate("abort", "1")
    aborted = scenario.watch.phase("RolledBack", timeout=20)
    assert aborted["candidateWeight"] == 0
    acknowledged = analysis(aborted)["acknowledged"]
    assert acknowledged == {"pause": "1", "resume": "1", "promote": "1", "retry": "1", "abort": "1"}
    reasons = {e["reason"] for e in scenario.events()}
    assert {"Paused", "Resumed", "Promoted", "Retry", "RolledBack"} <= reasons


def test_alertmanager_webhook_rolls_back(scenario: Scenario, tmp_path: Path) -> None:
    from tests.integration.alertmanager import LocalAlertmanager

    scenario.start(HEALTHY, stepWeight=10, maxWeight=90)
    scenario.watch.until("progressing", lambda s: s.get("candidateWeight") == 10)
    with LocalAlertmanager(tmp_path, webhook=scenario.operator.alert_webhook_url) as am:
        am.fire(
            {
                "alertname": "SitsHighP95",
                "severity": "page",
                "namespace": scenario.ns,
                "sits_deployment": "chat",
                "variant": "v2",
            }
        )
        status = scenario.watch.phase("RolledBack", timeout=40)
    assert status["candidateWeight"] == 0
    alert_events = [e for e in scenario.events() if e["reason"] == "AlertRollback"]
    assert alert_events
    assert "SitsHighP95" in alert_events[0]["message"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param(b"{not json", 400, id="malformed-json"),
        pytest.param(b'{"alerts": "nope"}', 400, id="alerts-not-a-list"),
        pytest.param(b'{"alerts": [{"status": "firing"}]}', 400, id="alert-without-labels"),
        pytest.param(
            b'{"alerts": [{"status": "firing", "labels": {"alertname": "X"}}]}',
            422,
            id="names-no-deployment",
        ),
        pytest.param(
            b'{"alerts": [{"status": "resolved", "labels": {"namespace": "x",'
            b' "sits_deployment": "y"}}]}',
            422,
            id="resolved-only",
        ),
        pytest.param(
            b'{"alerts": [{"status": "firing", "labels": {"namespace": "nowhere",'
            b' "sits_deployment": "ghost"}}]}',
            404,
            id="unknown-deployment",
        ),
    ],
)
def test_bad_alert_payloads_get_4xx(operator: OperatorProcess, body: bytes, status: int) -> None:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(operator.alert_webhook_url, data=body, method="POST")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=5)
    error.value.close()
    assert error.value.code == status


@pytest.fixture(scope="module")
def gateway_api(local_cluster: Any) -> None:
    """The real Gateway API CRDs (standard channel) from the pinned Go module."""
    from sits_localcluster.gateway_api import gateway_api_crds

    local_cluster.kubectl(
        "apply", "--server-side", "--field-manager=sits-tests", "-f", str(gateway_api_crds())
    )
    local_cluster.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/httproutes.gateway.networking.k8s.io",
    )


def http_route(weights: dict[str, int]) -> dict[str, Any]:
    """A user's route: a parent Gateway, a path match, a header filter, and one more backend."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "chat"},
        "spec": {
            "parentRefs": [{"name": "edge", "namespace": "gateway-system"}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                    "filters": [
                        {
                            "type": "RequestHeaderModifier",
                            "requestHeaderModifier": {"set": [{"name": "x-sits", "value": "1"}]},
                        }
                    ],
                    "backendRefs": [
                        {"name": f"chat-{v}", "port": 8080, "weight": w} for v, w in weights.items()
                    ],
                },
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/static"}}],
                    "backendRefs": [{"name": "static-files", "port": 80}],
                },
            ],
        },
    }


def route_state(scenario: Scenario, namespace: str | None = None) -> dict[str, Any]:
    out = scenario.cluster.kubectl(
        "get",
        "httproute",
        "chat",
        "-n",
        namespace or scenario.ns,
        "-o",
        "json",
        "--show-managed-fields",
    )
    return dict(json.loads(out.stdout))


def variant_weights(route: dict[str, Any]) -> tuple[int, int]:
    refs = {r["name"]: r.get("weight", 1) for r in route["spec"]["rules"][0]["backendRefs"]}
    return refs["chat-v1"], refs["chat-v2"]


def traffic_applied(status: dict[str, Any]) -> dict[str, Any]:
    found = [c for c in status.get("conditions", []) if c["type"] == "TrafficApplied"]
    return dict(found[0]) if found else {}


def reference_grant(namespace: str, from_namespace: str) -> dict[str, Any]:
    """Lets SitsDeployments of `from_namespace` use the HTTPRoute chat of `namespace`."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "sits-chat", "namespace": namespace},
        "spec": {
            "from": [{"group": "sits.dev", "kind": "SitsDeployment", "namespace": from_namespace}],
            "to": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "chat"}],
        },
    }


def test_gateway_api_router_moves_httproute_weights(scenario: Scenario, gateway_api: None) -> None:
    scenario.cluster.kubectl(
        "apply", "-n", scenario.ns, "-f", "-", input=json.dumps(http_route({"v1": 100, "v2": 0}))
    )
    scenario.start(HEALTHY, traffic={"router": "gatewayAPI", "httpRoute": {"name": "chat"}})
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        route = route_state(scenario)
        point = variant_weights(route)
        if not seen or seen[-1] != point:
            seen.append(point)
        if scenario.watch.status().get("phase") == "Succeeded":
            break
        time.sleep(0.4)
    # The route starts at 100/0 (written above); the operator may move it before the first poll.
    assert [point for point in seen if point != (100, 0)] == [(75, 25), (50, 50), (0, 100)]
    assert route["spec"]["rules"][0]["filters"][0]["type"] == "RequestHeaderModifier"
    assert route["spec"]["rules"][0]["matches"][0]["path"]["value"] == "/v1"
    assert route["spec"]["rules"][1]["backendRefs"] == [
        {"name": "static-files", "port": 80, "group": "", "kind": "Service", "weight": 1}
    ]


def test_gateway_api_route_in_another_namespace_needs_a_reference_grant(
    scenario: Scenario, gateway_api: None
) -> None:
    """Without a ReferenceGrant in the route's namespace the route is not written and the
    status says why; once one allows this SitsDeployment's namespace, the weights move."""
    routes = f"{scenario.ns}-routes"
    kubectl = scenario.cluster.kubectl
    kubectl("create", "namespace", routes)
    try:
        # SITS_TEST_RBAC=namespaced: the route's namespace is one the chart must list in
        # operator.watchNamespaces too (its Role lets the operator read the route there).
        serve_namespaces(scenario.cluster, scenario.operator, scenario.ns, routes)
        kubectl(
            "apply", "-n", routes, "-f", "-", input=json.dumps(http_route({"v1": 100, "v2": 0}))
        )
        written = route_state(scenario, routes)["metadata"]["resourceVersion"]
        scenario.start(
            HEALTHY,
            traffic={"router": "gatewayAPI", "httpRoute": {"name": "chat", "namespace": routes}},
        )
        refused = scenario.watch.until(
            "TrafficApplied False", lambda s: traffic_applied(s).get("status") == "False"
        )
        condition = traffic_applied(refused)
        assert condition["reason"] == "ReferenceGrantMissing"
        assert f"HTTPRoute {routes}/chat is in another namespace" in condition["message"]
        assert (
            f"a ReferenceGrant in {routes} must allow sits.dev/SitsDeployment from {scenario.ns}"
            in condition["message"]
        )
        time.sleep(9)  # two more analysis periods: still nothing written
        route = route_state(scenario, routes)
        assert route["metadata"]["resourceVersion"] == written
        assert variant_weights(route) == (100, 0)
        assert "analysis" not in scenario.watch.status()  # the rollout waits, undecided
        warnings = [e for e in scenario.events() if e["reason"] == "ReferenceGrantMissing"]
        assert {e["type"] for e in warnings} == {"Warning"}
        kubectl("apply", "-f", "-", input=json.dumps(reference_grant(routes, scenario.ns)))
        deadline = time.monotonic() + 60
        while variant_weights(route_state(scenario, routes)) == (100, 0):
            assert time.monotonic() < deadline, "the weights never moved after the grant"
            time.sleep(0.4)
        assert variant_weights(route_state(scenario, routes)) == (75, 25)
        scenario.watch.until("TrafficApplied dropped", lambda s: not traffic_applied(s))
    finally:
        kubectl("delete", "namespace", routes, "--wait=false", "--ignore-not-found", check=False)


def without_variant_weights(route: dict[str, Any]) -> dict[str, Any]:
    """The route's spec with the variant backends' weights blanked: all the operator may change."""
    spec = json.loads(json.dumps(route["spec"]))
    for rule in spec["rules"]:
        for ref in rule["backendRefs"]:
            if ref["name"] in ("chat-v1", "chat-v2"):
                ref["weight"] = None
    return dict(spec)


def test_gateway_api_router_patches_only_the_weights(scenario: Scenario, gateway_api: None) -> None:
    """The user's route keeps its matches, filters and other backends; managedFields name
    the operator; a filter the user changes mid-rollout stays changed."""
    user_route = http_route({"v1": 100, "v2": 0})
    user_route["spec"]["rules"][0]["backendRefs"].append(
        {"name": "chat-legacy", "port": 8080, "weight": 0}
    )
    scenario.cluster.kubectl("apply", "-n", scenario.ns, "-f", "-", input=json.dumps(user_route))
    before = route_state(scenario)
    scenario.start(
        HEALTHY,
        traffic={"router": "gatewayAPI", "httpRoute": {"name": "chat"}},
        stepWeight=10,
        maxWeight=90,
    )
    deadline = time.monotonic() + 90
    while variant_weights(route := route_state(scenario)) == (100, 0):
        assert time.monotonic() < deadline, "the weights never moved"
        time.sleep(0.4)
    assert variant_weights(route) == (90, 10)
    assert without_variant_weights(route) == without_variant_weights(before)
    managers = {(f["manager"], f["operation"]) for f in route["metadata"]["managedFields"]}
    assert ("sits-operator", "Update") in managers
    assert ("kubectl-client-side-apply", "Update") in managers  # the user's, still there
    header = "/spec/rules/0/filters/0/requestHeaderModifier/set/0/value"
    scenario.cluster.kubectl(
        "patch",
        "httproute",
        "chat",
        "-n",
        scenario.ns,
        "--type=json",
        "-p",
        json.dumps([{"op": "replace", "path": header, "value": "2"}]),
    )
    edited = route_state(scenario)
    deadline = time.monotonic() + 90
    while variant_weights(route := route_state(scenario)) == variant_weights(edited):
        assert time.monotonic() < deadline, "the weights never moved after the user's edit"
        time.sleep(0.4)
    assert variant_weights(route)[1] > variant_weights(edited)[1]
    assert without_variant_weights(route) == without_variant_weights(edited)
    modifier = route["spec"]["rules"][0]["filters"][0]["requestHeaderModifier"]
    assert modifier["set"] == [{"name": "x-sits", "value": "2"}]
    assert route["spec"]["rules"][0]["backendRefs"][2]["name"] == "chat-legacy"


def test_gateway_api_router_reads_weights_back_before_deciding(
    scenario: Scenario, gateway_api: None
) -> None:
    """Someone edits the route by hand: the next decision starts from what traffic does."""
    scenario.cluster.kubectl(
        "apply", "-n", scenario.ns, "-f", "-", input=json.dumps(http_route({"v1": 100, "v2": 0}))
    )
    scenario.start(
        HEALTHY,
        traffic={"router": "gatewayAPI", "httpRoute": {"name": "chat"}},
        stepWeight=10,
        maxWeight=90,
    )
    scenario.watch.until("first step", lambda s: s.get("candidateWeight") == 10)
    scenario.annotate("pause", "1")
    scenario.watch.phase("Paused", timeout=20)
    patch = [
        {"op": "replace", "path": "/spec/rules/0/backendRefs/0/weight", "value": 70},
        {"op": "replace", "path": "/spec/rules/0/backendRefs/1/weight", "value": 30},
    ]
    scenario.cluster.kubectl(
        "patch", "httproute", "chat", "-n", scenario.ns, "--type=json", "-p", json.dumps(patch)
    )
    scenario.annotate("resume", "1")
    status = scenario.watch.until("next step from 30", lambda s: s.get("candidateWeight") == 40)
    steps = [w.get("v2") for a, w in scenario.watch.history() if a == "step"]
    assert 40 in steps
    assert 20 not in steps
    assert status["phase"] == "Progressing"
