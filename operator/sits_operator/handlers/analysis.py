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

from sits_operator.adapters.kube import ApiClient, read_secret_value
from sits_operator.adapters.prometheus import MetricsProvider, Target, make_provider
from sits_operator.adapters.routers import TrafficRouter, make_router, read_weights_back
from sits_operator.core.analysis import decide
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
from sits_operator.model.spec import ObjectRef, SitsDeploymentSpec

ProviderFactory = Callable[[str | None, dict[str, str] | None], MetricsProvider]
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


@dataclass
class Analyzer:
    api: ApiClient | None
    provider_factory: ProviderFactory = lambda url, headers: make_provider(url, headers=headers)
    router_factory: RouterFactory = make_router
    clock: Callable[[], float] = time.time
    _providers: dict[tuple[str, str], MetricsProvider] = field(default_factory=dict)

    async def _headers(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, str] | None:
        ref = spec.analysis.prometheus.auth_secret_ref
        if ref is None or self.api is None:
            return None
        token = await read_secret_value(
            self.api, namespace=owner.namespace, name=ref.name, key=ref.key
        )
        return {"Authorization": f"Bearer {token.strip()}"}

    async def _provider(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> MetricsProvider:
        url = spec.analysis.prometheus.url
        auth = spec.analysis.prometheus.auth_secret_ref
        key = (url, f"{owner.namespace}/{auth.name}/{auth.key}" if auth else "")
        if key not in self._providers:
            self._providers[key] = self.provider_factory(url, await self._headers(owner, spec))
        return self._providers[key]

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
        if not plan.candidates_ready:
            # The read-back then shows our own "no traffic to unready pods" rule, not a
            # decision anyone made: decide from the stored weights instead.
            observed_weights = {}
        provider = await self._provider(owner, spec)
        variants = tuple(v.name for v in spec.variants)
        target = Target(owner.namespace, owner.name, variants, metric_source(spec))
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
        )
        if decision.weights is not None and not read_failed:
            await router.set_weights(owner, spec, decision.weights)
        trigger = decision.events[0].reason if decision.events else "period"
        metrics.DECISIONS.labels(action=decision.action, trigger=trigger).inc()
        metrics.EVALUATION_SECONDS.observe(time.monotonic() - started)
        return Evaluation(decision, tuple(observations))
