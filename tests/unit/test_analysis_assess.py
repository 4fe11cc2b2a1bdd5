"""Table-driven tests of the verdicts (assess) and the pure weight arithmetic."""

from __future__ import annotations

import json
import math

import pytest

from sits_operator.core.analysis import assess, step_weights_for, weights_for
from sits_operator.core.analysis.weights import (
    capped,
    masked_for_readiness,
    position_for,
    promotion_weights,
    start_position,
)
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Breach,
    DecisionAction,
    HistoryEntry,
    RolloutPlan,
    RuleSamples,
    Sample,
    Verdict,
)
from sits_operator.model.policy import (
    ActionType,
    CompareTo,
    Comparison,
    Policy,
    Rule,
    RuleAction,
)
from tests.unit.test_analysis_driver import CANARY, PLAN, STABLE, plan

POLICY = Policy("t", interval_seconds=30.0, min_requests=20, rules=())
PASS, FAIL, NO_DATA, ERROR = Verdict.PASS, Verdict.FAIL, Verdict.NO_DATA, Verdict.ERROR


def _rule(
    comparison: str = "<",
    threshold: float | None = 0.95,
    *,
    stable: bool = False,
    tolerance: float = 0.0,
    min_requests: int | None = None,
) -> Rule:
    return Rule(
        name="r",
        sli="sli",
        query="q",
        window_seconds=60.0,
        comparison=Comparison(comparison),
        action=RuleAction(ActionType.ROLLBACK),
        threshold=threshold,
        compare_to=CompareTo.STABLE if stable else CompareTo.THRESHOLD,
        tolerance=tolerance,
        min_requests=min_requests,
    )


def _samples(
    value: float | None, requests: float | None = 100.0, stable: Sample | None = None
) -> RuleSamples:
    by_variant = {CANARY: Sample(value, requests)}
    if stable is not None:
        by_variant[STABLE] = stable
    return RuleSamples("r", by_variant)


@pytest.mark.parametrize(
    ("comparison", "value", "expected"),
    [
        pytest.param("<", 0.90, FAIL, id="lt-below-fails"),
        pytest.param("<", 0.95, PASS, id="lt-equal-passes"),
        pytest.param("<", 0.99, PASS, id="lt-above-passes"),
        pytest.param("<=", 0.95, FAIL, id="le-equal-fails"),
        pytest.param("<=", 0.96, PASS, id="le-above-passes"),
        pytest.param(">", 0.96, FAIL, id="gt-above-fails"),
        pytest.param(">", 0.95, PASS, id="gt-equal-passes"),
        pytest.param(">=", 0.95, FAIL, id="ge-equal-fails"),
        pytest.param(">=", 0.94, PASS, id="ge-below-passes"),
    ],
)
def test_threshold_comparison_describes_the_breach(
    comparison: str, value: float, expected: Verdict
) -> None:
    assert assess(_rule(comparison), POLICY, _samples(value), CANARY, STABLE) is expected


@pytest.mark.parametrize(
    ("samples", "rule", "expected"),
    [
        pytest.param(_samples(None), _rule(), NO_DATA, id="none-value"),
        pytest.param(_samples(math.nan), _rule(), NO_DATA, id="nan"),
        pytest.param(_samples(math.inf), _rule(), NO_DATA, id="inf"),
        pytest.param(_samples(-math.inf), _rule(), NO_DATA, id="minus-inf"),
        pytest.param(RuleSamples("r"), _rule(), NO_DATA, id="variant-missing"),
        pytest.param(_samples(0.5, 19.0), _rule(), NO_DATA, id="below-policy-min-requests"),
        pytest.param(_samples(0.5, 20.0), _rule(), FAIL, id="at-min-requests-judged"),
        pytest.param(_samples(0.5, None), _rule(), FAIL, id="unknown-requests-judged"),
        pytest.param(_samples(0.5, 30.0), _rule(min_requests=50), NO_DATA, id="rule-min-wins"),
        pytest.param(_samples(0.99, 5.0), _rule(min_requests=1), PASS, id="rule-min-lower"),
        pytest.param(
            RuleSamples("r", {CANARY: Sample(0.5, 100)}, error="timeout"),
            _rule(),
            ERROR,
            id="query-error-beats-value",
        ),
        pytest.param(RuleSamples("r", error="bad query"), _rule(), ERROR, id="query-error"),
        pytest.param(_samples(0.5), _rule(threshold=None), ERROR, id="threshold-missing"),
    ],
)
def test_gaps_are_no_data_and_failures_are_error(
    samples: RuleSamples, rule: Rule, expected: Verdict
) -> None:
    assert assess(rule, POLICY, samples, CANARY, STABLE) is expected


@pytest.mark.parametrize(
    ("comparison", "candidate", "stable", "tolerance", "expected"),
    [
        # Lower is bad: reference = stable * (1 - tolerance) = 0.9405.
        pytest.param("<", 0.94, Sample(0.99, 100), 0.05, FAIL, id="lt-beyond-tolerance"),
        pytest.param("<", 0.945, Sample(0.99, 100), 0.05, PASS, id="lt-within-tolerance"),
        pytest.param("<", 0.99, Sample(0.99, 100), 0.0, PASS, id="lt-equal-no-tolerance"),
        pytest.param("<=", 0.99, Sample(0.99, 100), 0.0, FAIL, id="le-equal-no-tolerance"),
        # Higher is bad: reference = stable * (1 + tolerance) = 220.
        pytest.param(">", 230.0, Sample(200.0, 100), 0.1, FAIL, id="gt-beyond-tolerance"),
        pytest.param(">", 215.0, Sample(200.0, 100), 0.1, PASS, id="gt-within-tolerance"),
        pytest.param(">=", 220.0, Sample(200.0, 100), 0.1, FAIL, id="ge-at-tolerance"),
        pytest.param(">", 300.0, Sample(math.nan, 100), 0.1, NO_DATA, id="stable-nan"),
        pytest.param(">", 300.0, Sample(200.0, 3), 0.1, NO_DATA, id="stable-too-few-requests"),
        pytest.param(">", 300.0, None, 0.1, NO_DATA, id="stable-missing"),
    ],
)
def test_compare_to_stable_widens_in_the_candidates_favour(
    comparison: str, candidate: float, stable: Sample | None, tolerance: float, expected: Verdict
) -> None:
    rule = _rule(comparison, threshold=None, stable=True, tolerance=tolerance)
    samples = _samples(candidate, stable=stable)
    assert assess(rule, POLICY, samples, CANARY, STABLE) is expected


def test_stable_judged_against_itself_passes() -> None:
    rule = _rule(">", threshold=None, stable=True)
    samples = _samples(300.0, stable=Sample(200.0, 100))
    assert assess(rule, POLICY, samples, STABLE, STABLE) is PASS


@pytest.mark.parametrize(
    ("step", "top", "expected"),
    [
        pytest.param(10, 50, (10, 20, 30, 40, 50), id="sits-default"),
        pytest.param(30, 50, (30, 50), id="last-step-lands-on-max"),
        pytest.param(25, 100, (25, 50, 75, 100), id="to-full"),
        pytest.param(50, 50, (50,), id="single-step"),
        pytest.param(40, 150, (40, 80, 100), id="max-capped-at-100"),
        pytest.param(0, 50, (), id="no-increment"),
    ],
)
def test_step_weights_for(step: int, top: int, expected: tuple[int, ...]) -> None:
    assert step_weights_for(step, top) == expected


@pytest.mark.parametrize(
    ("candidates", "weight", "expected"),
    [
        pytest.param((CANARY,), 30, {STABLE: 70, CANARY: 30}, id="one-candidate"),
        pytest.param(("a", "b"), 30, {STABLE: 40, "a": 30, "b": 30}, id="two-candidates"),
        pytest.param(("a", "b"), 70, {STABLE: 0, "a": 50, "b": 50}, id="two-capped-at-100"),
        pytest.param((CANARY,), 0, {STABLE: 100, CANARY: 0}, id="rollback-weights"),
    ],
)
def test_weights_for(candidates: tuple[str, ...], weight: int, expected: dict[str, int]) -> None:
    assert weights_for(plan(candidates=candidates), weight) == expected


def test_promotion_splits_all_traffic_between_candidates() -> None:
    assert promotion_weights(PLAN) == {STABLE: 0, CANARY: 100}
    three = promotion_weights(plan(candidates=("a", "b", "c")))
    assert three == {STABLE: 0, "a": 34, "b": 33, "c": 33}


@pytest.mark.parametrize(
    ("weights", "limit", "expected"),
    [
        pytest.param({STABLE: 60, CANARY: 40}, 10, {STABLE: 90, CANARY: 10}, id="cut"),
        pytest.param({STABLE: 95, CANARY: 5}, 10, {STABLE: 95, CANARY: 5}, id="already-below"),
    ],
)
def test_capped(weights: dict[str, int], limit: int, expected: dict[str, int]) -> None:
    assert capped(PLAN, weights, limit) == expected


@pytest.mark.parametrize(
    ("steps", "weight", "expected"),
    [
        pytest.param((10, 20, 30, 40, 50), 10, 0, id="on-first-step"),
        pytest.param((10, 20, 30, 40, 50), 25, 1, id="between-steps"),
        pytest.param((10, 20, 30, 40, 50), 5, -1, id="below-first-step"),
        pytest.param((10, 20, 30, 40, 50), 50, 4, id="past-last-step"),
        pytest.param((10, None, 20), 10, 1, id="pause-gate-kept"),
    ],
)
def test_position_for(steps: tuple[int | None, ...], weight: int, expected: int) -> None:
    assert position_for(plan(step_weights=steps), weight) == expected


TWO = plan(candidates=("a", "b"))


@pytest.mark.parametrize(
    ("the_plan", "observed", "decided", "expected"),
    [
        pytest.param(PLAN, {STABLE: 100, CANARY: 0}, {STABLE: 80, CANARY: 20}, True, id="masked"),
        pytest.param(PLAN, {STABLE: 80, CANARY: 20}, {STABLE: 80, CANARY: 20}, False, id="same"),
        pytest.param(PLAN, {STABLE: 90, CANARY: 10}, {STABLE: 80, CANARY: 20}, False, id="lag"),
        pytest.param(PLAN, {STABLE: 80, CANARY: 20}, {STABLE: 100, CANARY: 0}, False, id="rolled"),
        pytest.param(PLAN, {STABLE: 60, CANARY: 0}, {STABLE: 80, CANARY: 20}, False, id="lost"),
        pytest.param(PLAN, {}, {STABLE: 80, CANARY: 20}, False, id="no-read-back"),
        pytest.param(PLAN, {STABLE: 100, CANARY: 0}, {}, False, id="nothing-decided"),
        pytest.param(
            TWO, {STABLE: 80, "a": 0, "b": 10}, {STABLE: 70, "a": 10, "b": 20}, False, id="mixed"
        ),
        pytest.param(
            TWO,
            {STABLE: 80, "a": 0, "b": 20},
            {STABLE: 70, "a": 10, "b": 20},
            True,
            id="one-of-two",
        ),
    ],
)
def test_masked_for_readiness(
    the_plan: RolloutPlan,
    observed: dict[str, int],
    decided: dict[str, int],
    expected: bool,
) -> None:
    """Only the built-in router's own "no traffic to an unready candidate" rule counts as
    masking; a lagging gateway, a rollback or a share that went elsewhere do not."""
    assert masked_for_readiness(the_plan, observed, decided) is expected


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({}, ({STABLE: 90, CANARY: 10}, 0), id="canary-starts-on-step-0"),
        pytest.param(
            {"initial_weights": {STABLE: 80, CANARY: 20}},
            ({STABLE: 80, CANARY: 20}, 1),
            id="canary-starts-from-initial-weights",
        ),
        pytest.param(
            {"strategy": "abTest", "initial_weights": {STABLE: 50, CANARY: 50}},
            ({STABLE: 50, CANARY: 50}, 0),
            id="abtest-keeps-its-split",
        ),
        pytest.param({"initial_weights": {}}, ({STABLE: 90, CANARY: 10}, 0), id="no-initial"),
    ],
)
def test_start_position(changes: dict[str, object], expected: tuple[dict[str, int], int]) -> None:
    assert start_position(plan(**changes)) == expected


def test_analysis_state_round_trips_through_status() -> None:
    state = AnalysisState(
        phase=AnalysisPhase.PAUSED,
        revision_key="rev-2",
        weights={STABLE: 80, CANARY: 20},
        step_index=-1,
        step_started_at=12.5,
        consecutive_passes=2,
        breaches={"latency-p95": Breach(3, 40.0), "success-rate": Breach(1, None)},
        no_data_since=10.0,
        error_since=11.0,
        last_period=99,
        last_evaluated_at=2970.0,
        paused_reason="paused by sits.dev/pause=1",
        acknowledged={"pause": "1"},
        last_action=DecisionAction.PAUSE,
        last_reason="paused by sits.dev/pause=1",
        history=(HistoryEntry(1.0, DecisionAction.RESTART, "started", {STABLE: 90, CANARY: 10}),),
    )
    raw = json.loads(json.dumps(state.to_dict()))  # status is JSON on the wire
    assert AnalysisState.from_dict(raw) == state
    assert AnalysisState.from_dict(None) == AnalysisState()
