"""Rich renderables shared by `get` and `explain`: phase badges, verdict marks, key/value grids."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from sits_operator.model.analysis import Verdict
from sits_operator.model.status import Phase

# Argo Rollouts' marks, so its users read the screen at a glance.
_PHASES: dict[str, tuple[str, str]] = {
    Phase.PENDING: ("◌", "yellow"),
    Phase.PROGRESSING: ("◌", "yellow"),
    Phase.PROMOTING: ("◌", "yellow"),
    Phase.READY: ("✔", "green"),
    Phase.SUCCEEDED: ("✔", "green"),
    Phase.PAUSED: ("॥", "cyan"),
    Phase.ROLLED_BACK: ("↺", "red"),
    Phase.DEGRADED: ("⚠", "red"),
    Phase.INVALID: ("✖", "red"),
}

_VERDICTS: dict[str, tuple[str, str]] = {
    Verdict.PASS: ("✔", "green"),
    Verdict.FAIL: ("✖", "red"),
    Verdict.NO_DATA: ("…", "yellow"),
    Verdict.ERROR: ("⚠", "red"),
}


def phase_badge(phase: str) -> Text:
    """ "◌ Progressing" in the phase's colour; "(no status yet)" before the operator wrote one."""
    if not phase:
        return Text("(no status yet: is the operator running?)", style="yellow")
    mark, style = _PHASES.get(phase, ("?", "bold"))
    return Text(f"{mark} {phase}", style=style)


def verdict_mark(verdict: str) -> Text:
    mark, style = _VERDICTS.get(verdict, ("?", ""))
    return Text(f"{mark} {verdict}" if verdict else "-", style=style)


def ready_mark(ready: bool) -> Text:
    return Text("✔", style="green") if ready else Text("✖", style="red")


def add_row(table: Table, *cells: RenderableType | str) -> None:
    """A row whose strings are shown as they are, never read as rich markup: the operator's
    messages quote container logs, and vLLM's are full of brackets ("[rank0]: ...")."""
    table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells))


def fields(rows: Iterable[tuple[str, RenderableType | str]]) -> Table:
    """Key and value lines ("Name:  chat") aligned, like `kubectl describe` and Argo's get."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in rows:
        add_row(grid, f"{key}:", value)
    return grid
