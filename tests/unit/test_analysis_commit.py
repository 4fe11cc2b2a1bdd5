"""A terminal outcome committed in Git is the same state; a new revision is a new rollout.

After Succeeded the natural commit names the promoted candidate stable (the old stable
kept as a zero-weight candidate, or removed); after RolledBack it removes the loser.
`spec_change` tells those from a real new revision, and `decide` adopts them: no restart,
no weight moved.
"""

from __future__ import annotations

import pytest

from sits_operator.core.analysis.identity import SpecChange, spec_change
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Command,
    RolloutPlan,
    VariantRevision,
    format_revision_key,
    parse_revision_key,
)
from sits_operator.model.spec import Role
from tests.unit.test_analysis_driver import ERRORS_10, HEALTHY, T0, Run, plan

DONE, ROLLED, P = AnalysisPhase.SUCCEEDED, AnalysisPhase.ROLLED_BACK, AnalysisPhase.PROGRESSING


def key(*parts: str) -> str:
    """key("v1:stable:a", "v2:candidate:b"): a revision key from its parts."""
    return format_revision_key(
        VariantRevision(n, Role(r), rev) for n, r, rev in (p.split(":") for p in parts)
    )


V1, V2, V3 = "v1:stable:a", "v2:candidate:b", "v3:candidate:c"
BEFORE = key(V1, V2)
PROMOTED = {"v1": 0, "v2": 100}
ROLLED_WEIGHTS = {"v1": 100, "v2": 0}


def state(
    phase: AnalysisPhase, weights: dict[str, int], revision_key: str = BEFORE
) -> AnalysisState:
    return AnalysisState(phase=phase, revision_key=revision_key, weights=weights)


@pytest.mark.parametrize(
    ("stored", "new_key", "expected"),
    [
        pytest.param(state(DONE, PROMOTED), BEFORE, SpecChange.SAME, id="unchanged"),
        pytest.param(
            state(DONE, PROMOTED),
            key("v1:candidate:a", "v2:stable:b"),
            SpecChange.COMMITTED,
            id="succeeded-roles-swapped",
        ),
        pytest.param(
            state(DONE, PROMOTED),
            key("v2:stable:b"),
            SpecChange.COMMITTED,
            id="succeeded-old-stable-removed",
        ),
        pytest.param(
            state(DONE, PROMOTED),
            key("v2:stable:b", "v1:candidate:a2"),
            SpecChange.NEW,
            id="succeeded-old-stable-comes-back-as-a-new-revision",
        ),
        pytest.param(
            state(DONE, PROMOTED),
            key("v2:stable:b2"),
            SpecChange.NEW,
            id="promoted-revision-bumped",
        ),
        pytest.param(
            state(DONE, PROMOTED),
            key("v2:stable:b", V3),
            SpecChange.NEW,
            id="succeeded-and-a-new-candidate-in-the-same-commit",
        ),
        pytest.param(
            state(DONE, PROMOTED),
            key(V1),
            SpecChange.NEW,
            id="succeeded-but-the-promoted-variant-removed",
        ),
        pytest.param(
            state(DONE, {"v1": 0, "v2": 50, "v3": 50}, key(V1, V2, V3)),
            key("v2:stable:b", V3),
            SpecChange.COMMITTED,
            id="two-promoted-one-named-stable",
        ),
        pytest.param(
            state(DONE, {"v1": 0, "v2": 50, "v3": 50}, key(V1, V2, V3)),
            key("v2:stable:b"),
            SpecChange.NEW,
            id="a-promoted-variant-with-traffic-removed",
        ),
        pytest.param(
            state(ROLLED, ROLLED_WEIGHTS),
            key(V1),
            SpecChange.COMMITTED,
            id="rolled-back-loser-removed",
        ),
        pytest.param(
            state(ROLLED, {"v1": 100, "v2": 0, "v3": 0}, key(V1, V2, V3)),
            key(V1, V3),
            SpecChange.COMMITTED,
            id="rolled-back-one-of-two-losers-removed",
        ),
        pytest.param(
            state(ROLLED, ROLLED_WEIGHTS),
            key("v1:candidate:a", "v2:stable:b"),
            SpecChange.NEW,
            id="rolled-back-loser-named-stable",
        ),
        pytest.param(
            state(ROLLED, ROLLED_WEIGHTS),
            key(V1, "v2:candidate:b2"),
            SpecChange.NEW,
            id="rolled-back-candidate-fixed",
        ),
        pytest.param(
            state(P, {"v1": 80, "v2": 20}),
            key("v1:candidate:a", "v2:stable:b"),
            SpecChange.NEW,
            id="roles-swapped-mid-rollout",
        ),
        pytest.param(
            state(AnalysisPhase.PAUSED, {"v1": 80, "v2": 20}),
            key(V1),
            SpecChange.NEW,
            id="candidate-removed-while-paused",
        ),
        pytest.param(
            state(DONE, PROMOTED, "rev-1"), key("v2:stable:b"), SpecChange.NEW, id="opaque-old-key"
        ),
        pytest.param(AnalysisState(), BEFORE, SpecChange.NEW, id="first-analysis"),
    ],
)
def test_spec_change(stored: AnalysisState, new_key: str, expected: SpecChange) -> None:
    assert spec_change(stored, new_key) is expected


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        pytest.param(
            "v1:stable:a,v2:candidate:b.1",
            (VariantRevision("v1", Role.STABLE, "a"), VariantRevision("v2", Role.CANDIDATE, "b.1")),
            id="two",
        ),
        pytest.param("", None, id="empty"),
        pytest.param("rev-1", None, id="opaque"),
        pytest.param("v1:canary:a", None, id="unknown-role"),
    ],
)
def test_revision_key_parses_what_it_formats(
    text: str, parsed: tuple[VariantRevision, ...] | None
) -> None:
    assert parse_revision_key(text) == parsed
    if parsed is not None:
        assert format_revision_key(parsed) == text


def variants_plan(*parts: str, **changes: object) -> RolloutPlan:
    """A plan of the variants in `parts` ("name:role:revision"), sits2026's steps."""
    roles = [p.split(":") for p in parts]
    return plan(
        stable=next(n for n, r, _ in roles if r == "stable"),
        candidates=tuple(n for n, r, _ in roles if r == "candidate"),
        revision_key=key(*parts),
        initial_weights={},
        **changes,
    )


def finished(command: Command, *parts: str, persist: bool = False) -> Run:
    """A run of `parts` that reached its terminal phase by `command` (promote or abort)."""
    run = Run(plan=variants_plan(*parts), persist=persist)
    run.period(HEALTHY)
    run.period(HEALTHY, commands={command: "1"})
    return run


@pytest.mark.parametrize(
    ("command", "parts", "committed", "weights", "event"),
    [
        pytest.param(
            Command.PROMOTE,
            (V1, V2),
            ("v2:stable:b", "v1:candidate:a"),
            {"v2": 100, "v1": 0},
            "PromotionCommitted",
            id="promotion-roles-swapped",
        ),
        pytest.param(
            Command.PROMOTE,
            (V1, V2),
            ("v2:stable:b",),
            {"v2": 100},
            "PromotionCommitted",
            id="promotion-old-stable-removed",
        ),
        pytest.param(
            Command.ABORT,
            (V1, V2, V3),
            (V1, V3),
            {"v1": 100, "v3": 0},
            "RollbackCommitted",
            id="rollback-one-loser-removed",
        ),
    ],
)
@pytest.mark.parametrize("persist", [False, True], ids=["same-process", "operator-restarted"])
def test_a_committed_outcome_is_adopted_not_restarted(
    command: Command,
    parts: tuple[str, ...],
    committed: tuple[str, ...],
    weights: dict[str, int],
    event: str,
    persist: bool,
) -> None:
    run = finished(command, *parts, persist=persist)
    phase, step = run.state.phase, run.state.step_index
    run.plan = variants_plan(*committed)
    decision = run.period(HEALTHY, commands={command: "1"})
    assert (decision.action, decision.state.phase) == ("adopt", phase)
    assert decision.state.weights == weights
    assert decision.state.revision_key == run.plan.revision_key
    assert decision.state.step_index == step
    assert [e.reason for e in decision.events] == [event]
    assert "analysis, weights and pods unchanged" in decision.events[0].message
    later = run.period(ERRORS_10, commands={command: "1"})
    assert (later.action, later.state.phase, later.events) == ("none", phase, ())
    actions: list[str] = [h.action for h in run.state.history]
    assert (actions.count("restart"), actions[-1]) == (1, "adopt"), "only the first start"


def test_the_adopt_event_says_what_the_commit_did() -> None:
    run = finished(Command.PROMOTE, V1, V2)
    run.plan = variants_plan("v2:stable:b")
    (event,) = run.period(HEALTHY, commands={Command.PROMOTE: "1"}).events
    assert event.message.startswith("spec names v2 the stable, v1 removed: the promotion")


def test_a_new_candidate_after_the_commit_starts_a_new_analysis() -> None:
    run = finished(Command.PROMOTE, V1, V2)
    run.plan = variants_plan("v2:stable:b")
    run.period(HEALTHY, commands={Command.PROMOTE: "1"})
    # v1 back: a variant the adopted analysis no longer knows (its key is v2 alone).
    run.plan = variants_plan("v2:stable:b", "v1:candidate:a")
    decision = run.period(HEALTHY, commands={Command.PROMOTE: "1"})
    assert (decision.action, decision.state.phase) == ("restart", P)
    assert decision.events[-1].reason == "AnalysisRestarted"


def test_a_commit_with_a_new_revision_restarts_at_the_initial_weights() -> None:
    run = finished(Command.PROMOTE, V1, V2)
    run.plan = variants_plan("v2:stable:b", "v1:candidate:a2")
    decision = run.period(HEALTHY, commands={Command.PROMOTE: "1"})
    assert (decision.action, decision.state.phase) == ("restart", P)
    assert decision.state.weights == {"v2": 90, "v1": 10}


def test_a_commit_arriving_with_a_new_command_does_both() -> None:
    run = finished(Command.ABORT, V1, V2, V3)
    run.plan = variants_plan(V1, V3)
    decision = run.period(HEALTHY, commands={Command.ABORT: "1", Command.RETRY: "1"})
    assert [e.reason for e in decision.events] == ["RollbackCommitted", "Retry"]
    assert (decision.state.phase, decision.state.revision_key) == (P, key(V1, V3))


def test_the_first_evaluation_is_still_a_start() -> None:
    run = Run(plan=variants_plan(V1, V2))
    decision = run.period(HEALTHY, at=T0)
    assert (decision.action, decision.events[0].reason) == ("restart", "AnalysisStarted")
