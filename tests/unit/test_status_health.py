"""Status as tools read it: Ready / Reconciling / Stalled (kstatus) and status.message.

Every case goes through compute_status, the function the reconciler calls, so what is
asserted is what a SitsDeployment shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from sits_operator.core.kstatus import STALL_AFTER_SECONDS
from sits_operator.core.status import StatusInputs, StatusResult, compute_status
from sits_operator.model.observed import ObservedDeployment, ObservedState
from sits_operator.model.status import Phase, RolloutSummary
from tests.unit.factories import spec
from tests.unit.test_status import (
    CRASH_LOOP_V2,
    HEALTHY_V1,
    UNSCHEDULABLE,
    dep,
    observed,
)

NOW_S = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC).timestamp()
LONG_AGO = STALL_AFTER_SECONDS + 60  # a blocker that lasted past the deadline
READY = observed(dep("v1", 1), dep("v2", 1))
V2_PENDING = observed(dep("v1", 1), dep("v2", 0))
CRASHING = observed(dep("v1", 1), dep("v2", 0), pods=(HEALTHY_V1, CRASH_LOOP_V2))
NO_SLICE = observed(dep("v1", 1), dep("v2", 0), pods=(UNSCHEDULABLE,))
GATEWAY_PENDING = ObservedState(
    deployments=(
        dep("v1", 1),
        dep("v2", 1),
        ObservedDeployment("", None, 2, 0, 0, 0, 1, 1, component="gateway"),
    ),
)

STEP = RolloutSummary(Phase.PROGRESSING, "step 1 of 5 at 10 %", "1 of 3 passing periods")
NO_DATA_SUMMARY = RolloutSummary(
    Phase.PROGRESSING, "step 1 of 5 at 10 %", "no data for 40s of 10m, then noData.action hold"
)
PAUSED = RolloutSummary(Phase.PAUSED, "paused at step 2 of 5 at 20 %", "paused by sits.dev/pause")
PROMOTING = RolloutSummary(Phase.PROMOTING, "promoting: candidates at 100 %", "one period")
SUCCEEDED = RolloutSummary(Phase.SUCCEEDED, "succeeded: all traffic on v2", "promoted")
ROLLED_BACK = RolloutSummary(Phase.ROLLED_BACK, "rolled back: all traffic on v1", "why")
NO_POLICY = (False, "PolicyNotFound", "waiting for SitsPolicy 'p': not found")
NO_DATA = (False, "NoData", "waiting for data: v2 has 3 of 20 requests in the 5m window (s)")
QUERIES_FAIL = (False, "MetricsError", "SLI queries fail: s: refused; rollout frozen")
EVALUATING = (True, "Evaluating", "all SLIs pass")


@dataclass(frozen=True)
class Case:
    obs: ObservedState = READY
    problems: tuple[str, ...] = ()
    summary: RolloutSummary | None = None
    condition: tuple[bool, str, str] | None = None
    # Seconds the same inputs have already held (0: they are new now).
    held: float = 0.0
    previous: dict[str, Any] = field(default_factory=dict)

    def inputs(self, at: float, previous: dict[str, Any]) -> StatusInputs:
        return StatusInputs(
            generation=7,
            spec=spec(),
            problems=self.problems,
            observed=self.obs,
            previous=previous,
            now=datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            analysis_phase=None if self.summary is None else self.summary.phase.value,
            analysis_condition=self.condition,
            analysis_summary=self.summary,
            now_seconds=at,
        )

    def result(self) -> StatusResult:
        """The status now, after the same inputs held for `held` seconds."""
        first = compute_status(self.inputs(NOW_S - self.held, self.previous)).status
        return compute_status(self.inputs(NOW_S, first))


def health(status: dict[str, Any]) -> tuple[str, str, str, str]:
    """(Ready, Reconciling, Stalled, the reason of whichever speaks) of a status."""
    by_type = {c["type"]: c for c in status["conditions"]}
    ready, rec, stalled = (by_type[t] for t in ("Ready", "Reconciling", "Stalled"))
    speaking = next((c for c in (rec, stalled) if c["status"] == "True"), ready)
    return ready["status"], rec["status"], stalled["status"], speaking["reason"]


CURRENT = ("True", "False", "False")
RECONCILING = ("False", "True", "False")
STALLED = ("False", "False", "True")


@pytest.mark.parametrize(
    ("case", "standing", "reason"),
    [
        pytest.param(Case(), CURRENT, "AllVariantsReady", id="no-analysis-all-ready"),
        pytest.param(Case(obs=V2_PENDING), RECONCILING, "VariantsNotReady", id="pods-pending"),
        pytest.param(
            Case(obs=GATEWAY_PENDING), RECONCILING, "VariantsNotReady", id="gateway-pending"
        ),
        pytest.param(
            Case(summary=STEP, condition=EVALUATING),
            RECONCILING,
            "RolloutProgressing",
            id="analysis-progressing",
        ),
        pytest.param(
            Case(summary=NO_DATA_SUMMARY, condition=NO_DATA, held=LONG_AGO),
            RECONCILING,
            "RolloutProgressing",
            id="no-data-is-the-policys-business-never-stalled",
        ),
        pytest.param(Case(summary=PAUSED), RECONCILING, "Paused", id="paused"),
        pytest.param(Case(summary=PROMOTING), RECONCILING, "Promoting", id="promoting"),
        pytest.param(Case(summary=SUCCEEDED), CURRENT, "Succeeded", id="succeeded"),
        pytest.param(
            Case(summary=SUCCEEDED, obs=V2_PENDING),
            RECONCILING,
            "VariantsNotReady",
            id="succeeded-but-a-pod-is-not-ready",
        ),
        pytest.param(Case(summary=ROLLED_BACK), STALLED, "RolledBack", id="rolled-back"),
        pytest.param(
            Case(summary=ROLLED_BACK, obs=CRASHING),
            STALLED,
            "RolledBack",
            id="rolled-back-with-the-loser-crashing",
        ),
        pytest.param(Case(problems=("x: bad",)), STALLED, "InvalidSpec", id="invalid"),
        pytest.param(Case(obs=CRASHING), RECONCILING, "CrashLoopBackOff", id="crash-young"),
        pytest.param(
            Case(obs=CRASHING, held=LONG_AGO), STALLED, "CrashLoopBackOff", id="crash-persists"
        ),
        pytest.param(
            Case(obs=NO_SLICE, held=LONG_AGO),
            STALLED,
            "InsufficientGPUResources",
            id="no-gpu-slice-persists",
        ),
        pytest.param(
            Case(condition=NO_POLICY), RECONCILING, "PolicyNotFound", id="policy-missing-young"
        ),
        pytest.param(
            Case(condition=NO_POLICY, held=LONG_AGO),
            STALLED,
            "PolicyNotFound",
            id="policy-missing-persists",
        ),
        pytest.param(
            Case(summary=STEP, condition=QUERIES_FAIL, held=STALL_AFTER_SECONDS - 1),
            RECONCILING,
            "MetricsError",
            id="queries-failing-just-before-the-deadline",
        ),
        pytest.param(
            Case(summary=STEP, condition=QUERIES_FAIL, held=STALL_AFTER_SECONDS),
            STALLED,
            "MetricsError",
            id="queries-failing-at-the-deadline",
        ),
    ],
)
def test_exactly_one_of_ready_reconciling_stalled(
    case: Case, standing: tuple[str, str, str], reason: str
) -> None:
    status = case.result().status
    assert health(status) == (*standing, reason)
    for cond in status["conditions"]:
        assert cond["observedGeneration"] == 7, cond
    assert status["observedGeneration"] == 7


def test_a_young_blocker_asks_to_be_looked_at_when_it_would_stall() -> None:
    result = Case(obs=CRASHING, held=100).result()
    assert result.recheck_in == pytest.approx(STALL_AFTER_SECONDS - 100)
    assert Case().result().recheck_in is None


def test_stalled_says_since_when_and_the_blocker_message() -> None:
    status = Case(condition=NO_POLICY, held=LONG_AGO).result().status
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["message"] == (
        "Analysis since 2026-12-02T09:49:00Z: waiting for SitsPolicy 'p': not found"
    )
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PolicyNotFound")


def test_stalling_later_keeps_ready_false_since_the_blocker_appeared() -> None:
    """Reconciling -> Stalled is a new standing, but Ready stays False all along."""
    young = compute_status(Case(obs=CRASHING).inputs(NOW_S - LONG_AGO, {})).status
    old = compute_status(Case(obs=CRASHING).inputs(NOW_S, young)).status
    times = {c["type"]: c["lastTransitionTime"] for c in old["conditions"]}
    assert times["Ready"] == "2026-12-02T09:49:00Z"
    assert times["Stalled"] == "2026-12-02T10:00:00Z"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        pytest.param(Case(), "all variants ready", id="at-rest"),
        pytest.param(
            Case(obs=V2_PENDING), "waiting for pods to be Ready: v2 0/1 ready", id="pods-pending"
        ),
        pytest.param(
            Case(obs=GATEWAY_PENDING),
            "waiting for pods to be Ready: gateway 0/2 ready",
            id="gateway-pending",
        ),
        pytest.param(
            Case(condition=NO_POLICY), "waiting for SitsPolicy 'p': not found", id="no-policy"
        ),
        pytest.param(
            Case(condition=NO_POLICY, obs=V2_PENDING),
            "waiting for SitsPolicy 'p': not found; waiting for pods to be Ready: v2 0/1 ready",
            id="no-policy-and-pods-pending",
        ),
        pytest.param(
            Case(summary=STEP, condition=EVALUATING),
            "step 1 of 5 at 10 %: 1 of 3 passing periods",
            id="counting-passes",
        ),
        pytest.param(
            Case(summary=STEP, obs=V2_PENDING),
            "step 1 of 5 at 10 %: waiting for pods to be Ready: v2 0/1 ready",
            id="waiting-for-candidates",
        ),
        pytest.param(
            Case(summary=NO_DATA_SUMMARY, condition=NO_DATA),
            "step 1 of 5 at 10 %: waiting for data: v2 has 3 of 20 requests in the 5m window (s)"
            "; no data for 40s of 10m, then noData.action hold",
            id="waiting-for-data",
        ),
        pytest.param(
            Case(summary=STEP, condition=QUERIES_FAIL),
            "step 1 of 5 at 10 %: SLI queries fail: s: refused; rollout frozen",
            id="queries-failing",
        ),
        pytest.param(
            Case(summary=PAUSED, condition=NO_DATA),
            "paused at step 2 of 5 at 20 %: paused by sits.dev/pause",
            id="paused-says-why-it-is-paused",
        ),
        pytest.param(
            Case(summary=ROLLED_BACK, obs=CRASHING),
            "rolled back: all traffic on v1: why",
            id="rolled-back-wins-over-the-losers-crash",
        ),
        pytest.param(
            Case(summary=STEP, obs=CRASHING),
            None,  # None: the failing container's own message, checked below
            id="degraded-shows-the-failing-container",
        ),
        pytest.param(Case(problems=("x: bad",), summary=STEP), "x: bad", id="invalid"),
    ],
)
def test_message_says_what_the_rollout_waits_for(case: Case, message: str | None) -> None:
    status = case.result().status
    assert status["message"], "never empty"
    if message is None:
        failing = next(c for c in status["conditions"] if c["type"] == "ContainersFailing")
        assert status["message"] == failing["message"]
    else:
        assert status["message"] == message


@pytest.mark.parametrize(
    ("case", "phase"),
    [
        pytest.param(Case(summary=ROLLED_BACK, obs=CRASHING), "RolledBack", id="rolled-back"),
        pytest.param(Case(summary=STEP, obs=CRASHING), "Degraded", id="degraded-mid-rollout"),
        pytest.param(Case(summary=PAUSED), "Paused", id="paused"),
        pytest.param(Case(obs=V2_PENDING), "Progressing", id="pods"),
        pytest.param(Case(), "Ready", id="ready"),
    ],
)
def test_phase(case: Case, phase: str) -> None:
    assert case.result().status["phase"] == phase


def test_unchanged_inputs_later_change_nothing_so_nothing_is_written() -> None:
    """The words and conditions do not move with the clock before a deadline."""
    case = Case(summary=NO_DATA_SUMMARY, condition=NO_DATA)
    first = compute_status(case.inputs(NOW_S, {})).status
    again = compute_status(case.inputs(NOW_S + 50, first))
    assert not again.differs_from(first)
