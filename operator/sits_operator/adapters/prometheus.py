"""SLI samples from Prometheus, one query per rule for all variants of a deployment.

prometheus-api-client is synchronous (requests); every query runs in a worker thread
with a timeout so a slow Prometheus never blocks Kopf's event loop. Failures become a
RuleSamples with `error` set (the engine's Error verdict, which freezes the rollout);
empty results and NaN become missing or NaN samples (the engine's NoData).

Each client is built from an Access (adapters/prometheus_access.py): headers, basic
auth, a CA bundle, a client certificate, a TLS server name, or verification off (logged
loudly). requests reads certificates from files only, so the PEMs go to a private
directory (0700, files 0600) removed when the client is closed. Errors name their cause
(TLS, refused credentials, unreachable) and the policy field to check, since they end up
in the SitsDeployment's status.

Queries select one ``source`` of the request metrics (``{{source}}`` in a policy's
template, and the minimum-traffic count): the gateway and the sidecars export the same
requests, and their sum would count each one twice.

A template that groups by ``{{by}}`` and selects the deployment with
``sits_deployment=~"{{deployment_regex}}"`` is batched: rendered for a whole namespace
(``sum by (sits_deployment, variant)``, any deployment), sent once and shared by every
deployment of the namespace that asks within a short staleness bound
(adapters/prometheus_batch.py); its request counts are batched the same way. Any other
template is sent per deployment, exactly as before batching existed.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import requests
import urllib3
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from sits_operator.adapters.prometheus_access import Access
from sits_operator.adapters.prometheus_batch import SharedQueries
from sits_operator.model.analysis import RuleSamples, Sample
from sits_operator.model.durations import format_duration
from sits_operator.model.policy import Rule
from sits_operator.model.spec import MetricSource

log = logging.getLogger("sits_operator.prometheus")

REQUESTS_QUERY = (
    'sum by (variant) (increase(sits_requests_total{{namespace="{namespace}",'
    'sits_deployment="{deployment}",source="{source}"}}[{window}]))'
)
# The same count for every deployment of a namespace, for batched rules.
BATCHED_REQUESTS_QUERY = (
    'sum by (sits_deployment, variant) (increase(sits_requests_total{{namespace="{namespace}",'
    'source="{source}"}}[{window}]))'
)
BATCH_LABELS = "sits_deployment, variant"
# A deployment's values by variant, for every deployment in a batched answer.
Indexed = dict[str, dict[str, float]]
QueryCounter = Callable[[str, bool], None]


@dataclass(frozen=True)
class Target:
    """Which deployment's series to select, and from which source (gateway or sidecar)."""

    namespace: str
    deployment: str
    variants: tuple[str, ...]
    source: MetricSource = MetricSource.GATEWAY
    # How old a batched answer shared with other deployments may be, in seconds.
    max_age: float = 0.0


class MetricsProvider(Protocol):
    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        """The rule's value and request count per variant, or an error."""


def batchable(template: str) -> bool:
    """Whether the template may answer for many deployments at once: it groups by
    ``{{by}}`` and does not select one variant per query."""
    return "{{by}}" in template and "{{variant}}" not in template


def _regex_literal(value: str) -> str:
    """A regex matching exactly `value`, its backslashes doubled for a PromQL string."""
    return re.escape(value).replace("\\", "\\\\")


def render_query(
    template: str,
    target: Target,
    window_seconds: float,
    variant: str = "",
    *,
    batched: bool = False,
) -> str:
    """Fill the policy's placeholders; values are label values, quotes are escaped.

    Batched, ``{{by}}`` groups by deployment too and ``{{deployment_regex}}`` matches any
    deployment; else they are ``variant`` and this deployment's name as a regex."""
    values = {
        "namespace": target.namespace,
        "deployment": target.deployment,
        "variant": variant,
        "source": target.source.value,
        "window": format_duration(window_seconds),
        "by": BATCH_LABELS if batched else "variant",
        "deployment_regex": ".+" if batched else _regex_literal(target.deployment),
    }
    query = template
    for key, value in values.items():
        query = query.replace("{{" + key + "}}", value.replace('"', '\\"'))
    return query


def _value(series: dict[str, Any]) -> float:
    try:
        return float(series["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return math.nan


def _by_variant(result: list[dict[str, Any]]) -> dict[str, float]:
    values: dict[str, float] = {}
    for series in result:
        variant = series.get("metric", {}).get("variant")
        if variant is not None:
            values[str(variant)] = _value(series)
    return values


def by_deployment(result: list[dict[str, Any]]) -> Indexed:
    """A batched answer indexed once: deployment -> variant -> value (series without
    either label are not any deployment's)."""
    index: Indexed = {}
    for series in result:
        labels = series.get("metric", {})
        deployment, variant = labels.get("sits_deployment"), labels.get("variant")
        if deployment is not None and variant is not None:
            index.setdefault(str(deployment), {})[str(variant)] = _value(series)
    return index


class _ServerNameAdapter(HTTPAdapter):
    """Verifies the server's certificate for `server_name` rather than the URL's host
    (Prometheus's tls_config.server_name), and sends it as SNI."""

    def __init__(self, server_name: str) -> None:
        self._server_name = server_name
        super().__init__(max_retries=Retry(total=0))

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(server_hostname=self._server_name, assert_hostname=self._server_name)
        super().init_poolmanager(*args, **kwargs)


def _write_private(directory: Path | None, name: str, text: str) -> str:
    assert directory is not None, "a directory is made when there are certificates"
    path = directory / name
    path.touch(mode=0o600)
    path.write_text(text)
    return str(path)


def _session(access: Access, directory: Path | None) -> requests.Session:
    session = requests.Session()
    session.headers.update(dict(access.headers))
    if access.basic_auth is not None:
        session.auth = access.basic_auth
    if access.insecure_skip_verify:
        log.warning(
            "TLS verification of %s is OFF (SitsPolicy %s spec.prometheus.tls."
            "insecureSkipVerify): anyone on the path can forge the SLIs",
            access.url,
            access.policy,
        )
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        session.verify = False
    elif access.ca_pem is not None:
        session.verify = _write_private(directory, "ca.crt", access.ca_pem)
    if access.client_pem is not None:
        cert, key = access.client_pem
        session.cert = (
            _write_private(directory, "tls.crt", cert),
            _write_private(directory, "tls.key", key),
        )
    return session


_SSL_REASON = re.compile(r"\[SSL: [A-Z0-9_]+\] (.*?)(?: \(_ssl\.c:\d+\)|$)")
_HTTP_STATUS = re.compile(r"HTTP Status Code (\d{3}) \((.*)\)$", re.S)


def describe_error(exc: BaseException, access: Access) -> str:
    """A status-sized message: what failed, why, and which policy field to check."""

    def hint(fields: str) -> str:
        return f" (SitsPolicy {access.policy} spec.prometheus.{fields})" if access.policy else ""

    if isinstance(exc, requests.exceptions.SSLError):
        found = _SSL_REASON.search(str(exc))
        reason = found.group(1).strip().rstrip(".") if found else str(exc)[:160]
        return f"TLS with {access.url} failed: {reason}{hint('tls')}"
    if isinstance(exc, requests.exceptions.Timeout | TimeoutError):
        return f"{access.url} did not answer within {access.timeout_seconds:g} s"
    if isinstance(exc, requests.exceptions.ConnectionError):
        return f"cannot connect to {access.url}: {str(exc)[-160:]}"
    status = _HTTP_STATUS.search(str(exc))
    if status is not None and status.group(1) in ("401", "403"):
        name = "Unauthorized" if status.group(1) == "401" else "Forbidden"
        fields = hint("basicAuth or bearerTokenSecretRef")
        return f"{access.url} refused the credentials (HTTP {status.group(1)} {name}){fields}"
    if status is not None:
        return f"{access.url} answered HTTP {status.group(1)}: {status.group(2)[:200]}"
    return f"{type(exc).__name__}: {exc}"[:300]


class PrometheusProvider:
    """Real provider on prometheus-api-client, for one Access (or a plain URL)."""

    def __init__(
        self,
        access: Access | str,
        *,
        timeout: float | None = None,
        on_query: QueryCounter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(access, str):
            access = Access(url=access, policy="")
        self.access = access
        self._timeout = access.timeout_seconds if timeout is None else timeout
        self._on_query = on_query
        self._shared: SharedQueries[Indexed] = SharedQueries(self._send_batched, clock)
        # Only for certificates: mode 0700, removed by close().
        self.credentials_dir: Path | None = None
        if access.ca_pem is not None or access.client_pem is not None:
            self.credentials_dir = Path(tempfile.mkdtemp(prefix="sits-prometheus-"))
        self._session = session = _session(access, self.credentials_dir)
        self._client = PrometheusConnect(
            url=access.url,
            retry=Retry(total=0),
            timeout=math.ceil(self._timeout),
            session=session,
        )
        if access.server_name:  # after PrometheusConnect, which mounts its own adapter
            session.mount(access.url, _ServerNameAdapter(access.server_name))

    def close(self) -> None:
        """Drop the connections and the private copies of the certificates."""
        self._session.close()
        if self.credentials_dir is not None:
            shutil.rmtree(self.credentials_dir, ignore_errors=True)

    async def _send(self, query: str, *, batched: bool) -> list[dict[str, Any]]:
        if self._on_query is not None:
            self._on_query(self.access.policy, batched)
        result: list[dict[str, Any]] = await asyncio.wait_for(
            asyncio.to_thread(self._client.custom_query, query), timeout=self._timeout + 1
        )
        return result

    async def _send_batched(self, query: str) -> Indexed:
        return by_deployment(await self._send(query, batched=True))

    async def _query(self, query: str) -> dict[str, float]:
        return _by_variant(await self._send(query, batched=False))

    async def _shared_query(self, query: str, target: Target) -> dict[str, float]:
        """This deployment's share of a batched answer (none: no data, as unbatched)."""
        answer = await self._shared.answer(query, target.max_age)
        return answer.get(target.deployment, {})

    async def _values(self, rule: Rule, target: Target) -> dict[str, float]:
        if batchable(rule.query):
            query = render_query(rule.query, target, rule.window_seconds, batched=True)
            return await self._shared_query(query, target)
        if "{{variant}}" not in rule.query:
            return await self._query(render_query(rule.query, target, rule.window_seconds))
        values: dict[str, float] = {}
        for variant in target.variants:  # templates that select one variant: one query each
            query = render_query(rule.query, target, rule.window_seconds, variant)
            found = await self._query(query)
            values[variant] = next(iter(found.values()), math.nan)
        return values

    async def _counts(self, rule: Rule, target: Target) -> dict[str, float]:
        """Requests per variant in the rule's window, batched when the rule is."""
        fields = {
            "namespace": target.namespace,
            "source": target.source.value,
            "window": format_duration(rule.window_seconds),
        }
        if batchable(rule.query):
            return await self._shared_query(BATCHED_REQUESTS_QUERY.format(**fields), target)
        return await self._query(REQUESTS_QUERY.format(deployment=target.deployment, **fields))

    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        try:
            values = await self._values(rule, target)
            counts = await self._counts(rule, target)
        except (requests.RequestException, PrometheusApiClientException, TimeoutError) as exc:
            return RuleSamples(rule=rule.name, error=describe_error(exc, self.access))
        samples = {
            variant: Sample(value=value, requests=counts.get(variant, 0.0))
            for variant, value in values.items()
        }
        return RuleSamples(rule=rule.name, by_variant=samples)


class FailingProvider:
    """The policy's Prometheus cannot be reached as configured (a Secret is missing or
    may not be read): every rule errors with that reason, so the rollout freezes and
    its status says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        return RuleSamples(rule=rule.name, error=self.reason)


class NoopProvider:
    """No metrics backend: every rule has no data (the rollout holds)."""

    async def samples(self, rule: Rule, target: Target) -> RuleSamples:
        return RuleSamples(rule=rule.name)


def make_provider(access: Access, on_query: QueryCounter | None = None) -> MetricsProvider:
    return PrometheusProvider(access, on_query=on_query) if access.url else NoopProvider()
