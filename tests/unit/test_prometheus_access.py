"""The policy's Prometheus: its spec parsed, its Secrets read from the operator's
namespace only (cached, re-read after rotation), the requests carrying the credentials,
errors that name their cause and the field to check.

The real TLS and basic-auth Prometheus is in tests/integration/test_prometheus_access.py;
here are what it cannot produce on demand: a missing key, an unknown namespace, a clock.
"""

from __future__ import annotations

import base64
import json
import stat
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
from prometheus_api_client.exceptions import PrometheusApiClientException

from sits_operator.adapters.prometheus import (
    FailingProvider,
    MetricsProvider,
    PrometheusProvider,
    Target,
    describe_error,
)
from sits_operator.adapters.prometheus_access import (
    Access,
    AccessError,
    SecretCache,
    resolve,
)
from sits_operator.handlers.analysis import Analyzer
from sits_operator.model.policy import (
    DEFAULT_PROMETHEUS_URL,
    ActionType,
    Comparison,
    Policy,
    PrometheusEndpoint,
    PrometheusTls,
    Rule,
    RuleAction,
    SecretKeyRef,
    parse_policy,
    parse_prometheus,
)

NS = "sits-system"
RULE = Rule(
    name="r",
    sli="success_rate_5m",
    query="sli",
    window_seconds=60,
    comparison=Comparison.LT,
    action=RuleAction(ActionType.ROLLBACK),
    threshold=0.95,
)
FULL = {
    "url": "https://prometheus.monitoring.svc:9090",
    "timeout": "2s",
    "basicAuth": {"secretRef": {"name": "basic"}},
    "tls": {
        "caSecretRef": {"name": "ca", "key": "bundle.pem"},
        "certSecretRef": {"name": "client"},
        "serverName": "prometheus.internal",
        "insecureSkipVerify": False,
    },
    "headers": [{"name": "X-Scope-OrgID", "value": "team-a"}],
}


class Secrets:
    """Secrets of the operator's namespace in a dict; counts reads; a clock to move."""

    def __init__(self, data: dict[str, dict[str, str]]) -> None:
        self.data = data
        self.reads: list[tuple[str, str]] = []
        self.now = 0.0

    async def read(self, namespace: str, name: str) -> Mapping[str, str]:
        self.reads.append((namespace, name))
        if name not in self.data:
            raise AccessError(f"Secret {namespace}/{name} does not exist")
        return dict(self.data[name])

    def cache(self, namespace: str | None = NS) -> SecretCache:
        return SecretCache(self.read, namespace, clock=lambda: self.now)


def test_the_policy_spec_is_parsed_whole() -> None:
    endpoint = parse_prometheus(FULL)
    assert endpoint == PrometheusEndpoint(
        url="https://prometheus.monitoring.svc:9090",
        basic_auth_secret="basic",
        tls=PrometheusTls(
            ca=SecretKeyRef("ca", "bundle.pem"),
            client_secret="client",
            server_name="prometheus.internal",
        ),
        headers=(("X-Scope-OrgID", "team-a"),),
        timeout_seconds=2.0,
    )
    assert endpoint.secret_names == ("basic", "ca", "client")


def test_a_policy_without_prometheus_queries_kube_prometheus_stack() -> None:
    policy = parse_policy("p", {"rules": []})
    assert policy.prometheus == PrometheusEndpoint()
    assert policy.prometheus.url == DEFAULT_PROMETHEUS_URL
    assert policy.prometheus.secret_names == ()
    token = parse_prometheus({"bearerTokenSecretRef": {"name": "t"}})
    assert token.bearer_token == SecretKeyRef("t", "token"), "the CRD's default key"


async def test_credentials_are_assembled_from_the_named_secrets() -> None:
    secrets = Secrets(
        {
            "basic": {"username": "sits", "password": "s3cret"},
            "ca": {"bundle.pem": "CA PEM"},
            "client": {"tls.crt": "CERT PEM", "tls.key": "KEY PEM"},
        }
    )
    access = await resolve(parse_prometheus(FULL), "p", secrets.cache())
    assert access.basic_auth == ("sits", "s3cret")
    assert (access.ca_pem, access.client_pem) == ("CA PEM", ("CERT PEM", "KEY PEM"))
    assert access.headers == (("X-Scope-OrgID", "team-a"),)
    assert access.server_name == "prometheus.internal"
    assert {ns for ns, _ in secrets.reads} == {NS}, "the operator's namespace only"
    assert "s3cret" not in repr(access)
    assert "KEY PEM" not in repr(access)


async def test_a_bearer_token_becomes_the_authorization_header() -> None:
    secrets = Secrets({"tok": {"token": "abc\n"}})
    endpoint = parse_prometheus({"bearerTokenSecretRef": {"name": "tok"}})
    access = await resolve(endpoint, "p", secrets.cache())
    assert access.headers == (("Authorization", "Bearer abc"),)


@pytest.mark.parametrize(
    ("spec", "data", "namespace", "expected"),
    [
        (
            {"basicAuth": {"secretRef": {"name": "basic"}}},
            {},
            NS,
            "SitsPolicy p spec.prometheus.basicAuth.secretRef: Secret sits-system/basic "
            "does not exist",
        ),
        (
            {"basicAuth": {"secretRef": {"name": "basic"}}},
            {"basic": {"username": "u"}},
            NS,
            "SitsPolicy p spec.prometheus.basicAuth.secretRef: Secret sits-system/basic has "
            "no key 'password'",
        ),
        (
            {"bearerTokenSecretRef": {"name": "tok", "key": "jwt"}},
            {"tok": {"token": "x"}},
            NS,
            "spec.prometheus.bearerTokenSecretRef: Secret sits-system/tok has no key 'jwt'",
        ),
        (
            {"url": "https://p", "tls": {"certSecretRef": {"name": "client"}}},
            {"client": {"tls.crt": "c"}},
            NS,
            "spec.prometheus.tls.certSecretRef: Secret sits-system/client has no key 'tls.key'",
        ),
        (
            {"bearerTokenSecretRef": {"name": "tok"}},
            {"tok": {"token": "x"}},
            None,
            "the operator's namespace, which is unknown: set POD_NAMESPACE",
        ),
    ],
    ids=["no-secret", "no-password", "no-token-key", "no-client-key", "no-namespace"],
)
async def test_missing_credentials_name_the_policy_field(
    spec: dict[str, Any], data: dict[str, dict[str, str]], namespace: str | None, expected: str
) -> None:
    with pytest.raises(AccessError) as raised:
        await resolve(parse_prometheus(spec), "p", Secrets(data).cache(namespace))
    assert expected in str(raised.value)


async def test_secrets_are_cached_then_re_read_after_a_rotation() -> None:
    secrets = Secrets({"tok": {"token": "old"}})
    cache, endpoint = secrets.cache(), parse_prometheus({"bearerTokenSecretRef": {"name": "tok"}})
    first = await resolve(endpoint, "p", cache)
    secrets.data["tok"] = {"token": "new"}
    secrets.now = 29.0
    assert (await resolve(endpoint, "p", cache)).fingerprint == first.fingerprint
    assert len(secrets.reads) == 1
    secrets.now = 31.0
    rotated = await resolve(endpoint, "p", cache)
    assert rotated.headers == (("Authorization", "Bearer new"),)
    assert rotated.fingerprint != first.fingerprint
    assert len(secrets.reads) == 2


class Recorder:
    """A stub Prometheus on 127.0.0.1 that answers `status` and records request headers."""

    def __init__(self) -> None:
        self.status = 200
        self.headers: list[dict[str, str]] = []


@pytest.fixture
def stub() -> Iterator[tuple[str, Recorder]]:
    recorder = Recorder()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            recorder.headers.append(dict(self.headers.items()))
            ok = {"status": "success", "data": {"resultType": "vector", "result": []}}
            body = json.dumps(ok).encode() if recorder.status == 200 else b"Unauthorized\n"
            self.send_response(recorder.status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", recorder
    server.shutdown()
    server.server_close()


async def test_queries_carry_basic_auth_and_the_tenant_header(
    stub: tuple[str, Recorder],
) -> None:
    url, recorder = stub
    access = Access(url=url, policy="p", headers=(("X-Scope-OrgID", "a"),), basic_auth=("u", "pw"))
    samples = await PrometheusProvider(access).samples(RULE, Target("ns", "chat", ("v1",)))
    assert samples.error is None
    sent = recorder.headers[0]
    assert sent["X-Scope-OrgID"] == "a"
    assert sent["Authorization"] == "Basic " + base64.b64encode(b"u:pw").decode()


async def test_refused_credentials_are_an_error_naming_the_fields(
    stub: tuple[str, Recorder],
) -> None:
    url, recorder = stub
    recorder.status = 401
    samples = await PrometheusProvider(Access(url=url, policy="p")).samples(
        RULE, Target("ns", "chat", ("v1",))
    )
    assert samples.error == (
        f"{url} refused the credentials (HTTP 401 Unauthorized) "
        "(SitsPolicy p spec.prometheus.basicAuth or bearerTokenSecretRef)"
    )
    assert samples.by_variant == {}


def test_certificates_are_private_files_removed_on_close() -> None:
    access = Access(url="https://p", policy="p", ca_pem="CA", client_pem=("CERT", "KEY"))
    provider = PrometheusProvider(access)
    directory = provider.credentials_dir
    assert directory is not None
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = {p.name: p for p in directory.iterdir()}
    assert set(files) == {"ca.crt", "tls.crt", "tls.key"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files.values())
    assert files["tls.key"].read_text() == "KEY"
    provider.close()
    assert not directory.exists()
    assert PrometheusProvider(Access(url="https://p", policy="p")).credentials_dir is None


ACCESS = Access(url="https://prom:9090", policy="sits2026")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            requests.exceptions.SSLError(
                "HTTPSConnectionPool(host='prom', port=9090): Max retries exceeded (Caused by "
                "SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] "
                "certificate verify failed: unable to get local issuer certificate "
                "(_ssl.c:1006)')))"
            ),
            "TLS with https://prom:9090 failed: certificate verify failed: unable to get "
            "local issuer certificate (SitsPolicy sits2026 spec.prometheus.tls)",
        ),
        (
            PrometheusApiClientException("HTTP Status Code 403 (b'forbidden')"),
            "https://prom:9090 refused the credentials (HTTP 403 Forbidden) (SitsPolicy "
            "sits2026 spec.prometheus.basicAuth or bearerTokenSecretRef)",
        ),
        (
            PrometheusApiClientException("HTTP Status Code 422 (b'bad query')"),
            "https://prom:9090 answered HTTP 422: b'bad query'",
        ),
        (requests.exceptions.ReadTimeout("read timed out"), "did not answer within 5 s"),
        (TimeoutError(), "https://prom:9090 did not answer within 5 s"),
        (
            requests.exceptions.ConnectionError("[Errno 111] Connection refused"),
            "cannot connect to https://prom:9090: [Errno 111] Connection refused",
        ),
    ],
    ids=["tls", "forbidden", "bad-query", "read-timeout", "timeout", "refused"],
)
def test_errors_say_what_failed_and_where_to_look(error: Exception, expected: str) -> None:
    assert expected in describe_error(error, ACCESS)


class Factory:
    def __init__(self) -> None:
        self.made: list[Access] = []

    def __call__(self, access: Access) -> MetricsProvider:
        self.made.append(access)
        return FailingProvider("unused")


def policy(**prometheus: Any) -> Policy:
    return parse_policy("p", {"rules": [], "prometheus": prometheus})


async def test_one_client_per_policy_rebuilt_when_a_secret_rotates() -> None:
    secrets, factory = Secrets({"tok": {"token": "old"}}), Factory()
    analyzer = Analyzer(None, factory, secrets=secrets.cache())
    spec = policy(bearerTokenSecretRef={"name": "tok"})
    first = await analyzer.provider_for(spec)
    assert await analyzer.provider_for(spec) is first
    secrets.data["tok"], secrets.now = {"token": "new"}, 60.0
    assert await analyzer.provider_for(spec) is not first
    assert [a.headers for a in factory.made] == [
        (("Authorization", "Bearer old"),),
        (("Authorization", "Bearer new"),),
    ]


async def test_unreadable_credentials_make_every_rule_an_error() -> None:
    """No query is sent without the credentials; the rollout freezes and says why."""
    factory = Factory()
    analyzer = Analyzer(None, factory, secrets=Secrets({}).cache())
    provider = await analyzer.provider_for(policy(basicAuth={"secretRef": {"name": "gone"}}))
    samples = await provider.samples(RULE, Target("ns", "chat", ("v1",)))
    assert samples.error is not None
    assert "Secret sits-system/gone does not exist" in samples.error
    assert factory.made == []
