"""`kubectl-sits` end to end against the fake apiserver: what a user sees and the exit codes."""

from __future__ import annotations

import asyncio
import io
import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from sits_kubectl.app import main, run
from sits_kubectl.cli import parse
from sits_operator.model.analysis import Command, command_annotation
from tests.unit.kubectl_sits_apiserver import FakeApiserver, changed
from tests.unit.kubectl_sits_apiserver import apiserver as apiserver  # the fixture

Server = tuple[FakeApiserver, Path]


def console(*, terminal: bool = False) -> Console:
    return Console(file=io.StringIO(), width=160, force_terminal=terminal, color_system=None)


def printed(out: Console) -> str:
    return str(out.file.getvalue())  # type: ignore[attr-defined]


async def invoke(server: Server, *argv: str, terminal: bool = False) -> str:
    _, kubeconfig = server
    out = console(terminal=terminal)
    assert await run(parse([*argv, "--kubeconfig", str(kubeconfig)]), out) == 0
    return printed(out)


async def test_get_prints_the_tree(apiserver: Server) -> None:
    screen = await invoke(apiserver, "get", "chat")
    assert "◌ Progressing" in screen
    assert "chat-v2-6f8b4d9c7-k7q4m" in screen
    assert "breach < 0.95 for 2 periods -> rollback" in screen


async def test_get_json_is_the_object(apiserver: Server) -> None:
    fake, _ = apiserver
    fake.obj["metadata"]["managedFields"] = [{"manager": "sits-operator"}]
    shown = json.loads(await invoke(apiserver, "get", "chat", "-o", "json"))
    assert shown["status"] == fake.obj["status"]
    assert "managedFields" not in shown["metadata"]


async def test_abort_sets_the_annotation_and_says_so(apiserver: Server) -> None:
    fake, _ = apiserver
    said = await invoke(apiserver, "abort", "chat")
    key = command_annotation(Command.ABORT)
    value = fake.obj["metadata"]["annotations"][key]
    assert f'sitsdeployment "chat" in namespace "sits-demo": set {key}={value}' in said
    assert len(fake.patches) == 1


async def test_explain_prints_the_decision(apiserver: Server) -> None:
    said = await invoke(apiserver, "explain", "chat")
    assert "Decision:   hold" in said
    assert "promotion.consecutivePasses 3" in said


async def watch_until(
    server: Server, argv: list[str], done: Callable[[str], bool], *, terminal: bool = False
) -> str:
    """Run a watch until its output satisfies `done`, then stop it as Ctrl-C would."""
    _, kubeconfig = server
    out = console(terminal=terminal)
    task = asyncio.create_task(run(parse([*argv, "--kubeconfig", str(kubeconfig)]), out))
    async with asyncio.timeout(10):
        while not done(printed(out)):
            assert not task.done(), printed(out)
            await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return printed(out)


@pytest.mark.parametrize("terminal", [False, True])
async def test_watch_redraws_on_a_change(apiserver: Server, terminal: bool) -> None:
    fake, _ = apiserver
    fake.object_watches = [[{"type": "MODIFIED", "object": changed(fake.obj, "Paused", "4713")}]]
    screen = await watch_until(
        apiserver, ["get", "chat", "--watch"], lambda out: "॥ Paused" in out, terminal=terminal
    )
    assert screen.index("◌ Progressing") < screen.index("॥ Paused")
    assert "watching sitsdeployment/chat: redrawn on every change, Ctrl-C stops" in screen


async def test_watch_json_prints_one_document_per_version(apiserver: Server) -> None:
    fake, _ = apiserver
    fake.object_watches = [[{"type": "MODIFIED", "object": changed(fake.obj, "Paused", "4713")}]]
    out = await watch_until(
        apiserver, ["get", "chat", "-w", "-o", "json"], lambda out: "Paused" in out
    )
    decoder, documents, at = json.JSONDecoder(), [], 0
    while at < len(out.strip()):
        document, at = decoder.raw_decode(out, at)
        documents.append(document)
        at += len(out[at:]) - len(out[at:].lstrip())
    assert [d["status"]["phase"] for d in documents] == ["Progressing", "Paused"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_main_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [
                    {"name": "k", "cluster": {"server": f"http://127.0.0.1:{closed_port()}"}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            }
        )
    )
    assert main(["get", "chat", "--kubeconfig", str(kubeconfig)]) == 1
    assert "error: cannot reach the apiserver at http://127.0.0.1:" in capsys.readouterr().err
    assert main(["get", "chat", "--kubeconfig", str(tmp_path / "none")]) == 1
    assert "error: no kubeconfig at" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["get"])
    assert usage.value.code == 2
