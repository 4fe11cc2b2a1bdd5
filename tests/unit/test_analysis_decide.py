"""SITS2026 driven period by period with the real policy: exact (action, phase, weight) runs.

Each period is 30 s (the policy's interval). The first period of every run starts the
analysis (candidate on step 0 = 10 %) and is not counted.
"""

from __future__ import annotations

import pytest

from sits_operator.model.analysis import Breach
from sits_operator.model.policy import ErrorAction, NoDataAction
from tests.unit.test_analysis_driver import (
    CANARY,
    ERRORS_10,
    HEALTHY,
    NO_TRAFFIC,
    PROM_DOWN,
    SLOW,
    STABLE,
    T0,
    Obs,
    Run,
    Trace,
    policy,
)

P, PAUSED, ROLLED = "Progressing", "Paused", "RolledBack"
START: Trace = ("restart", P, 10)
TO_30 = [HEALTHY] * 7  # restart + 2 x 3 passes: the canary stands at 30 %
AT_30 = [START, *[("hold", P, 10)] * 2, ("step", P, 20), *[("hold", P, 20)] * 2, ("step", P, 30)]
BOTH = Obs(success=0.90, p95=300.0)


def _climb(weight: int) -> list[Trace]:
    return [("hold", P, weight), ("hold", P, weight), ("step", P, weight + 10)]


HEALTHY_RUN = [
    START,
    *_climb(10),
    *_climb(20),
    *_climb(30),
    *_climb(40),
    ("hold", P, 50),
    ("hold", P, 50),
    ("promote", "Promoting", 100),
    ("promote", "Succeeded", 100),
    ("none", "Succeeded", 100),
]


@pytest.mark.parametrize(
    ("periods", "expected"),
    [
        pytest.param([HEALTHY] * 18, HEALTHY_RUN, id="healthy-stepped-10-to-50-then-promoted"),
        pytest.param(
            [HEALTHY, ERRORS_10, ERRORS_10, HEALTHY],
            [START, ("hold", P, 10), ("rollback", ROLLED, 0), ("none", ROLLED, 0)],
            id="errors-10pct-roll-back-on-the-second-failing-period",
        ),
        pytest.param(
            [HEALTHY, ERRORS_10, HEALTHY, ERRORS_10, ERRORS_10],
            [START, ("hold", P, 10), ("hold", P, 10), ("hold", P, 10), ("rollback", ROLLED, 0)],
            id="one-failing-period-then-a-pass-resets",
        ),
        pytest.param(
            [*TO_30, ERRORS_10, ERRORS_10],
            [*AT_30, ("hold", P, 30), ("rollback", ROLLED, 0)],
            id="errors-at-30pct-roll-back-to-stable",
        ),
        pytest.param(
            [*TO_30, SLOW, SLOW, SLOW, SLOW, HEALTHY, HEALTHY, HEALTHY],
            [
                *AT_30,
                *[("hold", P, 30)] * 3,
                ("setWeight", P, 10),
                ("hold", P, 10),
                ("hold", P, 10),
                ("step", P, 20),
            ],
            id="p95-300ms-cut-to-10-at-90s-then-climbs-again",
        ),
        pytest.param(
            [*TO_30, SLOW, SLOW, SLOW, HEALTHY, SLOW, SLOW, SLOW],
            [*AT_30, *[("hold", P, 30)] * 7],
            id="p95-breach-interrupted-by-a-pass-never-cuts",
        ),
        pytest.param(
            [HEALTHY, SLOW, SLOW, SLOW, SLOW],
            [START, *[("hold", P, 10)] * 4],
            id="p95-cut-when-already-at-10-changes-nothing",
        ),
        pytest.param(
            [*TO_30, SLOW, SLOW, BOTH, BOTH],
            [*AT_30, *[("hold", P, 30)] * 3, ("rollback", ROLLED, 0)],
            id="rollback-wins-over-setweight-in-the-same-period",
        ),
    ],
)
def test_sits2026_scenarios(periods: list[Obs], expected: list[Trace]) -> None:
    assert Run().trace(*periods) == expected


def test_healthy_run_writes_history_and_events_for_every_move() -> None:
    run = Run()
    run.trace(*[HEALTHY] * 18)
    assert [h.weights[CANARY] for h in run.state.history] == [10, 20, 30, 40, 50, 100, 100]
    assert run.router == {STABLE: 0, CANARY: 100}
    assert run.event_reasons() == ["AnalysisStarted", *["Step"] * 4, "Promoting", "Promoted"]


def test_rollback_event_names_rule_value_and_threshold() -> None:
    run = Run()
    run.trace(HEALTHY, ERRORS_10, ERRORS_10)
    (event,) = run.decisions[-1].events
    assert (event.type, event.reason) == ("Warning", "RolledBack")
    assert "success-rate" in event.message
    assert "0.9 < 0.95" in event.message
    assert "2 of 2 periods" in event.message
    assert run.decisions[-1].weights == {STABLE: 100, CANARY: 0}


@pytest.mark.parametrize(
    ("offsets", "cut_at"),
    [
        pytest.param((0, 30, 60, 90), 3, id="regular-periods-cut-at-90s"),
        pytest.param((0, 30, 60, 89, 119), 4, id="89s-is-not-yet-90s"),
        pytest.param((0, 45, 95), 2, id="irregular-timer-cuts-at-95s"),
    ],
)
def test_latency_cut_exactly_when_90s_elapsed(offsets: tuple[float, ...], cut_at: int) -> None:
    run = Run()
    run.trace(*TO_30)
    start = T0 + 7 * 30
    actions = [run.observe(SLOW, at=start + off)[0] for off in offsets]
    assert actions == ["hold"] * cut_at + ["setWeight"] + ["hold"] * (len(offsets) - cut_at - 1)
    assert run.router == {STABLE: 90, CANARY: 10}
    assert "WeightCut" in run.event_reasons()


@pytest.mark.parametrize(
    ("action", "last", "after"),
    [
        pytest.param(NoDataAction.HOLD, ("hold", P, 10), ("hold", P, 10), id="hold"),
        pytest.param(NoDataAction.PAUSE, ("pause", PAUSED, 10), ("hold", PAUSED, 10), id="pause"),
        pytest.param(
            NoDataAction.ROLLBACK, ("rollback", ROLLED, 0), ("none", ROLLED, 0), id="rollback"
        ),
    ],
)
def test_no_traffic_holds_then_takes_the_no_data_action(
    action: NoDataAction, last: Trace, after: Trace
) -> None:
    run = Run(policy(no_data_action=action, no_data_after_seconds=90.0))
    trace = run.trace(HEALTHY, *[NO_TRAFFIC] * 4, HEALTHY)
    assert trace == [START, *[("hold", P, 10)] * 3, last, after]


def test_no_traffic_with_sits2026_holds_and_warns_once_after_ten_minutes() -> None:
    run = Run()
    trace = run.trace(HEALTHY, *[NO_TRAFFIC] * 25)
    assert trace == [START, *[("hold", P, 10)] * 25]
    assert run.event_reasons().count("NoData") == 1
    assert run.decisions[21].events[0].reason == "NoData"  # 600 s after the first empty period
    run.observe(HEALTHY)
    assert run.state.no_data_since is None
    assert run.state.consecutive_passes == 1


def test_prometheus_down_freezes_then_resumes_without_forgiving_or_counting() -> None:
    run = Run()
    trace = run.trace(HEALTHY, ERRORS_10, PROM_DOWN, PROM_DOWN, PROM_DOWN)
    assert trace == [START, ("hold", P, 10), *[("freeze", P, 10)] * 3]
    assert all(d.weights is None for d in run.decisions[1:])
    assert run.state.breaches == {"success-rate": Breach(1, T0 + 30)}
    assert run.state.error_since == T0 + 60
    assert run.trace(ERRORS_10) == [("rollback", ROLLED, 0)]  # second *observed* failure
    assert run.event_reasons().count("AnalysisError") == 1
    assert run.event_reasons().count("AnalysisRecovered") == 1


def test_prometheus_back_with_healthy_data_resumes_progress() -> None:
    run = Run()
    trace = run.trace(HEALTHY, HEALTHY, HEALTHY, PROM_DOWN, PROM_DOWN, HEALTHY, HEALTHY)
    frozen = [("freeze", P, 10)] * 2
    assert trace == [
        START,
        ("hold", P, 10),
        ("hold", P, 10),
        *frozen,
        ("step", P, 20),
        ("hold", P, 20),
    ]
    assert run.state.error_since is None


def test_prometheus_down_with_no_data_rollback_policy_still_never_rolls_back() -> None:
    run = Run(policy(no_data_action=NoDataAction.ROLLBACK, no_data_after_seconds=30.0))
    assert run.trace(HEALTHY, *[PROM_DOWN] * 6) == [START, *[("freeze", P, 10)] * 6]


def test_failing_rule_still_acts_while_another_query_errors() -> None:
    run = Run()
    latency_down = Obs(success=0.90, error="timeout", error_rule="latency-p95")
    trace = run.trace(HEALTHY, latency_down, latency_down)
    assert trace == [START, ("freeze", P, 10), ("rollback", ROLLED, 0)]


def test_on_error_pause_policy_pauses_and_stays_paused() -> None:
    run = Run(policy(on_error=ErrorAction.PAUSE))
    trace = run.trace(HEALTHY, PROM_DOWN, PROM_DOWN, HEALTHY)
    assert trace == [START, ("pause", PAUSED, 10), ("freeze", PAUSED, 10), ("hold", PAUSED, 10)]
    assert "SLI query errors" in run.state.paused_reason


@pytest.mark.parametrize("persist", [False, True], ids=["same-process", "operator-restarted"])
def test_a_period_is_never_counted_twice(persist: bool) -> None:
    run = Run(persist=persist)
    run.trace(HEALTHY, ERRORS_10)
    again = run.period(ERRORS_10, at=T0 + 30 + 20, advance=False)  # same period again
    assert (again.action, again.weights, again.events) == ("none", None, ())
    assert run.state.breaches["success-rate"].periods == 1
    assert run.trace(ERRORS_10) == [("rollback", ROLLED, 0)]
