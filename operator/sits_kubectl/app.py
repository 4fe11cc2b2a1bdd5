"""`kubectl-sits`: parse, connect with the user's kubeconfig, show or set, exit.

Exit status: 0 done, 1 refused or failed (one paragraph on stderr), 2 usage (argparse),
130 stopped by Ctrl-C (as kubectl's own watch ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from sits_kubectl import explain_screen, get_screen
from sits_kubectl.cli import EXPLAIN, Invocation, parse
from sits_kubectl.commands import command_value, confirmation
from sits_kubectl.explain import explain
from sits_kubectl.kube import KubeError, Session, open_session
from sits_kubectl.output import document
from sits_kubectl.snapshot import Snapshot
from sits_kubectl.view import build

# A watch redraws at once on every change, and once a second for the ages it shows.
TICK_SECONDS = 1.0


# Without a terminal (a pipe, a file) nothing says how wide the reader is: lines as long
# as a wide terminal's rather than rich's 80 columns, so that rows stay whole for grep.
PIPE_COLUMNS = 200


def terminal(*, stderr: bool = False) -> Console:
    """stdout (or stderr) as rich sees it; COLUMNS, when set, decides the width."""
    screen = Console(highlight=False, stderr=stderr)
    if not screen.is_terminal and "COLUMNS" not in os.environ:
        screen = Console(highlight=False, stderr=stderr, width=PIPE_COLUMNS)
    return screen


def main(argv: Sequence[str] | None = None) -> int:
    invocation = parse(sys.argv[1:] if argv is None else argv)
    try:
        return asyncio.run(run(invocation, terminal()))
    except KubeError as exc:
        terminal(stderr=True).print(Text(f"error: {exc}", style="red"))
        return 1
    except KeyboardInterrupt:
        return 130


async def run(invocation: Invocation, console: Console) -> int:
    session = await open_session(invocation.connection)
    try:
        command = invocation.manual
        if command is not None:
            value = command_value(datetime.now(UTC))
            stored = await session.annotate(invocation.name, command, value)
            console.print(Text(confirmation(command, invocation.name, session.namespace, stored)))
        elif invocation.command == EXPLAIN:
            snapshot = await session.read(invocation.name)
            console.print(explain_screen.render(explain(build(snapshot)), time.time()))
        elif invocation.watch:
            await _watch(session, invocation, console)
        elif invocation.output:
            obj = await session.get_object(invocation.name)
            console.out(document(obj, invocation.output), end="")
        else:
            snapshot = await session.read(invocation.name)
            console.print(get_screen.render(build(snapshot), time.time()))
    finally:
        await session.close()
    return 0


def _watch_screen(snapshot: Snapshot) -> RenderableType:
    return get_screen.watching(build(snapshot), time.time())


async def _watch(session: Session, invocation: Invocation, console: Console) -> None:
    """Redraw on every change of the object or its pods; documents with -o; frames when
    stdout is no terminal (a file or a pipe keeps every state, as `kubectl get -w` does)."""
    latest: list[Snapshot] = []
    changed = asyncio.Event()

    async def follow() -> None:
        async with contextlib.aclosing(session.watch(invocation.name)) as snapshots:
            async for snapshot in snapshots:
                latest[:] = [snapshot]
                changed.set()

    follower = asyncio.create_task(follow())
    try:
        if invocation.output:
            await _print_documents(follower, changed, latest, invocation.output, console)
        elif console.is_terminal:
            with Live(console=console, auto_refresh=False, transient=False) as live:
                while await _next(follower, changed, TICK_SECONDS):
                    if latest:  # a tick may come before the first answer
                        live.update(_watch_screen(latest[0]), refresh=True)
        else:
            while await _next(follower, changed, None):
                console.print(_watch_screen(latest[0]))
                console.rule()
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower


async def _print_documents(
    follower: asyncio.Task[None],
    changed: asyncio.Event,
    latest: list[Snapshot],
    output: str,
    console: Console,
) -> None:
    """One document per new resourceVersion of the object (pod changes print nothing)."""
    printed = ""
    while await _next(follower, changed, None):
        obj = latest[0].obj
        version = str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))
        if obj is not None and version != printed:
            printed = version
            console.out(("---\n" if output == "yaml" else "") + document(obj, output), end="")


async def _next(follower: asyncio.Task[None], changed: asyncio.Event, tick: float | None) -> bool:
    """True when there is something to draw (a change, or the tick for the ages);
    the follower's error, if it ended."""
    waiter = asyncio.create_task(changed.wait())
    try:
        await asyncio.wait([waiter, follower], timeout=tick, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if follower.done():
        follower.result()
        return False
    got = changed.is_set()
    changed.clear()
    return got or tick is not None
