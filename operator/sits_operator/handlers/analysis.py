"""The analysis step: observe SLIs, read weights back from the router, decide.

Runs inside the per-object reconcile loop, at the policy's interval (and at once when a
manual command arrives), so that one loop writes status once per pass.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sits_operator.adapters.kube import ApiClient, operator_namespace
from sits_operator.adapters.prometheus import (
    FailingProvider,
    MetricsProvider,
    Target,
    make_provider,
)
from sits_operator.adapters.prometheus_access import (
    Access,
    AccessError,
    SecretCache,
    kube_secret_reader,
    resolve,
)
from sits_operator.adapters.routers import TrafficRouter, make_router, read_weights_back
from sits_operator.core.analysis import decide
from sits_operator.core.analysis.schedule import period_phase, shared_max_age
from sits_operator.core.analysis.weights import masked_for_readiness
from sits_operator.core.metric_source import metric_source
from sits_operator.core.rollout_plan import build_plan
from sits_operator.handlers import metrics
from sits_operator.model.analysis import (
    AnalysisState,
    Command,
    Decision,
    RuleSamples,
    command_annotation,
)
from sits_operator.model.observed import ObservedState
from sits_operator.model.policy import Policy, parse_policy
from sits_operator.model.spec import ObjectRef, RouterKind, SitsDeploymentSpec

ProviderFactory = Callable[[Access], MetricsProvider]
RouterFactory = Callable[[str, ApiClient | None], TrafficRouter]


def commands_from(annotations: Mapping[str, str]) -> dict[Command, str]:
    """Manual commands set as annotations sits.dev/<command>: <any value>."""
    found = {}
    for command in Command:
        value = annotations.get(command_annotation(command))
        if value is not None:
            found[command] = value
    return found


def policy_from_index(policies: Mapping[str, Any], name: str) -> Policy | None:
    entries = list(policies.get(name, ()))
    return parse_policy(name, dict(entries[0])) if entries else None


@dataclass(frozen=True)
class Evaluation:
    """A decision with the samples it was made from (the status names what data is
    missing: "v2 has 3 of 20 requests", core/rollout_summary.py)."""

    decision: Decision
    observations: tuple[RuleSamples, ...]


def counted_provider(access: Access) -> MetricsProvider:
    """The policy's client, counting each query it sends (sits_operator_prometheus_queries)."""
    return make_provider(access, on_query=metrics.count_query)


async def _no_secrets(namespace: str, name: str) -> Mapping[str, str]:
    raise AccessError(f"no Kubernetes API to read Secret {namespace}/{name} from")


@dataclass
class Analyzer:
    api: ApiClient | None
    provider_factory: ProviderFactory = counted_provider
    router_factory: RouterFactory = make_router
    clock: Callable[[], float] = time.time
    secrets: SecretCache | None = None
    # One client per policy, rebuilt when its settings or credentials change.
    _providers: dict[str, tuple[str, MetricsProvider]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.secrets is None:
            reader = _no_secrets if self.api is None else kube_secret_reader(self.api)
            self.secrets = SecretCache(reader, operator_namespace())

    async def provider_for(self, policy: Policy) -> MetricsProvider:
        """The client for the policy's Prometheus; a FailingProvider saying why when its
        credentials cannot be read."""
        assert self.secrets is not None
        try:
            access = await resolve(policy.prometheus, policy.name, self.secrets)
        except AccessError as exc:
            return FailingProvider(str(exc))
        cached = self._providers.get(policy.name)
        if cached is not None and cached[0] == access.fingerprint:
            return cached[1]
        if cached is not None:
            close = getattr(cached[1], "close", None)
            if close is not None:
                close()
        provider = self.provider_factory(access)
        self._providers[policy.name] = (access.fingerprint, provider)
        return provider

    async def evaluate(
        self,
        *,
        owner: ObjectRef,
        spec: SitsDeploymentSpec,
        policy: Policy,
        observed: ObservedState,
        previous_status: Mapping[str, Any],
        annotations: Mapping[str, str],
    ) -> Evaluation:
        started = time.monotonic()
        plan = build_plan(spec, observed)
        state = AnalysisState.from_dict(dict(previous_status.get("analysis") or {}))
        router = self.router_factory(spec.traffic.router.value, self.api)
        read_back = await read_weights_back(router, owner, spec)
        read_failed = read_back is None
        observed_weights = read_back or {}
        if not plan.candidates_ready or (
            spec.traffic.router is RouterKind.BUILTIN
            and masked_for_readiness(plan, observed_weights, state.weights)
        ):
            # The read-back then shows our own "no traffic to unready pods" rule, not a
            # decision anyone made (also on the first pass after a candidate turns ready,
            # before status.traffic is written again): decide from the stored weights.
            observed_weights = {}
        provider = await self.provider_for(policy)
        variants = tuple(v.name for v in spec.variants)
        max_age = shared_max_age(policy.interval_seconds)
        target = Target(owner.namespace, owner.name, variants, metric_source(spec), max_age)
        observations = await asyncio.gather(*(provider.samples(r, target) for r in policy.rules))
        for samples in observations:
            if samples.error is not None:
                metrics.PROMETHEUS_ERRORS.inc()
        decision = decide(
            policy=policy,
            plan=plan,
            state=state,
            observations=tuple(observations),
            observed_weights=observed_weights,
            commands=commands_from(annotations),
            now=self.clock(),
            phase=period_phase(owner.namespace, owner.name, policy.interval_seconds),
        )
        if decision.weights is not None and not read_failed:
            await router.set_weights(owner, spec, decision.weights)
        trigger = decision.events[0].reason if decision.events else "period"
        metrics.DECISIONS.labels(action=decision.action, trigger=trigger).inc()
        metrics.EVALUATION_SECONDS.observe(time.monotonic() - started)
        return Evaluation(decision, tuple(observations))
