"""The Helm chart (charts/sits-operator), rendered by a real `helm` (built from its Go
module by scripts/setup-helm.sh) and checked by the real API server (server-side dry run).

That the chart's RBAC is *enough* is shown by test_operator.py and test_analysis.py, which
run the operator with the chart's ServiceAccount token (in either mode: SITS_TEST_RBAC,
tests/integration/conftest.py), and by test_namespaced_install.py; here the tables below
make it the *least*: a verb or resource added to the rules without a line (and a reason)
here fails.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.integration.conftest import CHART, RELEASE, REPO, render_chart, watching

from sits_localcluster.helm import helm_binary
from sits_operator.model.policy import DEFAULT_PROMETHEUS_URL

# (apiGroup, resource) -> verbs, and why the operator needs them, in the namespaces it
# serves: the cluster-wide install's ClusterRole, or the namespaced install's Roles.
NAMESPACED_RBAC: dict[tuple[str, str], set[str]] = {
    # watched; Kopf's finalizer and progress annotations (patch); alerts read one (get);
    # get, list and watch are also what the gateway's Role grants (escalation check)
    ("sits.dev", "sitsdeployments"): {"get", "list", "watch", "patch"},
    # decisions go to status (the builtin router reads weights back from gateway pods)
    ("sits.dev", "sitsdeployments/status"): {"patch"},
    # blockOwnerDeletion under OwnerReferencesPermissionEnforcement
    ("sits.dev", "sitsdeployments/finalizers"): {"update"},
    ("apps", "deployments"): {"list", "watch", "create", "patch", "delete"},  # SSA children
    ("", "services"): {"list", "watch", "create", "patch", "delete"},
    # readiness and scheduling into status; the builtin router finds the gateway's pods
    ("", "pods"): {"list", "watch"},
    # router builtin: the gateway's identity and PDB, applied, watched, pruned like the rest
    ("", "serviceaccounts"): {"list", "watch", "create", "patch", "delete"},
    ("rbac.authorization.k8s.io", "roles"): {"list", "watch", "create", "patch", "delete"},
    ("rbac.authorization.k8s.io", "rolebindings"): {"list", "watch", "create", "patch", "delete"},
    ("policy", "poddisruptionbudgets"): {"list", "watch", "create", "patch", "delete"},
    # never used by the operator: RBAC lets it create (and bind) the gateway's Role, which
    # grants these, only if it holds them itself (narrower than escalate/bind)
    ("discovery.k8s.io", "endpointslices"): {"get", "list", "watch"},
    ("", "events"): {"create"},  # an event per decision
    # gatewayAPI: read the route, JSON-patch only the variant weights (never update)
    ("gateway.networking.k8s.io", "httproutes"): {"get", "patch"},
    # a route in another namespace only with a ReferenceGrant there, listed per analysis
    ("gateway.networking.k8s.io", "referencegrants"): {"list"},
}
# Cluster-scoped in both modes: SitsPolicies are cluster-scoped objects.
CLUSTER_SCOPED_RBAC: dict[tuple[str, str], set[str]] = {
    ("sits.dev", "sitspolicies"): {"list", "watch"},  # an index fed by a watch
}
# Cluster-wide install only: Kopf notices CRDs added while it runs. With --namespace it
# does not look (settings.scanning.disabled, sits_operator.__main__.kopf_options).
CRD_WATCH: dict[tuple[str, str], set[str]] = {
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
}
# The cluster-wide install's ClusterRole.
LEAST_RBAC = NAMESPACED_RBAC | CLUSTER_SCOPED_RBAC | CRD_WATCH


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    kinds: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        kinds.setdefault(doc["kind"], []).append(doc)
    return kinds


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm_binary()), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_helm_lint_is_clean() -> None:
    result = helm("lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_the_default_release_holds_operator_rbac_service_and_policy() -> None:
    kinds = by_kind(render_chart())
    assert set(kinds) == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
        "SitsPolicy",
        "Secret",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
        "PodDisruptionBudget",
    }
    optional = render_chart(
        "--set", "prometheusRule.enabled=true", "--set", "metrics.serviceMonitor.enabled=true"
    )
    assert set(by_kind(optional)) - set(kinds) == {"PrometheusRule", "ServiceMonitor"}
    (binding,) = kinds["ClusterRoleBinding"]
    (account,) = kinds["ServiceAccount"]
    assert account["metadata"]["name"] == RELEASE  # not "sits-operator-sits-operator"
    assert binding["roleRef"]["name"] == kinds["ClusterRole"][0]["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "sits-system"}
    ]


def granted(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> verbs of a Role or ClusterRole: no wildcard, no names."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert "resourceNames" not in rule
        assert "nonResourceURLs" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs.setdefault((group, resource), set()).update(rule["verbs"])
    return verbs


def test_the_cluster_role_is_the_least_that_works() -> None:
    (role,) = by_kind(render_chart())["ClusterRole"]
    assert granted(role) == LEAST_RBAC


def test_the_namespaced_install_has_a_role_in_each_watched_namespace() -> None:
    """operator.watchNamespaces: the operator's rules in a Role per watched namespace (each
    once), bound to its ServiceAccount; the ClusterRole reads SitsPolicies and nothing
    else; the operator is told the same namespaces (--namespace each)."""
    kinds = by_kind(render_chart(*watching("team-a", "team-b", "team-a")))
    operator = [r for r in kinds["Role"] if r["metadata"]["name"] == RELEASE]
    assert sorted(r["metadata"]["namespace"] for r in operator) == ["team-a", "team-b"]
    for role in operator:
        assert granted(role) == NAMESPACED_RBAC
    (cluster_role,) = kinds["ClusterRole"]
    assert granted(cluster_role) == CLUSTER_SCOPED_RBAC
    (cluster_binding,) = kinds["ClusterRoleBinding"]
    assert cluster_binding["roleRef"]["name"] == cluster_role["metadata"]["name"]
    account = {"kind": "ServiceAccount", "name": RELEASE, "namespace": "sits-system"}
    assert cluster_binding["subjects"] == [account]
    bindings = [b for b in kinds["RoleBinding"] if b["metadata"]["name"] == RELEASE]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for binding in bindings:
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": RELEASE,
        }
        assert binding["subjects"] == [account]
    # The leader election's Role stays in the release's namespace, as it was.
    election = [r for r in kinds["Role"] if r["metadata"]["name"] != RELEASE]
    assert [r["metadata"]["namespace"] for r in election] == ["sits-system"]
    (deployment,) = kinds["Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--namespace")] == [
        "--namespace=team-a",
        "--namespace=team-b",
    ]
    cluster_wide = by_kind(render_chart())["Deployment"][0]
    assert not [
        a
        for a in cluster_wide["spec"]["template"]["spec"]["containers"][0]["args"]
        if a.startswith("--namespace")
    ]


def test_both_modes_take_their_rules_from_one_source() -> None:
    """The Roles' rules are the ClusterRole's, in the same order and with the same
    comments' content: only the cluster-scoped rules differ (templates/_rbac.tpl)."""
    (cluster_role,) = by_kind(render_chart())["ClusterRole"]
    kinds = by_kind(render_chart(*watching("team-a")))
    (role,) = [r for r in kinds["Role"] if r["metadata"]["name"] == RELEASE]
    (reader,) = kinds["ClusterRole"]
    crds = [r for r in cluster_role["rules"] if r["apiGroups"] == ["apiextensions.k8s.io"]]
    assert cluster_role["rules"] == role["rules"] + reader["rules"] + crds


def test_a_cluster_admin_can_keep_the_cluster_role_out_of_the_release() -> None:
    """rbac.clusterRole=false: nothing cluster-scoped from the RBAC template (a team that
    may not create it installs the rest; an admin applies the ClusterRole)."""
    values = ("--set", "rbac.clusterRole=false", "--set", "defaultPolicy.install=false")
    team = by_kind(render_chart(*watching("team-a"), *values))
    assert not {"ClusterRole", "ClusterRoleBinding", "SitsPolicy"} & set(team)
    assert {r["metadata"]["namespace"] for r in team["Role"]} == {"team-a", "sits-system"}
    # What the admin applies for that release: the cluster-scoped template alone.
    admin = by_kind(render_chart(*watching("team-a"), "--show-only", "templates/rbac.yaml"))
    assert set(admin) == {"ClusterRole", "ClusterRoleBinding"}
    assert granted(admin["ClusterRole"][0]) == CLUSTER_SCOPED_RBAC
    assert admin["ClusterRoleBinding"][0]["subjects"][0]["name"] == RELEASE


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("--set", "operator.watchNamespaces=team-a"), "watchNamespaces must be a list"),
        (("--set-json", 'operator.watchNamespaces=["team-a", ""]'), "has an empty entry"),
    ],
)
def test_watch_namespaces_that_cannot_work_are_refused(
    values: tuple[str, ...], message: str
) -> None:
    result = helm("template", RELEASE, str(CHART), *values)
    assert result.returncode != 0
    assert message in result.stderr


def test_the_operator_pod_is_locked_down_and_wired_to_its_ports() -> None:
    (deployment,) = by_kind(render_chart("--set", "inferenceImage=registry.example/inf:9"))[
        "Deployment"
    ]
    # Two replicas, one acting (leader election, on by default): rolling upgrades.
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["image"].endswith(":0.1.0")  # appVersion by default
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["SITS_CACHE_SIDECAR_IMAGE"] == "registry.example/inf:9"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 9464, "alerts": 9465, "liveness": 8081}
    assert "--metrics-address=0.0.0.0:9464" in container["args"]
    # The webhook listens on the pod's own IP, and wants the token of a mounted Secret.
    assert "--alert-webhook-address=$(POD_IP):9465" in container["args"]
    assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    token_dir = Path(env["SITS_ALERT_WEBHOOK_TOKEN_FILE"]).parent
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == str(token_dir)]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == f"{RELEASE}-alert-webhook"
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9464"


def test_the_alert_webhook_has_a_token_and_a_network_policy() -> None:
    kinds = by_kind(render_chart())
    (secret,) = kinds["Secret"]
    assert secret["metadata"]["name"] == f"{RELEASE}-alert-webhook"
    assert len(base64.b64decode(secret["data"]["token"])) == 48
    (policy,) = kinds["NetworkPolicy"]
    alerts, others = policy["spec"]["ingress"]
    assert alerts["ports"] == [{"port": "alerts", "protocol": "TCP"}]
    assert alerts["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert "from" not in others, "metrics and liveness stay reachable"
    own = by_kind(render_chart("--set", "alertWebhook.auth.existingSecret=mine"))
    assert "Secret" not in own
    volumes = own["Deployment"][0]["spec"]["template"]["spec"]["volumes"]
    assert {"secretName": "mine", "items": [{"key": "token", "path": "token"}]} in [
        v.get("secret") for v in volumes
    ]
    off = by_kind(render_chart("--set", "alertWebhook.enabled=false"))
    assert "Secret" not in off
    assert "NetworkPolicy" not in off


def test_the_default_policy_is_policies_sits2026() -> None:
    (policy,) = by_kind(render_chart())["SitsPolicy"]
    canonical = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
    prometheus = {"url": DEFAULT_PROMETHEUS_URL, "timeout": "5s"}  # values prometheus.*
    assert policy["spec"] == {**canonical["spec"], "prometheus": prometheus}
    assert policy["metadata"]["name"] == "sits2026"
    assert policy["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
    assert "SitsPolicy" not in by_kind(render_chart("--set", "defaultPolicy.install=false"))


SECURED = (
    "--set=prometheus.url=https://prometheus.monitoring.svc:9090",
    "--set=prometheus.basicAuth.secretRef.name=prom-basic",
    "--set=prometheus.tls.caSecretRef.name=prom-ca",
    "--set=prometheus.tls.serverName=prometheus.internal",
    "--set=prometheus.headers[0].name=X-Scope-OrgID",
    "--set=prometheus.headers[0].value=team-a",
    "--set=prometheus.extraSecretNames={other-policy-token}",
)


def test_the_operator_reads_only_the_secrets_the_values_name() -> None:
    """By default no Secret at all; with credentials, `get` on exactly those names in the
    release namespace (and the ClusterRole still none)."""
    assert not any(d["kind"] == "Role" and "secrets" in str(d) for d in render_chart())
    kinds = by_kind(render_chart(*SECURED))
    (role,) = [r for r in kinds["Role"] if r["metadata"]["name"].endswith("-prometheus-secrets")]
    assert role["metadata"]["namespace"] == "sits-system"
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["prom-basic", "prom-ca", "other-policy-token"],
            "verbs": ["get"],
        }
    ]
    (binding,) = [
        b for b in kinds["RoleBinding"] if b["roleRef"]["name"] == role["metadata"]["name"]
    ]
    assert binding["subjects"][0]["name"] == RELEASE
    assert ("", "secrets") not in granted(kinds["ClusterRole"][0])
    (policy,) = kinds["SitsPolicy"]
    assert policy["spec"]["prometheus"] == {
        "url": "https://prometheus.monitoring.svc:9090",
        "timeout": "5s",
        "basicAuth": {"secretRef": {"name": "prom-basic"}},
        "tls": {"caSecretRef": {"name": "prom-ca"}, "serverName": "prometheus.internal"},
        "headers": [{"name": "X-Scope-OrgID", "value": "team-a"}],
    }


def test_the_crds_are_the_canonical_ones() -> None:
    rendered = {
        d["metadata"]["name"]: d
        for d in render_chart("--include-crds")
        if d["kind"] == "CustomResourceDefinition"
    }
    for path in sorted((REPO / "crds").glob("*.yaml")):
        canonical = yaml.safe_load(path.read_text())
        assert rendered.pop(canonical["metadata"]["name"]) == canonical
    assert rendered == {}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["replicaCount=2", "leaderElection.enabled=false"], "replicaCount must be 1"),
        (["replicaCount=0"], "replicaCount must be at least 1"),
        (["serviceAccount.create=false"], "serviceAccount.name is required"),
        (["alertWebhook.networkPolicy.allowedNamespaces=null"], "allowedNamespaces is empty"),
    ],
)
def test_values_that_cannot_work_are_refused_with_the_reason(
    values: list[str], message: str
) -> None:
    args = [a for v in values for a in ("--set", v)]
    result = helm("template", RELEASE, str(CHART), *args)
    assert result.returncode != 0
    assert message in result.stderr


def test_leader_election_has_a_role_for_its_lease_only() -> None:
    """Two replicas, one acting: a namespaced Role for the one Lease (least verbs: create
    cannot be limited to a name; get and update can), the pod's name and namespace from
    the downward API, a PodDisruptionBudget and a soft spread over nodes. Off: one
    standalone replica, Recreate, no Role and no budget."""
    kinds = by_kind(render_chart())
    (role,) = kinds["Role"]
    assert role["metadata"]["namespace"] == "sits-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [RELEASE],
            "verbs": ["get", "update"],
        },
    ]
    (binding,) = kinds["RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    (account,) = kinds["ServiceAccount"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "sits-system"}
    ]
    (deployment,) = kinds["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--leader-elect" in container["args"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["SITS_LEADER_ELECTION_NAME"] == RELEASE
    assert [e["name"] for e in container["env"]].count("POD_IP") == 1
    (spread,) = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert spread["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    (budget,) = kinds["PodDisruptionBudget"]
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    off = by_kind(render_chart("--set", "leaderElection.enabled=false", "--set", "replicaCount=1"))
    assert not {"Role", "RoleBinding", "PodDisruptionBudget"} & set(off)
    (single,) = off["Deployment"]
    assert single["spec"]["replicas"] == 1
    assert single["spec"]["strategy"] == {"type": "Recreate"}
    assert "--leader-elect" not in single["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "affinity" not in single["spec"]["template"]["spec"]
    named = by_kind(render_chart("--set", "leaderElection.leaseName=ops-lease"))
    assert named["Role"][0]["rules"][1]["resourceNames"] == ["ops-lease"]


def test_an_existing_service_account_can_be_used() -> None:
    kinds = by_kind(
        render_chart("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ops")
    )
    assert "ServiceAccount" not in kinds
    assert kinds["ClusterRoleBinding"][0]["subjects"][0]["name"] == "ops"
    assert kinds["Deployment"][0]["spec"]["template"]["spec"]["serviceAccountName"] == "ops"


@pytest.mark.cluster
@pytest.mark.parametrize("mode", ["cluster-wide", "namespaced"])
def test_the_api_server_accepts_every_rendered_object(
    local_cluster: Any, crds_installed: tuple[str, ...], tmp_path: Path, mode: str
) -> None:
    """Server-side dry run: the real schemas (Deployment, RBAC, the SitsPolicy CRD) judge
    the rendered release, in both RBAC modes, with Prometheus credentials; nothing is
    created."""
    local_cluster.kubectl("create", "namespace", "sits-system", check=False)
    manifest = tmp_path / "release.yaml"
    watch = watching("default") if mode == "namespaced" else ()
    # With Prometheus credentials: their Role, and the policy's spec.prometheus under
    # the CRD's own rules.
    docs = render_chart("--set", "metrics.serviceMonitor.enabled=false", *watch, *SECURED)
    manifest.write_text("\n---\n".join(yaml.safe_dump(d) for d in docs))
    result = local_cluster.kubectl(
        "apply",
        "--dry-run=server",
        "--server-side",
        "--field-manager=sits-tests",
        "-f",
        str(manifest),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("(server dry run)") == len(docs)


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd
    )


def requests(
    deployment: str, variant: str, per_minute: int, failing: int, from_minute: int = 0
) -> list[dict[str, str]]:
    """promtool input series of the request metric contract over 40 minutes: `per_minute`
    requests a minute, of which `failing` fail from `from_minute` on (cumulative counters)."""
    labels = f'namespace="ns",sits_deployment="{deployment}",variant="{variant}",source="gateway"'
    failed = [failing * max(0, minute - from_minute) for minute in range(41)]
    ok = [per_minute * minute - bad for minute, bad in enumerate(failed)]
    return [
        {
            "series": f'sits_requests_total{{{labels},outcome="success"}}',
            "values": " ".join(map(str, ok)),
        },
        {
            "series": f'sits_requests_total{{{labels},outcome="error"}}',
            "values": " ".join(map(str, failed)),
        },
    ]


def _candidate(deployment: str, variant: str) -> str:
    labels = f'namespace="ns",sits_deployment="{deployment}",variant="{variant}"'
    return f"sits_rollout_candidate{{{labels}}}"


def test_the_operator_alerts_are_valid_rules_that_fire_when_they_should(tmp_path: Path) -> None:
    """The PrometheusRule's groups through the real promtool: syntax (`check rules`), then
    `test rules` on synthetic series: each alert stays quiet while the operator is healthy
    and fires only after its `for` duration."""
    (rule,) = by_kind(render_chart("--set", "prometheusRule.enabled=true"))["PrometheusRule"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    checked = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}

    def firing(name: str) -> list[dict[str, Any]]:
        return [
            {"exp_labels": alerts[name]["labels"], "exp_annotations": alerts[name]["annotations"]}
        ]

    series = [
        # reconciles fail once a minute from minute 0; successes alongside
        {"series": 'sits_operator_reconciles_total{result="error"}', "values": "0+1x40"},
        {"series": 'sits_operator_reconciles_total{result="ok"}', "values": "0+5x40"},
        # Prometheus fails from minute 20 on
        {"series": "sits_operator_prometheus_errors_total", "values": "0x20 1+1x20"},
        # one rollback at minute 5
        {
            "series": 'sits_operator_decisions_total{action="rollback",trigger="period"}',
            "values": "0x4 1x35",
        },
        {
            "series": 'sits_operator_decisions_total{action="step",trigger="period"}',
            "values": "0+1x40",
        },
        # A rollout of chat: candidate v2 fails 10 % of 60 requests a minute from minute 10
        # (it is a candidate until minute 30); stable v1 fails as much all along, and
        # candidate v3 of "quiet" fails 50 % of too few requests.
        *requests("chat", "v2", 60, 6, from_minute=10),
        *requests("chat", "v1", 60, 6),
        *requests("quiet", "v3", 2, 1),
        {"series": _candidate("chat", "v2"), "values": "1x30 0x10"},
        {"series": _candidate("chat", "v1"), "values": "0x40"},
        {"series": _candidate("quiet", "v3"), "values": "1x40"},
    ]
    failing = [
        {
            "exp_labels": {
                **alerts["SitsCandidateFailing"]["labels"],
                "namespace": "ns",
                "sits_deployment": "chat",
                "variant": "v2",
                "source": "gateway",
            },
            "exp_annotations": {
                "summary": "Candidate v2 of ns/chat fails 10% of its requests.",
                "description": alerts["SitsCandidateFailing"]["annotations"]["description"],
            },
        }
    ]
    cases = [
        (10, "SitsOperatorReconcileErrors", []),  # pending: for 15m
        (20, "SitsOperatorReconcileErrors", firing("SitsOperatorReconcileErrors")),
        (15, "SitsOperatorPrometheusUnreachable", []),  # healthy so far
        (25, "SitsOperatorPrometheusUnreachable", []),  # pending: for 10m
        (35, "SitsOperatorPrometheusUnreachable", firing("SitsOperatorPrometheusUnreachable")),
        (3, "SitsRolloutRolledBack", []),
        (8, "SitsRolloutRolledBack", firing("SitsRolloutRolledBack")),
        (20, "SitsRolloutRolledBack", []),  # the 10m window has passed
        (12, "SitsCandidateFailing", []),  # pending: for 1m, and the 5m window fills
        (20, "SitsCandidateFailing", failing),  # v2 only: v1 is stable, v3 has too few
        (35, "SitsCandidateFailing", []),  # v2 is no longer a candidate
    ]
    spec = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": f"{minute}m", "alertname": name, "exp_alerts": expected}
                    for minute, name, expected in cases
                ],
            }
        ],
    }
    assert set(alerts) == {name for _, name, _ in cases}, "every alert is tested"
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(spec))
    tested = promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def leaf_keys(values: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of values.yaml down to the documented level (maps of settings, not
    free-form maps such as annotations or resources)."""
    keys = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        nested = isinstance(value, dict) and value and key not in FREE_FORM
        keys |= leaf_keys(value, f"{path}.") if nested else {path}
    return keys


FREE_FORM = {"annotations", "labels", "resources", "podSecurityContext", "securityContext"}


def test_every_value_is_documented_in_the_charts_readme() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    documented = {key for row in readme.splitlines() for key in row.split("`")[1::2]}
    assert leaf_keys(values) - documented == set()
