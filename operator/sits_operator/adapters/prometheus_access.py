"""The credentials of a policy's Prometheus, read from Secrets in the operator's namespace.

Where SLIs come from is the cluster admins' choice (SitsPolicy spec.prometheus, cluster
scoped), never a SitsDeployment's: the operator only reads Secrets a policy names, only in
its own namespace (the chart grants `get` on those names there and nothing else), so a
SitsDeployment author cannot have a Secret of theirs sent to a server they choose.

Secrets are cached for SECRET_TTL_SECONDS, then read again, so a rotated token or password
is picked up within that time and one analysis period, without a watch on Secrets.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sits_operator.model.policy import PrometheusEndpoint, SecretKeyRef

SECRET_TTL_SECONDS = 30.0
BASIC_AUTH_KEYS = ("username", "password")  # kubernetes.io/basic-auth
TLS_KEYS = ("tls.crt", "tls.key")  # kubernetes.io/tls

SecretReader = Callable[[str, str], Awaitable[Mapping[str, str]]]


class AccessError(Exception):
    """The credentials cannot be assembled; the message says which field and why."""


def kube_secret_reader(api: client.ApiClient) -> SecretReader:
    """Reads one Secret's data, decoded, turning API errors into AccessErrors."""

    async def read(namespace: str, name: str) -> Mapping[str, str]:
        try:
            secret = await client.CoreV1Api(api).read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                raise AccessError(f"Secret {namespace}/{name} does not exist") from None
            if exc.status == 403:
                raise AccessError(
                    f"the operator may not read Secret {namespace}/{name} (the chart grants "
                    "get on the Secrets its values name: prometheus.* and "
                    "prometheus.extraSecretNames)"
                ) from None
            raise AccessError(f"reading Secret {namespace}/{name}: HTTP {exc.status}") from None
        data = secret.data or {}
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    return read


@dataclass
class SecretCache:
    """Secrets of one namespace, each kept SECRET_TTL_SECONDS."""

    read: SecretReader
    namespace: str | None
    ttl_seconds: float = SECRET_TTL_SECONDS
    clock: Callable[[], float] = time.monotonic
    _entries: dict[str, tuple[float, Mapping[str, str]]] = field(default_factory=dict)

    async def data(self, name: str) -> Mapping[str, str]:
        if self.namespace is None:
            raise AccessError(
                f"Secret {name} is read from the operator's namespace, which is unknown: "
                "set POD_NAMESPACE"
            )
        cached = self._entries.get(name)
        if cached is not None and self.clock() - cached[0] < self.ttl_seconds:
            return cached[1]
        data = await self.read(self.namespace, name)
        self._entries[name] = (self.clock(), data)
        return data


@dataclass(frozen=True)
class Access:
    """Everything a request to the policy's Prometheus needs, credentials resolved.
    Credentials stay out of repr (logs, errors)."""

    url: str
    policy: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    ca_pem: str | None = field(default=None, repr=False)
    client_pem: tuple[str, str] | None = field(default=None, repr=False)  # chain, key
    server_name: str | None = None
    insecure_skip_verify: bool = False
    timeout_seconds: float = 5.0

    @property
    def fingerprint(self) -> str:
        """Changes with any setting or credential: a rotated Secret makes a new client."""
        material = (
            self.url,
            self.headers,
            self.basic_auth,
            self.ca_pem,
            self.client_pem,
            self.server_name,
            self.insecure_skip_verify,
            self.timeout_seconds,
        )
        return hashlib.sha256(repr(material).encode()).hexdigest()[:16]


async def _key(secrets: SecretCache, ref: SecretKeyRef, where: str) -> str:
    data = await _data(secrets, ref.name, where)
    if ref.key not in data:
        raise AccessError(f"{where}: Secret {secrets.namespace}/{ref.name} has no key {ref.key!r}")
    return data[ref.key]


async def _data(secrets: SecretCache, name: str, where: str) -> Mapping[str, str]:
    try:
        return await secrets.data(name)
    except AccessError as exc:
        raise AccessError(f"{where}: {exc}") from None


async def _keys(secrets: SecretCache, name: str, keys: tuple[str, str], where: str) -> list[str]:
    data = await _data(secrets, name, where)
    missing = [k for k in keys if k not in data]
    if missing:
        raise AccessError(f"{where}: Secret {secrets.namespace}/{name} has no key {missing[0]!r}")
    return [data[k] for k in keys]


async def resolve(endpoint: PrometheusEndpoint, policy: str, secrets: SecretCache) -> Access:
    """The endpoint's Access; AccessError naming the policy's field when a Secret or key
    is missing or may not be read."""
    field_of = f"SitsPolicy {policy} spec.prometheus."
    headers = list(endpoint.headers)
    if endpoint.bearer_token is not None:
        token = await _key(secrets, endpoint.bearer_token, field_of + "bearerTokenSecretRef")
        headers.append(("Authorization", f"Bearer {token.strip()}"))
    basic = None
    if endpoint.basic_auth_secret is not None:
        where = field_of + "basicAuth.secretRef"
        user, password = await _keys(secrets, endpoint.basic_auth_secret, BASIC_AUTH_KEYS, where)
        basic = (user, password)
    tls = endpoint.tls
    ca = None if tls.ca is None else await _key(secrets, tls.ca, field_of + "tls.caSecretRef")
    client_pem = None
    if tls.client_secret is not None:
        where = field_of + "tls.certSecretRef"
        cert, key = await _keys(secrets, tls.client_secret, TLS_KEYS, where)
        client_pem = (cert, key)
    return Access(
        url=endpoint.url,
        policy=policy,
        headers=tuple(headers),
        basic_auth=basic,
        ca_pem=ca,
        client_pem=client_pem,
        server_name=tls.server_name,
        insecure_skip_verify=tls.insecure_skip_verify,
        timeout_seconds=endpoint.timeout_seconds,
    )
