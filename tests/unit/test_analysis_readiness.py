"""Candidates whose pods cannot run or never get ready (core/analysis/readiness.py).

A crash-looping candidate fails the built-in `containers` rule each period and is rolled
back after the policy's failingContainers.periods; a starting one holds up to the progress
deadline; a failing stable holds the analysis and never decides about the candidate.
Simulated time: `Run` calls `decide` once per 30 s period from T0.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sits_operator.core.containers import ANALYSIS_TAIL_CHARS, variant_failures
from sits_operator.core.rollout_plan import build_plan, progress_deadline
from sits_operator.core.rollout_summary import analysis_condition, summarize
from sits_operator.model.analysis import (
    PROGRESS_DEADLINE_ALLOWANCE_SECONDS,
    AnalysisState,
    Command,
    RolloutPlan,
    VariantFailure,
    Verdict,
)
from sits_operator.model.events import EventReason
from sits_operator.model.observed import (
    ContainerTermination,
    ObservedContainer,
    ObservedDeployment,
    ObservedPod,
    ObservedState,
)
from sits_operator.model.policy import ActionType, FailingContainers, Policy, parse_policy
from tests.unit.factories import spec, variant
from tests.unit.test_analysis_driver import (
    CANARY,
    ERRORS_10,
    HEALTHY,
    POLICY,
    PROM_DOWN,
    STABLE,
    T0,
    Obs,
    Run,
    Trace,
    plan,
)
from tests.unit.test_analysis_driver import policy as with_policy

P, PAUSED, ROLLED = "Progressing", "Paused", "RolledBack"
START: Trace = ("restart", P, 10)
LAST_WORDS = "api_server.py: error: unrecognized arguments: --max-model-lenght=8192"
CRASH = VariantFailure(
    CANARY,
    "CrashLoopBackOff",
    f"CrashLoopBackOff (pod chat-canary-7d9 container vllm, 4 restart(s), exit code 1: "
    f"{LAST_WORDS})",
)
STABLE_CRASH = replace(CRASH, variant=STABLE, detail="CrashLoopBackOff (pod chat-stable-1)")
NO_SERIES = Obs(success=None, p95=None, requests=0.0)  # a pod that never ran has no series

CRASHING = plan(unready=(CANARY,), failing=(CRASH,))
STARTING = plan(unready=(CANARY,))
READY = plan()


def run_through(
    *periods: tuple[RolloutPlan, Obs], policy: Policy = POLICY, persist: bool = False
) -> tuple[Run, list[Trace]]:
    """Play (plan, observation) pairs, one per period, after a first period that starts the
    analysis with the first pair's plan."""
    run = Run(policy, periods[0][0], persist=persist)
    traces = [run.observe(HEALTHY)]
    for each_plan, obs in periods:
        run.plan = each_plan
        traces.append(run.observe(obs))
    return run, traces


# ------------------------------------------------------------ a crash-looping candidate


@pytest.mark.parametrize(
    "obs",
    [
        pytest.param(NO_SERIES, id="no-series"),
        pytest.param(HEALTHY, id="old-samples-look-healthy"),
        pytest.param(PROM_DOWN, id="prometheus-down"),
    ],
)
def test_a_crash_looping_candidate_is_rolled_back_after_the_policy_periods(obs: Obs) -> None:
    run, trace = run_through((CRASHING, obs), (CRASHING, obs))
    assert trace == [START, ("hold", P, 10), ("rollback", ROLLED, 0)]
    first, second = run.decisions[1:]
    assert first.reason.startswith("breach not yet long enough: containers: canary: Crash")
    assert "for 1 of 2 periods" in first.reason
    [event] = second.events
    assert (event.type, event.reason) == ("Warning", "RolledBack")
    assert "canary: CrashLoopBackOff" in event.message
    assert LAST_WORDS in event.message
    assert event.message.endswith("for 2 of 2 periods")
    assert run.state.history[-1].action == "rollback"
    assert "canary: CrashLoopBackOff" in run.state.history[-1].reason


def test_the_failing_period_is_a_verdict_row_with_the_number_of_failing_containers() -> None:
    run, _ = run_through((CRASHING, NO_SERIES))
    rows = {(v.rule, v.variant): v for v in run.decisions[-1].verdicts}
    containers = rows[("containers", CANARY)]
    assert (containers.sli, containers.verdict, containers.value) == (
        "failing_containers",
        Verdict.FAIL,
        1.0,
    )
    assert rows[("containers", STABLE)].verdict is Verdict.PASS
    assert run.state.breaches["containers"].periods == 1


def test_a_healthy_rollout_has_no_containers_row() -> None:
    run, _ = run_through((READY, HEALTHY))
    assert {v.rule for v in run.decisions[-1].verdicts} == {"success-rate", "latency-p95"}
    assert run.state.breaches == {}


@pytest.mark.parametrize(
    ("periods", "expected"),
    [
        pytest.param(
            [(CRASHING, NO_SERIES), (READY, HEALTHY), (CRASHING, NO_SERIES), (READY, HEALTHY)],
            [("hold", P, 10)] * 4,
            id="recovers-before-2-each-time",
        ),
        pytest.param(
            # Between crashes the container runs, not ready yet: not counted, not forgiven.
            [(CRASHING, NO_SERIES), (STARTING, NO_SERIES), (CRASHING, NO_SERIES)],
            [("hold", P, 10), ("hold", P, 10), ("rollback", ROLLED, 0)],
            id="restarting-between-crashes-is-no-recovery",
        ),
        pytest.param(
            [(CRASHING, NO_SERIES), (READY, ERRORS_10), (CRASHING, NO_SERIES)],
            [("hold", P, 10), ("hold", P, 10), ("hold", P, 10)],
            id="each-rule-counts-its-own-breach",
        ),
    ],
)
def test_a_crash_loop_that_recovers_resets_its_count(
    periods: list[tuple[RolloutPlan, Obs]], expected: list[Trace]
) -> None:
    _, trace = run_through(*periods)
    assert trace == [START, *expected]


def test_recovery_resets_the_breach_like_a_passing_sli() -> None:
    run, _ = run_through((CRASHING, NO_SERIES), (READY, HEALTHY))
    assert run.state.breaches == {}
    pass_row = {(v.rule, v.variant): v for v in run.decisions[-1].verdicts}
    assert pass_row[("containers", CANARY)].verdict is Verdict.PASS
    run.plan = READY
    run.observe(HEALTHY)
    assert "containers" not in {v.rule for v in run.decisions[-1].verdicts}


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        pytest.param(
            FailingContainers(periods=3),
            [("hold", P, 10), ("hold", P, 10), ("rollback", ROLLED, 0)],
            id="three-periods",
        ),
        pytest.param(
            FailingContainers(periods=1, action=ActionType.PAUSE),
            [("pause", PAUSED, 10), ("hold", PAUSED, 10), ("hold", PAUSED, 10)],
            id="pause",
        ),
        pytest.param(
            FailingContainers(periods=1, action=ActionType.HOLD),
            [("hold", P, 10)] * 3,
            id="hold",
        ),
    ],
)
def test_the_policy_says_how_long_and_what(
    setting: FailingContainers, expected: list[Trace]
) -> None:
    periods = [(CRASHING, NO_SERIES)] * 3
    _, trace = run_through(*periods, policy=with_policy(failing_containers=setting))
    assert trace == [START, *expected]


def test_the_failing_count_survives_an_operator_restart() -> None:
    _, trace = run_through((CRASHING, NO_SERIES), (CRASHING, NO_SERIES), persist=True)
    assert trace[-1] == ("rollback", ROLLED, 0)


def test_a_crash_looping_candidate_rolls_back_from_any_step() -> None:
    run = Run()
    run.trace(*[HEALTHY] * 4)  # restart + 3 passes: the canary stands at 20 %
    assert run.router[CANARY] == 20
    run.plan = CRASHING
    assert run.trace(NO_SERIES, NO_SERIES) == [("hold", P, 20), ("rollback", ROLLED, 0)]


# ------------------------------------------------------------ a candidate still starting


DEADLINE = plan(unready=(CANARY,), progress_deadline_seconds=120.0)


def test_a_starting_candidate_holds_without_counting() -> None:
    run, trace = run_through(*[(STARTING, ERRORS_10)] * 3)
    assert trace == [START, *[("hold", P, 10)] * 3]
    assert run.state.breaches == {}
    assert run.state.last_reason == (
        "candidates not ready: holding, period not counted"
        " (canary without a ready pod for 90s of the 20m progress deadline)"
    )
    assert run.state.unready_since == T0  # from the restart on


def test_a_candidate_past_its_progress_deadline_is_rolled_back() -> None:
    run, trace = run_through(*[(DEADLINE, NO_SERIES)] * 4)
    assert trace == [
        START,
        ("hold", P, 10),
        ("hold", P, 10),
        ("hold", P, 10),
        ("rollback", ROLLED, 0),
    ]
    [event] = run.decisions[-1].events
    assert (event.type, event.reason) == ("Warning", EventReason.PROGRESS_DEADLINE_EXCEEDED)
    assert event.message.startswith(
        "rolled back: progress deadline exceeded: canary without a ready pod for 2m"
    )
    summary = summarize(run.state, DEADLINE, POLICY)
    assert "progress deadline exceeded: canary" in summary.text


def test_the_deadline_clock_restarts_when_the_candidate_gets_ready() -> None:
    periods = [(DEADLINE, NO_SERIES)] * 3 + [(READY, HEALTHY)] + [(DEADLINE, NO_SERIES)] * 3
    run, trace = run_through(*periods, persist=True)
    assert ("rollback", ROLLED, 0) not in trace
    assert run.state.unready_since == T0 + 5 * 30.0


def test_no_deadline_while_paused_and_resume_restarts_the_clock() -> None:
    run = Run(plan=DEADLINE)
    run.observe(HEALTHY, commands={Command.PAUSE: "look"})
    assert run.trace(*[NO_SERIES] * 6) == [("hold", PAUSED, 10)] * 6
    assert "paused: no progress deadline" in run.state.last_reason
    assert run.observe(NO_SERIES, commands={Command.PAUSE: "look", Command.RESUME: "go"})[:2] == (
        "resume",
        P,
    )
    assert run.trace(*[NO_SERIES] * 4) == [*[("hold", P, 10)] * 3, ("rollback", ROLLED, 0)]


def test_a_ready_candidate_has_no_deadline() -> None:
    run, _ = run_through(*[(plan(progress_deadline_seconds=1.0), HEALTHY)] * 3)
    assert run.state.unready_since is None
    assert run.state.phase.value == P


# ------------------------------------------------------------ a crash-looping stable


STABLE_FAILING = plan(failing=(STABLE_CRASH,))


@pytest.mark.parametrize(
    "obs",
    [
        pytest.param(HEALTHY, id="never-promotes"),
        pytest.param(ERRORS_10, id="never-rolls-back"),
    ],
)
def test_a_crash_looping_stable_holds_and_decides_nothing_about_the_candidate(obs: Obs) -> None:
    run, trace = run_through(*[(STABLE_FAILING, obs)] * 8)
    assert trace == [START, *[("hold", P, 10)] * 8]
    assert run.state.breaches == {}
    assert run.state.consecutive_passes == 0
    assert run.state.last_reason.startswith(
        "stable stable failing: CrashLoopBackOff (pod chat-stable-1): holding, period not counted"
    )
    rows = {(v.rule, v.variant): v.verdict for v in run.decisions[-1].verdicts}
    assert rows[("containers", STABLE)] is Verdict.FAIL
    assert rows[("containers", CANARY)] is Verdict.PASS


def test_a_candidate_failing_beside_a_failing_stable_is_still_rolled_back() -> None:
    both = plan(unready=(CANARY,), failing=(STABLE_CRASH, CRASH))
    _, trace = run_through((both, NO_SERIES), (both, NO_SERIES))
    assert trace[-1] == ("rollback", ROLLED, 0)


def test_the_stable_recovering_resumes_the_analysis() -> None:
    _, trace = run_through(*[(STABLE_FAILING, HEALTHY)] * 3, *[(READY, HEALTHY)] * 3)
    assert trace[-1] == ("step", P, 20)


# ------------------------------------------------------------ status words


def test_the_analysis_condition_names_the_failing_container() -> None:
    run, _ = run_through((CRASHING, NO_SERIES))
    healthy, reason, message = analysis_condition(  # type: ignore[misc]
        run.decisions[-1], CRASHING, POLICY, NO_SERIES.samples()
    )
    assert (healthy, reason) == (False, "ContainerFailing")
    assert "canary: CrashLoopBackOff" in message
    summary = summarize(run.state, CRASHING, POLICY)
    assert summary.text.endswith("containers failing for 1 of 2 periods (rollback)")


def test_the_summary_tells_how_long_a_candidate_has_been_starting() -> None:
    run, _ = run_through(*[(STARTING, NO_SERIES)] * 2)
    assert summarize(run.state, STARTING, POLICY).text == (
        "step 1 of 5 at 10 %: canary without a ready pod for 1m (progress deadline 20m)"
    )


# ------------------------------------------------------------ from observed pods to the plan


def pod(name: str, owner: str, *containers: ObservedContainer, component: str = "") -> ObservedPod:
    return ObservedPod(name, owner, "Running", containers=containers, component=component)


def deployment(name: str, ready: int) -> ObservedDeployment:
    return ObservedDeployment(name, "r", 1, ready, 1, ready, 1, 1)


CRASH_LOOP = ObservedContainer(
    "vllm",
    restart_count=4,
    waiting_reason="CrashLoopBackOff",
    last_termination=ContainerTermination(1, "Error", f"Traceback...\n{LAST_WORDS}\n", "t"),
)
CREATING = ObservedContainer("vllm", waiting_reason="ContainerCreating")
PULL = ObservedContainer("vllm", waiting_reason="ImagePullBackOff", waiting_message="not found")
RUNNING = ObservedContainer("vllm", ready=True)
SPEC = spec(variant(), variant("v2", "candidate", revision="r2", startupTimeout="10m"))


@pytest.mark.parametrize(
    ("observed", "unready", "failing"),
    [
        pytest.param(
            ObservedState(
                (), (deployment("v1", 1), deployment("v2", 0)), (pod("p2", "v2", CRASH_LOOP),)
            ),
            ("v2",),
            [
                (
                    "v2",
                    "CrashLoopBackOff",
                    "CrashLoopBackOff (pod p2 container vllm, 4 restart(s), exit code 1: "
                    f"Traceback... | {LAST_WORDS})",
                )
            ],
            id="crash-loop",
        ),
        pytest.param(
            ObservedState(
                (), (deployment("v1", 1), deployment("v2", 0)), (pod("p2", "v2", CREATING),)
            ),
            ("v2",),
            [],
            id="container-creating-is-starting",
        ),
        pytest.param(
            ObservedState((), (deployment("v1", 1), deployment("v2", 0)), (pod("p2", "v2", PULL),)),
            ("v2",),
            [("v2", "ImagePullBackOff", "ImagePullBackOff (pod p2 container vllm: not found)")],
            id="image-pull",
        ),
        pytest.param(
            ObservedState(
                (),
                (deployment("v1", 0), deployment("v2", 1)),
                (pod("p1", "v1", CRASH_LOOP), pod("p2", "v2", RUNNING)),
            ),
            (),
            [
                (
                    "v1",
                    "CrashLoopBackOff",
                    "CrashLoopBackOff (pod p1 container vllm, 4 restart(s), exit code 1: "
                    f"Traceback... | {LAST_WORDS})",
                )
            ],
            id="stable-crash-loop",
        ),
        pytest.param(
            ObservedState(
                (),
                (deployment("v1", 1), deployment("v2", 1)),
                (pod("g", "", PULL, component="gateway"),),
            ),
            (),
            [],
            id="the-gateway-is-no-variant",
        ),
    ],
)
def test_the_plan_reads_readiness_and_failures_from_the_pods(
    observed: ObservedState, unready: tuple[str, ...], failing: list[tuple[str, str, str]]
) -> None:
    built = build_plan(SPEC, observed)
    assert built.unready == unready
    assert [(f.variant, f.reason, f.detail) for f in built.failing] == failing


def test_two_failing_pods_are_counted_and_the_last_words_are_tail_truncated() -> None:
    long = replace(
        CRASH_LOOP,
        last_termination=ContainerTermination(1, "Error", "x" * 1000 + LAST_WORDS),
    )
    observed = ObservedState(pods=(pod("a", "v2", long), pod("b", "v2", PULL)))
    [failure] = variant_failures(SPEC, observed)
    assert failure.containers == 2
    assert failure.detail.endswith(f"{LAST_WORDS}; and 1 more failing container(s))")
    words = failure.detail.split("exit code 1: ")[1].split(";")[0]
    assert len(words) == ANALYSIS_TAIL_CHARS
    assert words.startswith("...")


@pytest.mark.parametrize(
    ("candidates", "expected"),
    [
        pytest.param({}, 15 * 60, id="default-startup-timeout"),
        pytest.param({"v2": "10m"}, 10 * 60, id="the-candidate-s"),
        pytest.param({"v2": "10m", "v3": "1h"}, 3600, id="the-longest-candidate"),
    ],
)
def test_the_progress_deadline_is_the_startup_budget_plus_scheduling_and_pull(
    candidates: dict[str, str], expected: float
) -> None:
    names = sorted(candidates) or ["v2"]
    variants = [
        variant(
            name,
            "candidate",
            revision=name,
            **({"startupTimeout": candidates[name]} if name in candidates else {}),
        )
        for name in names
    ]
    deployment_spec = spec(variant(startupTimeout="24h"), *variants)  # stable's never counts
    assert progress_deadline(deployment_spec) == expected + PROGRESS_DEADLINE_ALLOWANCE_SECONDS


# ------------------------------------------------------------ the policy field


def test_failing_containers_defaults_and_settings() -> None:
    rules = POLICY_RULES
    assert parse_policy("p", {"rules": rules}).failing_containers == FailingContainers(
        2, ActionType.ROLLBACK
    )
    parsed = parse_policy(
        "p", {"rules": rules, "failingContainers": {"periods": 4, "action": "pause"}}
    )
    assert parsed.failing_containers == FailingContainers(4, ActionType.PAUSE)
    rule = parsed.containers_rule
    assert (rule.name, rule.sli, rule.for_periods, rule.action.type) == (
        "containers",
        "failing_containers",
        4,
        ActionType.PAUSE,
    )
    assert POLICY.failing_containers == FailingContainers(2, ActionType.ROLLBACK)


POLICY_RULES = [
    {
        "name": "success-rate",
        "sli": "success_rate_5m",
        "query": "q",
        "comparison": "<",
        "threshold": 0.95,
        "action": {"type": "rollback"},
    }
]


def test_the_state_keeps_the_progress_clock() -> None:
    state = AnalysisState(unready_since=123.0)
    assert AnalysisState.from_dict(state.to_dict()).unready_since == 123.0
    assert AnalysisState.from_dict({"phase": "Progressing"}).unready_since is None
