"""The losers of a terminal decision are scaled to zero after spec.rollout.scaleDownDelay.

Time is the `now` each evaluation is given (simulated): no test sleeps.
"""

from __future__ import annotations

import pytest

from sits_operator.core.analysis.scaledown import due, losers, seconds_until
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Command,
    DecisionAction,
    HistoryEntry,
)
from tests.unit.test_analysis_commit import V1, V2, V3, variants_plan
from tests.unit.test_analysis_driver import HEALTHY, T0, Run

DONE, ROLLED, P = AnalysisPhase.SUCCEEDED, AnalysisPhase.ROLLED_BACK, AnalysisPhase.PROGRESSING
DECIDED = T0 + 30.0  # the terminal decision: the second evaluation of `finish`


def finish(command: Command, *parts: str, delay: float = 120.0, persist: bool = False) -> Run:
    """Started at T0, promoted or aborted at DECIDED."""
    run = Run(plan=variants_plan(*parts, scale_down_seconds=delay), persist=persist)
    run.period(HEALTHY, at=T0)
    run.period(HEALTHY, at=DECIDED, commands={command: "1"})
    return run


def at(run: Run, seconds_after: float, **commands: str) -> tuple[str, tuple[str, ...]]:
    """Evaluate `seconds_after` the decision: (action, scaled-down variants)."""
    wanted = {Command(k): v for k, v in commands.items()}
    decision = run.period(HEALTHY, at=DECIDED + seconds_after, commands=wanted)
    return decision.action, decision.state.scaled_down


@pytest.mark.parametrize(
    ("command", "parts", "delay", "checks"),
    [
        pytest.param(
            Command.PROMOTE,
            (V1, V2),
            120.0,
            [(30, ("none", ())), (119.9, ("none", ())), (120, ("scaleDown", ("v1",)))],
            id="succeeded-old-stable-after-2m",
        ),
        pytest.param(
            Command.ABORT,
            (V1, V2, V3),
            30.0,
            [(29, ("none", ())), (31, ("scaleDown", ("v2", "v3"))), (60, ("none", ("v2", "v3")))],
            id="rolled-back-every-candidate",
        ),
        pytest.param(
            Command.PROMOTE, (V1, V2), 0.0, [(0.5, ("scaleDown", ("v1",)))], id="no-delay"
        ),
    ],
)
@pytest.mark.parametrize("persist", [False, True], ids=["same-process", "operator-restarted"])
def test_losers_are_scaled_down_once_the_delay_has_passed(
    command: Command,
    parts: tuple[str, ...],
    delay: float,
    checks: list[tuple[float, tuple[str, tuple[str, ...]]]],
    persist: bool,
) -> None:
    run = finish(command, *parts, delay=delay, persist=persist)
    assert [at(run, after) for after, _ in checks] == [expected for _, expected in checks]
    weights = dict(run.state.weights)
    assert run.period(HEALTHY, at=DECIDED + 999).state.weights == weights, "traffic unchanged"


def test_the_scale_down_is_an_event_and_says_how_to_undo_it() -> None:
    run = finish(Command.PROMOTE, V1, V2)
    decision = run.period(HEALTHY, at=DECIDED + 120)
    (event,) = decision.events
    assert (event.type, event.reason) == ("Normal", "ScaledDown")
    assert "v1 scaled to zero replicas 120s after Succeeded" in event.message
    assert "spec.rollout.scaleDownDelay" in event.message
    assert "sits.dev/retry" in event.message
    assert run.state.last_reason == event.message
    assert run.state.history[-1].action == "scaleDown"
    assert run.period(HEALTHY, at=DECIDED + 150).events == (), "announced once"


def test_retry_brings_the_losers_back() -> None:
    run = finish(Command.ABORT, V1, V2)
    at(run, 120)
    assert run.state.scaled_down == ("v2",)
    action, scaled = at(run, 130, retry="1")
    assert (action, scaled, run.state.phase) == ("restart", (), P)
    assert run.state.finished_at is None


def test_abort_after_a_scaled_down_promotion_runs_the_old_stable_again() -> None:
    run = finish(Command.PROMOTE, V1, V2)
    at(run, 120)
    assert at(run, 200, abort="1") == ("rollback", ())
    assert run.state.finished_at == DECIDED + 200
    assert at(run, 200 + 119) == ("none", ())
    assert at(run, 200 + 120) == ("scaleDown", ("v2",))


def test_an_adopted_commit_keeps_the_scaled_down_variant_at_zero() -> None:
    run = finish(Command.PROMOTE, V1, V2)
    at(run, 120)
    run.plan = variants_plan("v2:stable:b", "v1:candidate:a")
    assert at(run, 150) == ("adopt", ("v1",))
    run.plan = variants_plan("v2:stable:b")
    assert at(run, 180) == ("adopt", ())


@pytest.mark.parametrize(
    ("stored", "now", "pending", "wait"),
    [
        pytest.param(
            AnalysisState(phase=DONE, weights={"v1": 0, "v2": 100}, finished_at=100.0),
            160.0,
            ("v1",),
            60.0,
            id="succeeded-waiting",
        ),
        pytest.param(
            AnalysisState(phase=DONE, weights={"v1": 0, "v2": 100}, finished_at=100.0),
            500.0,
            ("v1",),
            0.0,
            id="succeeded-due",
        ),
        pytest.param(
            AnalysisState(
                phase=DONE, weights={"v1": 0, "v2": 100}, finished_at=100.0, scaled_down=("v1",)
            ),
            500.0,
            (),
            None,
            id="already-scaled",
        ),
        pytest.param(
            AnalysisState(phase=P, weights={"v1": 100, "v2": 0}, finished_at=100.0),
            500.0,
            (),
            None,
            id="progressing-candidate-at-0-is-no-loser",
        ),
        pytest.param(
            AnalysisState(
                phase=ROLLED,
                weights={"v1": 100, "v2": 0},
                history=(HistoryEntry(200.0, DecisionAction.ROLLBACK, "r", {"v1": 100, "v2": 0}),),
            ),
            260.0,
            ("v2",),
            60.0,
            id="state-from-before-finished-at-counts-from-its-last-decision",
        ),
    ],
)
def test_losers_and_the_time_left(
    stored: AnalysisState, now: float, pending: tuple[str, ...], wait: float | None
) -> None:
    assert losers(stored) == pending
    assert seconds_until(stored, 120.0, now) == wait
    assert due(stored, 120.0, now) == (pending if wait == 0.0 else ())
