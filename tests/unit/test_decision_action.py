"""One word per concept: what a policy prescribes is recorded under the same word when the
analysis carries it out (model/analysis.py, DecisionAction)."""

from __future__ import annotations

from enum import StrEnum

import pytest

from sits_operator.model.analysis import AnalysisState, DecisionAction, HistoryEntry
from sits_operator.model.policy import ActionType, ErrorAction, NoDataAction


@pytest.mark.parametrize("prescription", [ActionType, NoDataAction, ErrorAction])
def test_every_policy_action_is_a_decision_action(prescription: type[StrEnum]) -> None:
    assert {m.value for m in prescription} <= {a.value for a in DecisionAction}


def test_actions_are_stored_as_plain_strings_and_read_back_as_members() -> None:
    state = AnalysisState(
        last_action=DecisionAction.SCALE_DOWN,
        history=(HistoryEntry(1.0, DecisionAction.SET_WEIGHT, "cut", {"v1": 90, "v2": 10}),),
    )
    raw = state.to_dict()
    assert (raw["lastAction"], raw["history"][0]["action"]) == ("scaleDown", "setWeight")
    assert type(raw["lastAction"]) is str
    back = AnalysisState.from_dict(raw)
    assert back.last_action is DecisionAction.SCALE_DOWN
    assert back.history[0].action is DecisionAction.SET_WEIGHT


def test_a_fresh_state_has_no_last_action() -> None:
    assert AnalysisState().to_dict()["lastAction"] == ""
    assert AnalysisState.from_dict({"lastAction": ""}).last_action is None
