"""Table-driven tests of the child plan (what to apply, what to delete)."""

from __future__ import annotations

import pytest

from sits_operator.core import naming
from sits_operator.core.plan import ChildKey, plan_children
from sits_operator.core.render import render_children
from sits_operator.model.observed import ObservedChild
from sits_operator.model.settings import OperatorSettings
from tests.unit.factories import OWNER, spec

DESIRED = render_children(OWNER, spec(), OperatorSettings())
HASHES = {
    (m["kind"], m["metadata"]["name"]): m["metadata"]["annotations"][
        naming.ANNOTATION_TEMPLATE_HASH
    ]
    for m in DESIRED
}


def _observed(
    *keys: tuple[str, str], stale: frozenset[str] = frozenset()
) -> tuple[ObservedChild, ...]:
    return tuple(
        ObservedChild(kind, name, None, "old" if name in stale else HASHES.get((kind, name), "x"))
        for kind, name in keys
    )


ALL = tuple(HASHES)


@pytest.mark.parametrize(
    ("observed", "apply", "delete"),
    [
        pytest.param((), [f"{k}/{n}" for k, n in ALL], [], id="fresh-creates-all"),
        pytest.param(_observed(*ALL), [], [], id="converged-writes-nothing"),
        pytest.param(
            _observed(*ALL, stale=frozenset({"chat-v2"})),
            ["Deployment/chat-v2", "Service/chat-v2"],
            [],
            id="stale-hash-reapplied",
        ),
        pytest.param(
            _observed(*[k for k in ALL if k != ("Service", "chat")]),
            ["Service/chat"],
            [],
            id="missing-recreated",
        ),
        pytest.param(
            _observed(*ALL, ("Deployment", "chat-v3"), ("Service", "chat-v3")),
            [],
            ["Deployment/chat-v3", "Service/chat-v3"],
            id="removed-variant-deleted",
        ),
    ],
)
def test_plan(observed: tuple[ObservedChild, ...], apply: list[str], delete: list[str]) -> None:
    plan = plan_children(DESIRED, observed)
    assert [f"{m['kind']}/{m['metadata']['name']}" for m in plan.apply] == apply
    assert [f"{k.kind}/{k.name}" for k in plan.delete] == delete
    assert plan.empty == (not apply and not delete)


def test_delete_order_is_deterministic() -> None:
    plan = plan_children(DESIRED, _observed(*ALL, ("Service", "chat-z"), ("Deployment", "chat-a")))
    assert plan.delete == (ChildKey("Deployment", "chat-a"), ChildKey("Service", "chat-z"))
