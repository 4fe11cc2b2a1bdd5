"""The policy's Prometheus behind TLS, client certificates and basic auth (issue 15 items
1 and 2): the real Prometheus started with a web configuration that requires all three.

First the adapter alone: the right credentials read the SLIs; each wrong one is an error
that names its cause (401, certificate required, unknown CA, name mismatch) and the policy
field to check. Then the operator: the credentials come from Secrets in its own namespace,
which the chart's Role lets it read by name and no other; a wrong password freezes a
rollout whose candidate is failing (an Error verdict, never a rollback) and says why in
the status; the corrected Secret is picked up without a restart, and only then is the
candidate judged and rolled back. A policy naming a Secret the chart does not grant gets
its refusal in the status, and the operator never reads it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.integration.analysis_env import Watcher
from tests.integration.conftest import CHART, OPERATOR_NAMESPACE, RELEASE, serve_namespaces
from tests.integration.test_analysis import capacity  # noqa: F401  (room for the pods)

from sits_localcluster.helm import apply_chart_parts
from sits_localcluster.prometheus import LocalPrometheus
from sits_localcluster.synthetic import Profile, SyntheticServer
from sits_operator.adapters.prometheus import PrometheusProvider, Target
from sits_operator.adapters.prometheus_access import Access
from sits_operator.model.policy import parse_policy
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.process import OperatorProcess, running_operator
from sits_operator_testing.secured_prometheus import (
    SERVER_NAME,
    USERNAME,
    Credentials,
    secured_prometheus,
)

HEALTHY = Profile(rps=40, error_ratio=0.0, latency_ms=60)
FAILING = Profile(rps=40, error_ratio=0.5, latency_ms=60)
PERIOD = 4.0  # fast_policy's interval
SECRETS = {
    "basic": "sits-test-prom-basic",
    "ca": "sits-test-prom-ca",
    "client": "sits-test-prom-tls",
}
NOT_GRANTED = "sits-test-prom-not-granted"


@pytest.fixture(scope="module")
def secured(
    traffic: SyntheticServer, tmp_path_factory: Any
) -> Iterator[tuple[LocalPrometheus, Credentials]]:
    workdir = tmp_path_factory.mktemp("secured-prometheus")
    prometheus, credentials = secured_prometheus(
        workdir, [traffic.address], password=secrets.token_urlsafe(12)
    )
    prometheus.start()
    yield prometheus, credentials
    prometheus.stop()


def access(prometheus: LocalPrometheus, credentials: Credentials, **changes: Any) -> Access:
    fields: dict[str, Any] = {
        "url": prometheus.url,
        "policy": "secured",
        "basic_auth": (USERNAME, credentials.password),
        "ca_pem": credentials.ca,
        "client_pem": (credentials.client_cert, credentials.client_key),
        "server_name": SERVER_NAME,
    }
    return Access(**{**fields, **changes})


SUCCESS_RULE = parse_policy("secured", fast_policy("secured")["spec"]).rules[0]


async def read(provider_access: Access) -> Any:
    provider = PrometheusProvider(provider_access)
    try:
        return await provider.samples(SUCCESS_RULE, Target("secured-ns", "chat", ("v1",)))
    finally:
        provider.close()


async def test_the_right_credentials_read_the_slis(
    secured: tuple[LocalPrometheus, Credentials], traffic: SyntheticServer
) -> None:
    prometheus, credentials = secured
    traffic.traffic.set("secured-ns", "chat", "v1", HEALTHY)
    deadline = time.monotonic() + 30
    while True:  # until Prometheus has scraped the window's worth of the new series
        samples = await read(access(prometheus, credentials))
        assert samples.error is None, samples.error
        if "v1" in samples.by_variant or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    assert samples.by_variant["v1"].value == pytest.approx(1.0)
    assert samples.by_variant["v1"].requests > 0


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"basic_auth": (USERNAME, "wrong")},
            "refused the credentials (HTTP 401 Unauthorized) (SitsPolicy secured "
            "spec.prometheus.basicAuth or bearerTokenSecretRef)",
        ),
        ({"basic_auth": None}, "refused the credentials (HTTP 401 Unauthorized)"),
        (
            {"client_pem": None},
            "failed: tlsv13 alert certificate required (SitsPolicy secured spec.prometheus.tls)",
        ),
        ("other-ca", "failed: certificate verify failed: unable to get local issuer certificate"),
        (
            {"server_name": None},
            "certificate verify failed: IP address mismatch, certificate is not valid for "
            "'127.0.0.1'",
        ),
    ],
    ids=["wrong-password", "no-password", "no-client-certificate", "unknown-ca", "no-server-name"],
)
async def test_each_wrong_credential_names_its_cause(
    secured: tuple[LocalPrometheus, Credentials],
    traffic: SyntheticServer,
    changes: dict[str, Any] | str,
    expected: str,
) -> None:
    prometheus, credentials = secured
    if changes == "other-ca":
        changes = {"ca_pem": credentials.other_ca}
    assert isinstance(changes, dict)
    samples = await read(access(prometheus, credentials, **changes))
    assert samples.error is not None
    assert expected in samples.error
    assert samples.by_variant == {}


async def test_skip_verify_connects_and_says_so_loudly(
    secured: tuple[LocalPrometheus, Credentials],
    traffic: SyntheticServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    prometheus, credentials = secured
    insecure = access(
        prometheus, credentials, ca_pem=None, server_name=None, insecure_skip_verify=True
    )
    samples = await read(insecure)
    assert samples.error is None, samples.error
    assert "TLS verification of" in caplog.text
    assert "is OFF" in caplog.text


# The operator, its Secrets and the chart's Role for them.


def secret_manifests(credentials: Credentials, password: str) -> list[dict[str, Any]]:
    def secret(name: str, type_: str, data: dict[str, dict[str, str]]) -> dict[str, Any]:
        meta = {"name": name, "namespace": OPERATOR_NAMESPACE}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": type_, **data}

    return [
        secret(
            SECRETS["basic"],
            "kubernetes.io/basic-auth",
            {"stringData": {"username": USERNAME, "password": password}},
        ),
        secret(SECRETS["ca"], "Opaque", {"stringData": {"ca.crt": credentials.ca}}),
        secret(
            SECRETS["client"],
            "kubernetes.io/tls",
            {"stringData": {"tls.crt": credentials.client_cert, "tls.key": credentials.client_key}},
        ),
        secret(NOT_GRANTED, "Opaque", {"stringData": {"token": "never-read"}}),
    ]


def apply(cluster: Any, manifest: dict[str, Any] | list[dict[str, Any]]) -> None:
    items = manifest if isinstance(manifest, list) else [manifest]
    body = {"apiVersion": "v1", "kind": "List", "items": items}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(body))


@pytest.fixture(scope="module")
def operator(
    local_cluster: Any,
    operator_kubeconfig: Path,
    capacity: None,  # noqa: F811
    secured: tuple[LocalPrometheus, Credentials],
    tmp_path_factory: Any,
) -> Iterator[OperatorProcess]:
    """The operator in its namespace (POD_NAMESPACE), with the chart's Role on the three
    Secrets that values prometheus.* name, and nothing on NOT_GRANTED."""
    _, credentials = secured
    apply(local_cluster, secret_manifests(credentials, password="wrong-password"))
    values = (
        f"--set=prometheus.basicAuth.secretRef.name={SECRETS['basic']}",
        f"--set=prometheus.tls.caSecretRef.name={SECRETS['ca']}",
        f"--set=prometheus.tls.certSecretRef.name={SECRETS['client']}",
    )
    role = apply_chart_parts(
        local_cluster,
        CHART,
        RELEASE,
        OPERATOR_NAMESPACE,
        ("rbac-secrets.yaml",),
        field_manager="sits-tests",
        values=values,
    )
    assert [d["kind"] for d in role] == ["Role", "RoleBinding"]
    assert role[0]["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [SECRETS["basic"], SECRETS["ca"], SECRETS["client"]],
            "verbs": ["get"],
        }
    ]
    env = {"POD_NAMESPACE": OPERATOR_NAMESPACE}
    log_dir = tmp_path_factory.mktemp("operator-secured")
    with running_operator(operator_kubeconfig, log_dir, extra_env=env) as proc:
        yield proc
    for doc in role:
        local_cluster.kubectl(
            "delete", doc["kind"].lower(), doc["metadata"]["name"], "-n", OPERATOR_NAMESPACE
        )
    for name in [*SECRETS.values(), NOT_GRANTED]:
        local_cluster.kubectl("delete", "secret", name, "-n", OPERATOR_NAMESPACE, check=False)


TLS = {
    "caSecretRef": {"name": SECRETS["ca"]},
    "certSecretRef": {"name": SECRETS["client"]},
    "serverName": SERVER_NAME,
}


def analysis_message(status: dict[str, Any]) -> str:
    found = [c for c in status.get("conditions", []) if c["type"] == "Analysis"]
    return str(found[0].get("message", "")) if found else ""


@dataclass
class Rollouts:
    """A test's chat canary (v2 failing) judged by policies on the secured Prometheus."""

    cluster: Any
    namespace: str
    traffic: SyntheticServer
    prometheus: LocalPrometheus
    policies: list[str] = field(default_factory=list)

    def start(self, prefix: str, **auth: Any) -> Watcher:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.policies.append(name)
        policy = fast_policy(name, noData={"action": "hold", "after": "10m"})
        policy["spec"]["prometheus"] = {"url": self.prometheus.url, **auth}
        self.traffic.traffic.set(self.namespace, "chat", "v1", HEALTHY)
        self.traffic.traffic.set(self.namespace, "chat", "v2", FAILING)
        apply(self.cluster, policy)
        manifest = deployment("chat", name, stepWeight=10, maxWeight=50)
        manifest["spec"]["traffic"]["router"] = "none"  # weights in status: no gateway needed
        body = json.dumps(manifest)
        self.cluster.kubectl("apply", "-n", self.namespace, "-f", "-", input=body)
        return Watcher(self.cluster, self.namespace, "chat")


@pytest.fixture
def rollouts(
    local_cluster: Any,
    namespace: str,
    traffic: SyntheticServer,
    secured: tuple[LocalPrometheus, Credentials],
    operator: OperatorProcess,
) -> Iterator[Rollouts]:
    serve_namespaces(local_cluster, operator, namespace)
    made = Rollouts(local_cluster, namespace, traffic, secured[0])
    yield made
    for name in made.policies:
        local_cluster.kubectl("delete", "sitspolicy", name, "--wait=false", check=False)


def hold_frozen(watch: Watcher, periods: int) -> None:
    """For `periods` analysis periods the rollout stays where the error froze it."""
    weight = watch.status().get("candidateWeight")
    deadline = time.monotonic() + periods * PERIOD
    while time.monotonic() < deadline:
        status = watch.status()
        assert status.get("phase") == "Progressing", watch.timeline
        assert status.get("candidateWeight") == weight, watch.timeline
        time.sleep(0.5)


@pytest.mark.cluster
def test_a_wrong_password_freezes_with_the_cause_then_the_fixed_secret_is_used(
    rollouts: Rollouts, secured: tuple[LocalPrometheus, Credentials]
) -> None:
    _, credentials = secured
    watch = rollouts.start("secured", basicAuth={"secretRef": {"name": SECRETS["basic"]}}, tls=TLS)
    try:
        frozen = watch.until(
            "the 401 in the status",
            lambda s: "refused the credentials (HTTP 401 Unauthorized)" in analysis_message(s),
            timeout=60,
        )
        name = rollouts.policies[0]
        assert f"SitsPolicy {name} spec.prometheus.basicAuth" in analysis_message(frozen)
        hold_frozen(watch, periods=3)  # a failing candidate, and no rollback: no data read
        fixed = secret_manifests(credentials, password=credentials.password)[0]
        apply(rollouts.cluster, fixed)
        rolled = watch.phase("RolledBack", timeout=30 + 6 * PERIOD)
        assert "refused" not in analysis_message(rolled)
        assert rolled["candidateSuccessRate"] == pytest.approx(0.5, abs=0.05)
    finally:
        apply(rollouts.cluster, secret_manifests(credentials, password="wrong-password")[0])


@pytest.mark.cluster
def test_a_secret_the_chart_does_not_grant_is_refused_in_the_status(rollouts: Rollouts) -> None:
    """A policy may name any Secret; the operator can read only those the chart's values
    name. This one exists, the operator may not read it, and the status says so."""
    watch = rollouts.start("ungranted", bearerTokenSecretRef={"name": NOT_GRANTED})
    refused = watch.until(
        "the refusal in the status",
        lambda s: "the operator may not read Secret" in analysis_message(s),
        timeout=60,
    )
    message = analysis_message(refused)
    assert f"sits-system/{NOT_GRANTED}" in message
    assert "spec.prometheus.bearerTokenSecretRef" in message
    hold_frozen(watch, periods=2)
