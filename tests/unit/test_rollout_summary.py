"""What status.message says an analysed rollout waits for (core/rollout_summary.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from sits_operator.core.rollout_summary import analysis_condition, summarize, waiting_for_data
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Breach,
    Decision,
    DecisionAction,
    EventNote,
    HistoryEntry,
    RolloutPlan,
    RuleSamples,
    RuleVerdict,
    Sample,
    Verdict,
)
from sits_operator.model.events import EventReason
from sits_operator.model.policy import CompareTo, Policy
from tests.unit.test_analysis_driver import (
    CANARY,
    HEALTHY,
    NO_TRAFFIC,
    PLAN,
    POLICY,
    PROM_DOWN,
    STABLE,
    Obs,
    Run,
)

T = 1_000_000.0  # the last evaluation
PAUSE_PLAN = replace(PLAN, step_weights=(20, None, 50), pause_seconds=(None, 60.0, None))
GATED_PLAN = replace(PAUSE_PLAN, pause_seconds=(None, None, None))
AB_PLAN = replace(PLAN, strategy="abTest")


def at(step: int, weight: int, **changes: object) -> AnalysisState:
    """A Progressing state on `step` with the canary at `weight` %, evaluated at T."""
    state = AnalysisState(
        revision_key=PLAN.revision_key,
        weights={STABLE: 100 - weight, CANARY: weight},
        step_index=step,
        step_started_at=T - 20,
        last_evaluated_at=T,
    )
    return replace(state, **changes)  # type: ignore[arg-type]


ROLLBACK_REASON = "rolled back: success-rate: success_rate_5m of canary = 0.75 < 0.95 for 2 of 2"
ROLLED_BACK = at(
    0,
    0,
    phase=AnalysisPhase.ROLLED_BACK,
    history=(
        HistoryEntry(T - 60, DecisionAction.ROLLBACK, ROLLBACK_REASON, {STABLE: 100, CANARY: 0}),
    ),
    last_reason="sits.dev/abort=1 ignored: already RolledBack",
)
SUCCEEDED = at(
    5,
    100,
    phase=AnalysisPhase.SUCCEEDED,
    history=(
        HistoryEntry(T - 90, DecisionAction.PROMOTE, "all steps done, promoting", {CANARY: 100}),
        HistoryEntry(
            T - 60, DecisionAction.PROMOTE, "promoted: all SLIs pass at full traffic", {CANARY: 100}
        ),
    ),
)


@pytest.mark.parametrize(
    ("state", "plan", "expected"),
    [
        pytest.param(
            at(0, 10, consecutive_passes=1),
            PLAN,
            "step 1 of 5 at 10 %: 1 of 3 passing periods before step 2",
            id="counting-passes",
        ),
        pytest.param(
            at(4, 50, consecutive_passes=2),
            PLAN,
            "step 5 of 5 at 50 %: 2 of 3 passing periods before promotion",
            id="last-step",
        ),
        pytest.param(
            at(-1, 5),
            PLAN,
            "before step 1 of 5, candidates at 5 %: 0 of 3 passing periods before step 1",
            id="below-the-first-step",
        ),
        pytest.param(
            at(1, 20, breaches={"success-rate": Breach(1, T)}),
            PLAN,
            "step 2 of 5 at 20 %: success-rate failing for 1 of 2 periods (rollback)",
            id="young-breach-in-periods",
        ),
        pytest.param(
            at(1, 20, breaches={"latency-p95": Breach(3, T - 60)}),
            PLAN,
            "step 2 of 5 at 20 %: latency-p95 failing for 1m of 90s (setWeight)",
            id="young-breach-in-time",
        ),
        pytest.param(
            at(1, 20, no_data_since=T - 40),
            PLAN,
            "step 2 of 5 at 20 %: no data for 40s of 10m, then noData.action hold",
            id="no-data-holding",
        ),
        pytest.param(
            at(1, 20, no_data_since=T - 900),
            PLAN,
            "step 2 of 5 at 20 %: no data for 15m (noData.action hold after 10m)",
            id="no-data-past-its-limit",
        ),
        pytest.param(
            at(1, 20, error_since=T - 30, no_data_since=T - 300),
            PLAN,
            "step 2 of 5 at 20 %: frozen for 30s on SLI query errors",
            id="queries-failing-win-over-no-data",
        ),
        pytest.param(
            at(1, 20),
            PAUSE_PLAN,
            "step 2 of 3 (pause) at 20 %: a pause step: 40s of 1m left",
            id="timed-pause-step",
        ),
        pytest.param(
            at(1, 20),
            GATED_PLAN,
            "step 2 of 3 (pause) at 20 %: a pause step: waiting for sits.dev/resume",
            id="manual-gate",
        ),
        pytest.param(
            at(1, 20, phase=AnalysisPhase.PAUSED, paused_reason="paused by sits.dev/pause=1"),
            PLAN,
            "paused at step 2 of 5 at 20 %: paused by sits.dev/pause=1; waiting for "
            "sits.dev/resume",
            id="paused-by-hand",
        ),
        pytest.param(
            at(1, 20, phase=AnalysisPhase.PAUSED, paused_reason="paused: latency-p95: slow"),
            PLAN,
            "paused at step 2 of 5 at 20 %: latency-p95: slow; waiting for sits.dev/resume",
            id="paused-by-a-rule",
        ),
        pytest.param(
            at(5, 100, phase=AnalysisPhase.PROMOTING),
            PLAN,
            "promoting: candidates at 100 %: one passing period at full traffic before Succeeded",
            id="promoting",
        ),
        pytest.param(
            at(5, 100, phase=AnalysisPhase.PROMOTING, no_data_since=T - 30),
            PLAN,
            "promoting: candidates at 100 %: no data for 30s of 10m, then noData.action hold",
            id="promoting-without-data",
        ),
        pytest.param(
            SUCCEEDED,
            PLAN,
            "succeeded: all traffic on canary: promoted: all SLIs pass at full traffic",
            id="succeeded",
        ),
        pytest.param(
            ROLLED_BACK,
            PLAN,
            "rolled back: all traffic on stable: success-rate: success_rate_5m of canary = 0.75"
            " < 0.95 for 2 of 2; waiting for a new revision or sits.dev/retry",
            id="rolled-back-says-why-even-after-an-ignored-abort",
        ),
        pytest.param(
            at(0, 50),
            AB_PLAN,
            "A/B test at stable 50 %, canary 50 %: all SLIs pass; the split holds until "
            "sits.dev/promote or sits.dev/abort",
            id="ab-test",
        ),
    ],
)
def test_summary_says_where_the_rollout_stands(
    state: AnalysisState, plan: RolloutPlan, expected: str
) -> None:
    summary = summarize(state, plan, POLICY)
    assert summary.text == expected
    assert summary.phase.value == state.phase.value


def test_summary_follows_the_engine_period_by_period() -> None:
    """Driven by `decide` itself: the words track the real state machine."""
    run = Run()
    run.period(HEALTHY)  # the analysis starts: step 1 at 10 %
    texts = []
    for obs in (HEALTHY, HEALTHY, NO_TRAFFIC, NO_TRAFFIC):
        run.period(obs)
        texts.append(summarize(run.state, PLAN, POLICY).text)
    assert texts == [
        "step 1 of 5 at 10 %: 1 of 3 passing periods before step 2",
        "step 1 of 5 at 10 %: 2 of 3 passing periods before step 2",
        "step 1 of 5 at 10 %: no data for 0s of 10m, then noData.action hold",
        "step 1 of 5 at 10 %: no data for 30s of 10m, then noData.action hold",
    ]


# ------------------------------------------------------------------ data gaps


def samples(rule: str, **by_variant: Sample) -> RuleSamples:
    return RuleSamples(rule, dict(by_variant))


FULL = Sample(0.99, 500.0)
STABLE_RULE_POLICY = replace(
    POLICY, rules=(replace(POLICY.rules[0], compare_to=CompareTo.STABLE, tolerance=0.01),)
)
STRICT_LATENCY = replace(POLICY, rules=(POLICY.rules[0], replace(POLICY.rules[1], min_requests=50)))


@pytest.mark.parametrize(
    ("policy", "observations", "expected"),
    [
        pytest.param(POLICY, HEALTHY.samples(), "", id="all-usable"),
        pytest.param(
            POLICY,
            (
                samples("success-rate", canary=Sample(1.0, 3.0), stable=FULL),
                samples("latency-p95", canary=Sample(80.0, 3.4), stable=FULL),
            ),
            "canary has 3 of 20 requests in the 5m window (success-rate); "
            "canary has 3 of 20 requests in the 1m window (latency-p95)",
            id="too-few-requests-per-rule-window",
        ),
        pytest.param(
            POLICY,
            (samples("success-rate", stable=FULL), samples("latency-p95", stable=FULL)),
            "no series for canary in the 5m window (success-rate); "
            "no series for canary in the 1m window (latency-p95)",
            id="no-series",
        ),
        pytest.param(
            POLICY,
            (
                samples("success-rate", canary=FULL),
                samples("latency-p95", canary=Sample(math.nan, 400.0)),
            ),
            "canary has no value in the 1m window (latency-p95)",
            id="nan-with-traffic",
        ),
        pytest.param(
            STRICT_LATENCY,
            (
                samples("success-rate", canary=Sample(0.99, 30.0)),
                samples("latency-p95", canary=Sample(80.0, 30.0)),
            ),
            "canary has 30 of 50 requests in the 1m window (latency-p95)",
            id="a-rule-own-minimum",
        ),
        pytest.param(
            STABLE_RULE_POLICY,
            (samples("success-rate", canary=FULL, stable=Sample(1.0, 2.0)),),
            "stable has 2 of 20 requests in the 5m window (success-rate)",
            id="compared-with-stable-needs-stable",
        ),
        pytest.param(POLICY, PROM_DOWN.samples(), "", id="failed-queries-are-not-data-gaps"),
    ],
)
def test_waiting_for_data_names_variant_count_and_window(
    policy: Policy, observations: tuple[RuleSamples, ...], expected: str
) -> None:
    assert waiting_for_data(policy, PLAN, observations) == expected


# ------------------------------------------------------------------ the Analysis condition


def verdict(variant: str, value: Verdict, rule: str = "success-rate") -> RuleVerdict:
    return RuleVerdict(rule, "success_rate_5m", variant, value, None, 300.0)


def decision(*verdicts: RuleVerdict, events: tuple[EventNote, ...] = ()) -> Decision:
    return Decision(
        AnalysisState(),
        DecisionAction.HOLD,
        "all SLIs pass (1 of 3 periods)",
        None,
        verdicts,
        events,
    )


FEW = (
    samples("success-rate", canary=Sample(1.0, 3.0), stable=FULL),
    samples("latency-p95", canary=Sample(80.0, 25.0), stable=FULL),
)


@pytest.mark.parametrize(
    ("judged", "observations", "expected"),
    [
        pytest.param(decision(), (), None, id="nothing-judged-keeps-the-condition"),
        pytest.param(
            decision(verdict(CANARY, Verdict.PASS), verdict(STABLE, Verdict.NO_DATA)),
            HEALTHY.samples(),
            (True, "Evaluating", "all SLIs pass (1 of 3 periods)"),
            id="stable-without-data-does-not-hold-a-threshold-rule",
        ),
        pytest.param(
            decision(verdict(CANARY, Verdict.NO_DATA), verdict(STABLE, Verdict.PASS)),
            FEW,
            (
                False,
                "NoData",
                "waiting for data: canary has 3 of 20 requests in the 5m window (success-rate)",
            ),
            id="no-data-names-the-count",
        ),
        pytest.param(
            decision(verdict(CANARY, Verdict.ERROR)),
            Obs(error="ConnectionError: refused", error_rule="success-rate").samples(),
            (
                False,
                "MetricsError",
                "SLI queries fail: ConnectionError: refused (success-rate); rollout frozen",
            ),
            id="error-quotes-the-failure",
        ),
        pytest.param(
            decision(verdict(CANARY, Verdict.ERROR)),
            (
                RuleSamples("success-rate", error="HTTP 401"),
                RuleSamples("latency-p95", error="HTTP 401"),
                RuleSamples("ttft", error="timeout"),
            ),
            (
                False,
                "MetricsError",
                "SLI queries fail: HTTP 401 (success-rate, latency-p95); timeout (ttft);"
                " rollout frozen",
            ),
            id="one-error-of-several-rules-is-said-once",
        ),
        pytest.param(
            decision(events=(EventNote("Normal", EventReason.RETRY, "analysis restarted"),)),
            (),
            (True, "Evaluating", "all SLIs pass (1 of 3 periods)"),
            id="a-restart-clears-an-old-no-data",
        ),
    ],
)
def test_analysis_condition(
    judged: Decision,
    observations: tuple[RuleSamples, ...],
    expected: tuple[bool, str, str] | None,
) -> None:
    assert analysis_condition(judged, PLAN, POLICY, observations) == expected
