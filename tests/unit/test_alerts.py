"""The alert receiver: what an alert asks for, whether it may be acted on, who may ask."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web import Application

from sits_operator.adapters.alert_webhook import PATH, AlertReceiver, TokenFile
from sits_operator.core.alerts import AlertAction, AlertTarget, authorized, judge, targets_of


def alert(status: str = "firing", **labels: str) -> dict[str, Any]:
    return {"status": status, "labels": labels, "fingerprint": "f00"}


def test_targets_name_a_deployment_and_the_variant() -> None:
    payload = {
        "alerts": [
            alert(alertname="Burn", namespace="ns", sits_deployment="chat", variant="v2"),
            alert(alertname="Other", namespace="ns"),  # names no SitsDeployment
            alert("resolved", alertname="Old", namespace="ns", sits_deployment="chat"),
            alert(alertname="Plain", namespace="ns", sits_deployment="chat"),
        ]
    }
    assert targets_of(payload) == [
        AlertTarget("ns", "chat", "Burn", "alert:Burn:f00", "v2"),
        AlertTarget("ns", "chat", "Plain", "alert:Plain:f00", ""),
    ]


@pytest.mark.parametrize(
    "payload",
    [None, [], {"alerts": "x"}, {"alerts": [1]}, {"alerts": [{"labels": "x"}]}],
)
def test_malformed_payloads_are_value_errors(payload: Any) -> None:
    with pytest.raises(ValueError, match=r"Alertmanager webhook payload|'labels' object"):
        targets_of(payload)


def body(phase: str, **roles: str) -> dict[str, Any]:
    rows = [{"name": name, "role": role} for name, role in roles.items()]
    return {"status": {"phase": phase, "variants": rows}}


TARGET = AlertTarget("ns", "chat", "Burn", "alert:Burn:1", "v2")


@pytest.mark.parametrize(
    ("target", "obj", "action", "why"),
    [
        (TARGET, None, AlertAction.NOT_FOUND, "no SitsDeployment ns/chat"),
        (
            TARGET,
            body("Progressing", v1="stable", v2="candidate"),
            AlertAction.ROLL_BACK,
            "candidate v2",
        ),
        (TARGET, body("Paused", v1="stable", v2="candidate"), AlertAction.ROLL_BACK, "candidate"),
        (
            TARGET,
            body("Promoting", v1="stable", v2="candidate"),
            AlertAction.ROLL_BACK,
            "candidate",
        ),
        # An SLO alert on the stable variant must not roll the candidate back.
        (
            AlertTarget("ns", "chat", "Burn", "v", "v1"),
            body("Progressing", v1="stable", v2="candidate"),
            AlertAction.IGNORE,
            "v1 of ns/chat is stable",
        ),
        (
            TARGET,
            body("RolledBack", v1="stable", v2="candidate"),
            AlertAction.IGNORE,
            "ns/chat is RolledBack",
        ),
        (TARGET, body("Ready", v1="stable"), AlertAction.IGNORE, "has no variant 'v2'"),
        # No variant label: the alert is about the whole rollout (as before).
        (
            AlertTarget("ns", "chat", "Burn", "v"),
            body("Ready", v1="stable"),
            AlertAction.ROLL_BACK,
            "names ns/chat",
        ),
    ],
)
def test_judge(target: AlertTarget, obj: Any, action: AlertAction, why: str) -> None:
    got, message = judge(target, obj)
    assert got is action
    assert why in message


@pytest.mark.parametrize(
    ("header", "token", "ok"),
    [
        ("Bearer s3cret", "s3cret", True),
        ("bearer s3cret", "s3cret", True),
        ("Bearer wrong", "s3cret", False),
        ("Basic s3cret", "s3cret", False),
        ("s3cret", "s3cret", False),
        (None, "s3cret", False),
        ("Bearer ", "", False),  # an empty token never opens the door
    ],
)
def test_authorized(header: str | None, token: str, ok: bool) -> None:
    assert authorized(header, token) is ok


def test_the_token_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    token = TokenFile(path)
    assert token.token() == "one"
    path.write_text("two\n")
    os.utime(path, (1, 1))  # a new modification time, as a rotated Secret volume has
    assert token.token() == "two"
    path.unlink()
    assert token.token() == "", "an unreadable token file refuses everything"


class NoApi:
    """Fails the test if the receiver reaches the Kubernetes API."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the API was called ({name}) for a refused request")


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer nope"}, 401), ({"Authorization": "Bearer s3"}, 422)],
)
async def test_requests_without_the_token_are_refused_before_anything(
    tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    (tmp_path / "token").write_text("s3")
    receiver = AlertReceiver(NoApi(), TokenFile(tmp_path / "token"))  # type: ignore[arg-type]
    app = Application()
    app.router.add_post(PATH, receiver.handle)
    async with TestClient(TestServer(app)) as http:
        payload = {"alerts": [alert(alertname="X", namespace="ns")]}  # names no deployment
        response = await http.post(PATH, json=payload, headers=headers)
        assert response.status == status
        if status == 401:
            assert "bearer" in (await response.json())["error"]


async def test_an_alert_about_an_unwatched_namespace_is_not_found_without_the_api() -> None:
    """A namespaced install (--namespace team-a) may not read other namespaces: an alert
    naming one is answered 404 at once, never with the API's 403."""
    receiver = AlertReceiver(NoApi(), namespaces=("team-a",))  # type: ignore[arg-type]
    app = Application()
    app.router.add_post(PATH, receiver.handle)
    async with TestClient(TestServer(app)) as http:
        payload = {"alerts": [alert(alertname="Burn", namespace="team-b", sits_deployment="chat")]}
        response = await http.post(PATH, json=payload)
        assert response.status == 404
        assert (await response.json())["notFound"] == [
            "team-b/chat: namespace team-b is not watched by this operator"
        ]
