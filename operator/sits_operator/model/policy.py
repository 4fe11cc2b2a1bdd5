"""Typed view of a SitsPolicy (crds/sitspolicy.yaml): SLI rules, what to do on gaps, and
the Prometheus they are read from (cluster admins choose it, never a SitsDeployment)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sits_operator.model.durations import parse_duration


class Comparison(StrEnum):
    """The rule is breached when `sample <comparison> reference` holds."""

    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


class ActionType(StrEnum):
    ROLLBACK = "rollback"
    SET_WEIGHT = "setWeight"
    PAUSE = "pause"
    HOLD = "hold"


class CompareTo(StrEnum):
    THRESHOLD = "threshold"
    STABLE = "stable"


class NoDataAction(StrEnum):
    HOLD = "hold"
    PAUSE = "pause"
    ROLLBACK = "rollback"


class ErrorAction(StrEnum):
    FREEZE = "freeze"
    PAUSE = "pause"


# The built-in rule for a candidate whose containers the kubelet cannot keep running
# (CrashLoopBackOff, ImagePullBackOff...): judged from the pods, not from Prometheus, and
# counted like any rule (status.analysis.breaches, the verdict rows in status.slis). The
# CRD reserves its name, so no SLI rule can share its counter.
CONTAINERS_RULE = "containers"
FAILING_CONTAINERS_SLI = "failing_containers"
# SITS2026's rollback rule acts after 2 failing periods; a crash loop is held to the same.
DEFAULT_FAILING_CONTAINER_PERIODS = 2


@dataclass(frozen=True)
class RuleAction:
    type: ActionType
    weight: int | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    sli: str
    query: str
    window_seconds: float
    comparison: Comparison
    action: RuleAction
    threshold: float | None = None
    compare_to: CompareTo = CompareTo.THRESHOLD
    tolerance: float = 0.0
    # Exactly one of these is set; neither means "one period".
    for_periods: int | None = None
    for_seconds: float | None = None
    min_requests: int | None = None


@dataclass(frozen=True)
class FailingContainers:
    """spec.failingContainers: what a candidate's failing containers lead to, and when."""

    periods: int = DEFAULT_FAILING_CONTAINER_PERIODS
    action: ActionType = ActionType.ROLLBACK


# kube-prometheus-stack installed as release "kube-prometheus-stack" in "monitoring".
DEFAULT_PROMETHEUS_URL = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
DEFAULT_PROMETHEUS_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class SecretKeyRef:
    """One key of a Secret in the operator's own namespace (never a SitsDeployment's)."""

    name: str
    key: str


@dataclass(frozen=True)
class PrometheusTls:
    """spec.prometheus.tls: how the server is verified and how the operator proves itself."""

    ca: SecretKeyRef | None = None
    # A kubernetes.io/tls Secret (keys tls.crt and tls.key): the client certificate.
    client_secret: str | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False


@dataclass(frozen=True)
class PrometheusEndpoint:
    """spec.prometheus: the server the policy's queries go to and its credentials, in the
    shape of Prometheus's own http_config (bearer token, basic auth, tls_config, headers)."""

    url: str = DEFAULT_PROMETHEUS_URL
    bearer_token: SecretKeyRef | None = None
    # A kubernetes.io/basic-auth Secret (keys username and password).
    basic_auth_secret: str | None = None
    tls: PrometheusTls = PrometheusTls()
    headers: tuple[tuple[str, str], ...] = ()
    timeout_seconds: float = DEFAULT_PROMETHEUS_TIMEOUT_SECONDS

    @property
    def secret_names(self) -> tuple[str, ...]:
        """Every Secret this endpoint reads: the only ones the operator may need."""
        names = (
            self.bearer_token.name if self.bearer_token else None,
            self.basic_auth_secret,
            self.tls.ca.name if self.tls.ca else None,
            self.tls.client_secret,
        )
        return tuple(dict.fromkeys(n for n in names if n))


@dataclass(frozen=True)
class Policy:
    name: str
    interval_seconds: float
    min_requests: int
    rules: tuple[Rule, ...]
    no_data_action: NoDataAction = NoDataAction.HOLD
    no_data_after_seconds: float = 600.0
    on_error: ErrorAction = ErrorAction.FREEZE
    promotion_consecutive_passes: int = 3
    failing_containers: FailingContainers = FailingContainers()
    prometheus: PrometheusEndpoint = field(default_factory=PrometheusEndpoint)

    def min_requests_for(self, rule: Rule) -> int:
        return self.min_requests if rule.min_requests is None else rule.min_requests

    @property
    def containers_rule(self) -> Rule:
        """The built-in rule as the breach machinery sees it: the number of a variant's
        failing containers above 0, for `failingContainers.periods` consecutive periods."""
        return Rule(
            name=CONTAINERS_RULE,
            sli=FAILING_CONTAINERS_SLI,
            query="",
            window_seconds=0.0,
            comparison=Comparison.GT,
            threshold=0.0,
            action=RuleAction(self.failing_containers.action),
            for_periods=self.failing_containers.periods,
        )


def _rule(raw: dict[str, Any]) -> Rule:
    for_ = raw.get("for") or {}
    action = raw["action"]
    return Rule(
        name=raw["name"],
        sli=raw["sli"],
        query=raw["query"],
        window_seconds=parse_duration(raw.get("window", "5m")),
        comparison=Comparison(raw["comparison"]),
        action=RuleAction(ActionType(action["type"]), action.get("weight")),
        threshold=None if raw.get("threshold") is None else float(raw["threshold"]),
        compare_to=CompareTo(raw.get("compareTo", "threshold")),
        tolerance=float(raw.get("tolerance", 0.0)),
        for_periods=for_.get("periods"),
        for_seconds=parse_duration(for_["duration"]) if for_.get("duration") else None,
        min_requests=raw.get("minRequests"),
    )


def _secret_key(raw: dict[str, Any] | None, default_key: str) -> SecretKeyRef | None:
    return SecretKeyRef(raw["name"], raw.get("key", default_key)) if raw else None


def parse_prometheus(raw: dict[str, Any]) -> PrometheusEndpoint:
    tls = raw.get("tls") or {}
    return PrometheusEndpoint(
        url=raw.get("url", DEFAULT_PROMETHEUS_URL),
        bearer_token=_secret_key(raw.get("bearerTokenSecretRef"), "token"),
        basic_auth_secret=((raw.get("basicAuth") or {}).get("secretRef") or {}).get("name"),
        tls=PrometheusTls(
            ca=_secret_key(tls.get("caSecretRef"), "ca.crt"),
            client_secret=(tls.get("certSecretRef") or {}).get("name"),
            server_name=tls.get("serverName"),
            insecure_skip_verify=bool(tls.get("insecureSkipVerify", False)),
        ),
        headers=tuple((h["name"], h["value"]) for h in raw.get("headers") or ()),
        timeout_seconds=parse_duration(raw.get("timeout", "5s")),
    )


def parse_policy(name: str, spec: dict[str, Any]) -> Policy:
    """Build a Policy from a SitsPolicy spec (server-side defaults already applied)."""
    no_data = spec.get("noData") or {}
    containers = spec.get("failingContainers") or {}
    return Policy(
        name=name,
        interval_seconds=parse_duration(spec.get("interval", "1m")),
        min_requests=int(spec.get("minRequests", 20)),
        rules=tuple(_rule(r) for r in spec["rules"]),
        no_data_action=NoDataAction(no_data.get("action", "hold")),
        no_data_after_seconds=parse_duration(no_data.get("after", "10m")),
        on_error=ErrorAction((spec.get("onError") or {}).get("action", "freeze")),
        promotion_consecutive_passes=int((spec.get("promotion") or {}).get("consecutivePasses", 3)),
        failing_containers=FailingContainers(
            periods=int(containers.get("periods", DEFAULT_FAILING_CONTAINER_PERIODS)),
            action=ActionType(containers.get("action", ActionType.ROLLBACK.value)),
        ),
        prometheus=parse_prometheus(spec.get("prometheus") or {}),
    )
