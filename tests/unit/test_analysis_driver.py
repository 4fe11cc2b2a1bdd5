"""Shared driver for the decision-engine tables, plus checks that the driver is faithful.

`Run` plays the Kopf timer: one `decide` per evaluation period, the built-in router
applying whatever weights come back, the state carried over (optionally through
to_dict/from_dict, as an operator restart would).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from sits_operator.core.analysis import decide, step_weights_for
from sits_operator.model.analysis import (
    AnalysisState,
    Command,
    Decision,
    RolloutPlan,
    RuleSamples,
    Sample,
)
from sits_operator.model.policy import ActionType, Comparison, Policy, parse_policy

ROOT = Path(__file__).resolve().parents[2]
POLICY = parse_policy(
    "sits2026", yaml.safe_load((ROOT / "policies" / "sits2026.yaml").read_text())["spec"]
)
STABLE, CANARY = "stable", "canary"
T0 = 30.0 * 100_000 + 1.0  # one second into a period, so periods are t0 + k * interval

PLAN = RolloutPlan(
    stable=STABLE,
    candidates=(CANARY,),
    revision_key="rev-1",
    strategy="canary",
    initial_weights={STABLE: 100, CANARY: 0},
    step_weights=step_weights_for(10, 50),
    pause_seconds=(None,) * 5,
)


@dataclass(frozen=True)
class Obs:
    """One period's SLI values (candidate and stable) as Prometheus would return them."""

    success: float | None = 0.99
    p95: float | None = 120.0
    requests: float = 500.0
    stable_success: float | None = 0.995
    stable_p95: float | None = 110.0
    error: str | None = None
    error_rule: str | None = None  # only this rule's query fails (default: all of them)
    others: tuple[str, ...] = ()  # more candidates, reporting healthy values

    def samples(self) -> tuple[RuleSamples, ...]:
        return (
            self._rule("success-rate", self.success, self.stable_success, 0.99),
            self._rule("latency-p95", self.p95, self.stable_p95, 120.0),
        )

    def _rule(
        self, name: str, value: float | None, stable: float | None, fine: float
    ) -> RuleSamples:
        if self.error is not None and self.error_rule in (None, name):
            return RuleSamples(name, error=self.error)
        by_variant = {CANARY: Sample(value, self.requests), STABLE: Sample(stable, 1000.0)}
        by_variant.update({other: Sample(fine, 1000.0) for other in self.others})
        return RuleSamples(name, by_variant)


HEALTHY = Obs()
ERRORS_10 = Obs(success=0.90)  # 10 % errors: success rate 0.90 < 0.95
SLOW = Obs(p95=300.0)  # p95 300 ms > 200 ms
NO_TRAFFIC = Obs(requests=0.0)
PROM_DOWN = Obs(error="connection refused")

Trace = tuple[str, str, int]  # (action, phase, candidate weight at the router)


class Run:
    """Calls `decide` once per period like the handler's timer and keeps what it returns."""

    def __init__(
        self,
        policy: Policy = POLICY,
        plan: RolloutPlan = PLAN,
        *,
        state: AnalysisState | None = None,
        persist: bool = False,
        phase: float = 0.0,
    ) -> None:
        self.policy, self.plan, self.persist, self.phase = policy, plan, persist, phase
        self.state = state or AnalysisState()
        self.router: dict[str, int] = {}
        self.tick = 0
        self.decisions: list[Decision] = []

    def period(
        self,
        obs: Obs = HEALTHY,
        *,
        at: float | None = None,
        commands: Mapping[Command, str] | None = None,
        advance: bool = True,
    ) -> Decision:
        now = T0 + self.tick * self.policy.interval_seconds if at is None else at
        decision = decide(
            policy=self.policy,
            plan=self.plan,
            state=self.state,
            observations=obs.samples(),
            observed_weights=dict(self.router),
            commands=dict(commands or {}),
            now=now,
            phase=self.phase,
        )
        if decision.weights is not None:
            self.router = dict(decision.weights)
        self.state = decision.state
        if self.persist:  # what a restarted operator reads back from status
            self.state = AnalysisState.from_dict(decision.state.to_dict())
        self.tick += 1 if advance else 0
        self.decisions.append(decision)
        return decision

    def trace(self, *periods: Obs) -> list[Trace]:
        return [self.observe(obs) for obs in periods]

    def observe(
        self,
        obs: Obs = HEALTHY,
        *,
        at: float | None = None,
        commands: Mapping[Command, str] | None = None,
    ) -> Trace:
        decision = self.period(obs, at=at, commands=commands)
        return decision.action, decision.state.phase.value, self.router.get(CANARY, 0)

    def event_reasons(self) -> list[str]:
        return [e.reason for d in self.decisions for e in d.events]


def policy(**changes: object) -> Policy:
    return replace(POLICY, **changes)  # type: ignore[arg-type]


def plan(**changes: object) -> RolloutPlan:
    return replace(PLAN, **changes)  # type: ignore[arg-type]


def test_sits2026_policy_is_parsed_as_the_seed_says() -> None:
    success, latency = POLICY.rules
    assert (POLICY.interval_seconds, POLICY.promotion_consecutive_passes) == (30.0, 3)
    assert (success.comparison, success.threshold, success.for_periods) == (
        Comparison.LT,
        0.95,
        2,
    )
    assert success.action.type is ActionType.ROLLBACK
    assert (latency.comparison, latency.threshold, latency.for_seconds) == (Comparison.GT, 200, 90)
    assert (latency.action.type, latency.action.weight) == (ActionType.SET_WEIGHT, 10)


def test_driver_observations_carry_both_variants() -> None:
    success, latency = HEALTHY.samples()
    assert set(success.by_variant) == {STABLE, CANARY}
    assert latency.by_variant[CANARY].value == 120.0
    assert PROM_DOWN.samples()[0].error == "connection refused"
