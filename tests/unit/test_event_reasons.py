"""One word per concept: every Kubernetes Event reason the operator posts is an
`EventReason` (model/events.py), and its value is the string the events always had."""

from __future__ import annotations

import pytest

from sits_operator.core import notifications
from sits_operator.model.events import CONDITION_FLIPS, EventReason, condition_flipped
from sits_operator.model.notifications import NotificationKind
from sits_operator.model.status import ConditionReason, ConditionType


def test_every_condition_type_has_a_flip_reason_per_status() -> None:
    expected = {f"{kind.value}{status}" for kind in ConditionType for status in ("True", "False")}
    assert {reason.value for reason in CONDITION_FLIPS} == expected


@pytest.mark.parametrize(
    ("type_", "status", "reason"),
    [
        (ConditionType.READY, "False", EventReason.READY_FALSE),
        (ConditionType.TRAFFIC_APPLIED, "True", EventReason.TRAFFIC_APPLIED_TRUE),
        (ConditionType.CONTAINERS_FAILING, "True", EventReason.CONTAINERS_FAILING_TRUE),
    ],
)
def test_a_flip_is_named_type_then_status(
    type_: ConditionType, status: str, reason: EventReason
) -> None:
    assert condition_flipped(type_.value, status) is reason


def test_a_status_the_operator_never_sets_is_no_reason() -> None:
    with pytest.raises(ValueError, match="ReadyUnknown"):
        condition_flipped(ConditionType.READY.value, "Unknown")


@pytest.mark.parametrize(
    ("reason", "condition_reason"),
    [
        (EventReason.REFERENCE_GRANT_MISSING, ConditionReason.REFERENCE_GRANT_MISSING),
        (EventReason.NO_DATA, ConditionReason.NO_DATA),
        (EventReason.PAUSED, ConditionReason.PAUSED),
        (EventReason.ROLLED_BACK, ConditionReason.ROLLED_BACK),
        (EventReason.PROMOTING, ConditionReason.PROMOTING),
    ],
)
def test_shared_words_keep_their_strings_but_not_their_concept(
    reason: EventReason, condition_reason: ConditionReason
) -> None:
    assert reason.value == condition_reason.value  # the same word, two enums: an event
    # reason is not a condition reason, and neither is folded into the other


def test_every_reason_has_a_notification_kind() -> None:
    kinds = {notifications.classify(reason) for reason in EventReason}
    assert kinds == set(NotificationKind)
