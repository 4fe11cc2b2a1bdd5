"""`kubectl sits` argument parsing: kubectl's flags anywhere, one subcommand, help per command."""

from __future__ import annotations

import pytest

from sits_kubectl.cli import EXPLAIN, GET, Invocation, parse
from sits_kubectl.connection import Connection
from sits_operator.model.analysis import Command


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["get", "chat"], Invocation(GET, "chat", Connection())),
        (
            ["get", "chat", "-w", "-o", "yaml"],
            Invocation(GET, "chat", Connection(), watch=True, output="yaml"),
        ),
        (["-n", "prod", "get", "chat"], Invocation(GET, "chat", Connection(namespace="prod"))),
        (
            ["get", "chat", "--namespace=prod", "--watch", "--output=json"],
            Invocation(GET, "chat", Connection(namespace="prod"), watch=True, output="json"),
        ),
        (
            ["--context", "lab", "get", "chat", "--kubeconfig", "/k/config"],
            Invocation(GET, "chat", Connection(kubeconfig="/k/config", context="lab")),
        ),
        (["-n", "a", "get", "chat", "-n", "b"], Invocation(GET, "chat", Connection(namespace="b"))),
        (["explain", "chat", "-n", "x"], Invocation(EXPLAIN, "chat", Connection(namespace="x"))),
        (
            ["abort", "chat", "--as", "jane", "--as-group", "sre"],
            Invocation("abort", "chat", Connection(as_user="jane", as_group="sre")),
        ),
        (["retry", "chat"], Invocation("retry", "chat", Connection())),
    ],
)
def test_parse(argv: list[str], expected: Invocation) -> None:
    assert parse(argv) == expected


@pytest.mark.parametrize("command", list(Command))
def test_every_manual_command_is_a_subcommand(command: Command) -> None:
    invocation = parse([command.value, "chat"])
    assert invocation.manual is command
    assert parse(["get", "chat"]).manual is None


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["get"], "the following arguments are required: NAME"),
        (["get", "chat", "-o", "wide"], "invalid choice: 'wide'"),
        (["frobnicate", "chat"], "invalid choice: 'frobnicate'"),
        (["abort", "chat", "--watch"], "unrecognized arguments: --watch"),
        (["get", "chat", "--as-group", "a", "--as-group", "b"], "--as-group: one group only"),
    ],
)
def test_mistakes_exit_2_with_usage(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "usage: kubectl sits" in err
    assert complaint in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--help"], ["usage: kubectl sits", "get", "explain", "promote", "retry"]),
        (["get", "--help"], ["usage: kubectl sits get", "--watch", "{json,yaml}", "--context"]),
        (["explain", "-h"], ["usage: kubectl sits explain", "which rule"]),
        (["abort", "--help"], ["usage: kubectl sits abort", "sits.dev/abort", "RolledBack"]),
        (["pause", "--help"], ["sits.dev/pause", "rules that roll back still act"]),
    ],
)
def test_help_per_subcommand(
    argv: list[str], says: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for text in says:
        assert text in out
