"""spec.rollout.interval: the least time a canary step lasts, in whole policy periods.

SITS2026 evaluates every 30 s and steps after 3 consecutive passing periods, so a step
lasts 90 s unless the interval asks for more; the interval then rounds up to periods.
"""

from __future__ import annotations

import pytest

from sits_operator.model.analysis import AnalysisPhase
from tests.unit.test_analysis_driver import HEALTHY, SLOW, T0, Run, plan

P = AnalysisPhase.PROGRESSING.value


def step_periods(step_seconds: float | None, periods: int = 13) -> list[int]:
    """The periods (from the start) at which the canary stepped."""
    run = Run(plan=plan(step_seconds=step_seconds))
    trace = run.trace(*[HEALTHY] * periods)
    return [i for i, (action, _, _) in enumerate(trace) if action == "step"]


@pytest.mark.parametrize(
    ("interval", "steps"),
    [
        pytest.param(None, [3, 6, 9, 12], id="unset-the-policy-decides"),
        pytest.param(60.0, [3, 6, 9, 12], id="shorter-than-3-passes-changes-nothing"),
        pytest.param(90.0, [3, 6, 9, 12], id="equal-to-3-passes"),
        pytest.param(120.0, [4, 8, 12], id="2m-every-4-periods"),
        pytest.param(100.0, [4, 8, 12], id="rounded-up-to-whole-periods"),
        pytest.param(300.0, [10], id="5m"),
    ],
)
def test_a_step_lasts_the_interval_and_the_passes(interval: float | None, steps: list[int]) -> None:
    assert step_periods(interval) == steps


def test_a_waiting_step_says_why() -> None:
    run = Run(plan=plan(step_seconds=120.0))
    run.trace(*[HEALTHY] * 4)
    assert run.state.last_reason == (
        "all SLIs passed 3 consecutive periods; a step lasts at least 120s"
        " (spec.rollout.interval): 1 more period"
    )


def test_timer_jitter_never_costs_a_period() -> None:
    """A step entered by a late evaluation (3 s into its period) still advances 4 periods
    later, though less than 120 s of clock time have passed by the evaluation then."""
    run = Run(plan=plan(step_seconds=120.0))
    offsets = [3.0, 0.5, 2.0, 0.5, 0.5]  # seconds into each period
    trace = [run.observe(HEALTHY, at=T0 - 1 + 30 * k + off) for k, off in enumerate(offsets)]
    assert [action for action, _, _ in trace] == ["restart", "hold", "hold", "hold", "step"]


def test_a_failing_period_still_needs_the_passes_after_the_interval() -> None:
    run = Run(plan=plan(step_seconds=120.0))
    trace = run.trace(HEALTHY, HEALTHY, HEALTHY, HEALTHY, SLOW, HEALTHY, HEALTHY, HEALTHY)
    assert [a for a, _, _ in trace] == ["restart", *["hold"] * 6, "step"]
    assert trace[-1] == ("step", P, 20)
