"""The rollout state machine around the SLIs: commands, revisions, terminal phases, steps."""

from __future__ import annotations

import pytest

from sits_operator.model.analysis import AnalysisPhase, AnalysisState, Command
from sits_operator.model.policy import parse_policy
from tests.unit.test_analysis_driver import (
    CANARY,
    ERRORS_10,
    HEALTHY,
    SLOW,
    STABLE,
    T0,
    Obs,
    Run,
    Trace,
    plan,
)

P, PAUSED, ROLLED, DONE = "Progressing", "Paused", "RolledBack", "Succeeded"
START: Trace = ("restart", P, 10)
TO_20 = [HEALTHY] * 4  # restart + 3 passes: the canary stands at 20 %


def _at_20(*, paused: bool = False) -> Run:
    run = Run()
    run.trace(*TO_20)
    if paused:
        run.observe(HEALTHY, commands={Command.PAUSE: "p1"})
    return run


@pytest.mark.parametrize(
    ("command", "paused", "expected", "event"),
    [
        pytest.param(Command.PROMOTE, False, ("promote", DONE, 100), "Promoted", id="promote"),
        pytest.param(Command.ABORT, False, ("rollback", ROLLED, 0), "RolledBack", id="abort"),
        pytest.param(Command.PAUSE, False, ("pause", PAUSED, 20), "Paused", id="pause"),
        pytest.param(Command.RESUME, True, ("resume", P, 20), "Resumed", id="resume"),
        pytest.param(Command.RETRY, False, START, "Retry", id="retry-restarts-at-step-0"),
        pytest.param(Command.RESUME, False, ("none", P, 20), "CommandIgnored", id="resume-idle"),
    ],
)
def test_each_command_acts_once_and_is_acknowledged(
    command: Command, paused: bool, expected: Trace, event: str
) -> None:
    run = _at_20(paused=paused)
    assert run.observe(HEALTHY, commands={command: "v1"}) == expected
    assert [e.reason for e in run.decisions[-1].events] == [event]
    assert run.state.acknowledged[command.value] == "v1"
    before = run.state.phase
    again = run.period(HEALTHY, commands={command: "v1"})  # annotation still there
    assert all(e.reason != event for e in again.events)
    assert again.state.phase is before


def test_abort_reason_names_the_annotation() -> None:
    run = _at_20()
    decision = run.period(HEALTHY, commands={Command.ABORT: "now"})
    assert decision.reason == "aborted by sits.dev/abort=now"
    assert decision.events[0].type == "Warning"


def test_a_new_value_of_the_same_annotation_acts_again() -> None:
    run = _at_20()
    run.observe(HEALTHY, commands={Command.PAUSE: "1"})
    run.observe(HEALTHY, commands={Command.PAUSE: "1", Command.RESUME: "1"})
    assert run.observe(HEALTHY, commands={Command.PAUSE: "2", Command.RESUME: "1"})[:2] == (
        "pause",
        PAUSED,
    )


def test_several_new_commands_at_once_end_with_the_safest() -> None:
    run = _at_20()
    assert run.observe(HEALTHY, commands={Command.PAUSE: "1", Command.ABORT: "1"}) == (
        "rollback",
        ROLLED,
        0,
    )
    assert run.state.acknowledged == {"pause": "1", "abort": "1"}


def test_pause_in_a_terminal_phase_is_acknowledged_and_ignored() -> None:
    run = Run()
    run.trace(HEALTHY, ERRORS_10, ERRORS_10)
    assert run.observe(HEALTHY, commands={Command.PAUSE: "x"}) == ("none", ROLLED, 0)
    assert run.event_reasons()[-1] == "CommandIgnored"
    assert run.state.acknowledged == {"pause": "x"}


def test_rolled_back_stays_put_until_retry() -> None:
    run = Run()
    run.trace(HEALTHY, ERRORS_10, ERRORS_10)
    assert run.trace(HEALTHY, ERRORS_10, SLOW) == [("none", ROLLED, 0)] * 3
    run.router = {STABLE: 50, CANARY: 50}  # someone edited the router
    assert run.period(HEALTHY).weights == {STABLE: 100, CANARY: 0}  # re-asserted
    assert run.trace(HEALTHY) == [("none", ROLLED, 0)]
    assert run.observe(HEALTHY, commands={Command.RETRY: "1"}) == START
    assert run.state.breaches == {}
    assert run.trace(ERRORS_10, ERRORS_10) == [("hold", P, 10), ("rollback", ROLLED, 0)]


@pytest.mark.parametrize(
    "periods",
    [
        pytest.param([HEALTHY, ERRORS_10, ERRORS_10], id="after-rollback"),
        pytest.param([HEALTHY] * 5, id="mid-analysis"),
        pytest.param([HEALTHY] * 17, id="after-success"),
    ],
)
def test_new_revision_restarts_the_analysis(periods: list[Obs]) -> None:
    run = Run()
    run.trace(*periods)
    run.plan = plan(revision_key="rev-2")
    assert run.trace(ERRORS_10) == [START]  # the restart period is not counted
    assert (run.state.revision_key, run.state.step_index, run.state.breaches) == ("rev-2", 0, {})
    assert run.event_reasons()[-1] == "AnalysisRestarted"
    assert run.state.history[-1].action == "restart"
    assert run.trace(ERRORS_10, ERRORS_10) == [("hold", P, 10), ("rollback", ROLLED, 0)]


def test_candidates_not_ready_hold_without_counting() -> None:
    run = Run(plan=plan(unready=(CANARY,)))
    trace = run.trace(HEALTHY, ERRORS_10, ERRORS_10, ERRORS_10)
    assert trace == [START, *[("hold", P, 10)] * 3]
    assert run.state.breaches == {}
    assert "not ready" in run.state.last_reason
    run.plan = plan()
    assert run.trace(ERRORS_10, ERRORS_10) == [("hold", P, 10), ("rollback", ROLLED, 0)]


AB = plan(strategy="abTest", initial_weights={STABLE: 50, CANARY: 50})


@pytest.mark.parametrize(
    ("periods", "expected"),
    [
        pytest.param([HEALTHY] * 12, [("restart", P, 50), *[("hold", P, 50)] * 11], id="holds"),
        pytest.param(
            [HEALTHY, ERRORS_10, ERRORS_10],
            [("restart", P, 50), ("hold", P, 50), ("rollback", ROLLED, 0)],
            id="rolls-back",
        ),
        pytest.param(
            [HEALTHY, *[SLOW] * 4],
            [("restart", P, 50), *[("hold", P, 50)] * 3, ("setWeight", P, 10)],
            id="cut-to-10",
        ),
    ],
)
def test_abtest_never_auto_steps(periods: list[Obs], expected: list[Trace]) -> None:
    assert Run(plan=AB).trace(*periods) == expected


def test_abtest_promoted_by_hand() -> None:
    run = Run(plan=AB)
    run.trace(HEALTHY, HEALTHY)
    assert run.observe(HEALTHY, commands={Command.PROMOTE: "1"}) == ("promote", DONE, 100)


def test_timed_pause_step_advances_after_its_duration() -> None:
    run = Run(plan=plan(step_weights=(10, None, 20), pause_seconds=(None, 60.0, None)))
    assert run.trace(*[HEALTHY] * 10) == [
        START,
        ("hold", P, 10),
        ("hold", P, 10),
        ("step", P, 10),  # onto the pause step
        ("hold", P, 10),  # 30 s of 60 s
        ("step", P, 20),
        ("hold", P, 20),
        ("hold", P, 20),
        ("promote", "Promoting", 100),
        ("promote", DONE, 100),
    ]


def test_open_pause_step_waits_for_resume() -> None:
    run = Run(plan=plan(step_weights=(10, None, 20), pause_seconds=(None, None, None)))
    run.trace(*[HEALTHY] * 4)
    assert run.trace(*[HEALTHY] * 3) == [("hold", P, 10)] * 3
    assert "sits.dev/resume" in run.state.last_reason
    assert run.observe(HEALTHY, commands={Command.RESUME: "go"}) == ("step", P, 20)


def test_initial_weights_start_at_the_next_heavier_step() -> None:
    run = Run(plan=plan(initial_weights={STABLE: 75, CANARY: 25}))
    assert run.trace(*[HEALTHY] * 4) == [
        ("restart", P, 25),
        *[("hold", P, 25)] * 2,
        ("step", P, 30),
    ]


TWO = plan(candidates=(CANARY, "b"), initial_weights={STABLE: 100})


def test_two_candidates_step_together() -> None:
    run = Run(plan=TWO)
    run.trace(*[Obs(others=("b",))] * 4)
    assert run.router == {STABLE: 60, CANARY: 20, "b": 20}


def test_one_failing_candidate_of_two_rolls_both_back() -> None:
    run = Run(plan=TWO)
    one_bad = Obs(success=0.9, others=("b",))
    run.trace(Obs(others=("b",)), one_bad, one_bad)
    assert run.router == {STABLE: 100, CANARY: 0, "b": 0}
    assert run.state.phase is AnalysisPhase.ROLLED_BACK
    assert "of canary" in run.state.last_reason


def test_a_silent_candidate_holds_the_others() -> None:
    run = Run(plan=TWO)
    assert run.trace(*[HEALTHY] * 5) == [START, *[("hold", P, 10)] * 4]  # "b" has no data
    assert run.state.no_data_since == T0 + 30
    run.observe(ERRORS_10)  # "canary" fails while "b" stays silent: the clock keeps running
    assert (run.state.no_data_since, run.state.consecutive_passes) == (T0 + 30, 0)


def _custom(*rules: dict[str, object]) -> Run:
    spec = {"interval": "30s", "minRequests": 20, "rules": list(rules)}
    return Run(parse_policy("custom", spec))


def _rule(name: str, action: dict[str, object], **extra: object) -> dict[str, object]:
    base = {"sli": "success_rate_5m", "query": "q", "comparison": "<", "threshold": 0.95}
    return {"name": name, "action": action, **base, **extra}


SLOW_FOR_2 = {"comparison": ">", "threshold": 200, "for": {"periods": 2}}


def test_pause_rule_pauses_and_a_rollback_rule_still_acts_while_paused() -> None:
    run = _custom(
        _rule("success-rate", {"type": "pause"}),
        _rule("latency-p95", {"type": "rollback"}, **SLOW_FOR_2),
    )
    assert run.trace(HEALTHY, ERRORS_10, SLOW, SLOW) == [
        START,
        ("pause", PAUSED, 10),
        ("hold", PAUSED, 10),
        ("rollback", ROLLED, 0),
    ]


def test_lowest_set_weight_wins_and_hold_rule_holds() -> None:
    run = _custom(
        _rule("success-rate", {"type": "setWeight", "weight": 5}),
        _rule("latency-p95", {"type": "setWeight", "weight": 8}, comparison=">", threshold=200),
    )
    assert run.trace(HEALTHY, Obs(success=0.9, p95=300)) == [START, ("setWeight", P, 5)]
    assert run.state.step_index == -1  # below step 0: the next step is back to 10 %
    held = _custom(_rule("success-rate", {"type": "hold"}))
    assert held.trace(HEALTHY, ERRORS_10, HEALTHY) == [START, ("hold", P, 10), ("hold", P, 10)]


def test_degraded_state_resumes_when_analysis_is_possible() -> None:
    state = AnalysisState(phase=AnalysisPhase.DEGRADED, revision_key="rev-1", last_period=0)
    run = Run(state=state)
    run.router = {STABLE: 80, CANARY: 20}
    assert run.trace(HEALTHY, HEALTHY) == [("resume", P, 20), ("hold", P, 20)]


def test_first_evaluation_starts_even_without_weights_read_back() -> None:
    decision = Run().period(HEALTHY, at=T0)
    assert decision.weights == {STABLE: 90, CANARY: 10}
    assert decision.state.last_period == int(T0 // 30)


@pytest.mark.parametrize(
    ("edited_to", "next_step"),
    [
        pytest.param(30, 40, id="raised-by-hand-continues-above"),
        pytest.param(10, 20, id="lowered-by-hand-continues-from-there"),
    ],
)
def test_weights_edited_at_the_router_are_where_the_canary_continues(
    edited_to: int, next_step: int
) -> None:
    """Read back before deciding: the next step is the first heavier than what traffic does."""
    run = _at_20()
    run.router = {STABLE: 100 - edited_to, CANARY: edited_to}
    traces = run.trace(*[HEALTHY] * 3)
    assert [t for t in traces if t[0] == "step"] == [("step", P, next_step)]
