"""The `kubectl sits explain` screen: the decision, its rule, its numbers, what comes next."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from sits_kubectl.explain import Explanation
from sits_kubectl.screens import add_row, fields, phase_badge, verdict_mark
from sits_kubectl.text import age, clock, number, stamp


def render(ex: Explanation, now: float) -> RenderableType:
    title = Text.assemble((ex.name, "bold"), f" in {ex.namespace}: ", phase_badge(ex.phase))
    if not ex.reason:
        steps = _bullets("Next", ex.next_steps)
        return Group(title, Text(""), steps, *_notes(ex))
    parts: list[RenderableType] = [title, Text(""), _decision(ex, now)]
    if ex.numbers:
        parts += [Text(""), _numbers(ex)]
    parts += [
        Text(""),
        _bullets("Counters", ex.counters),
        Text(""),
        _bullets("Next", ex.next_steps),
    ]
    return Group(*parts, *_notes(ex))


def _decision(ex: Explanation, now: float) -> Table:
    when = f"{age(ex.decided_at, now)} ago ({stamp(ex.decided_at)})" if ex.decided_at else "-"
    rows: list[tuple[str, RenderableType | str]] = [
        ("Decision", Text.assemble((ex.action or "-", "bold"), f", {when}")),
        ("Reason", ex.reason),
        ("Followed", ex.cause.text),
    ]
    if ex.period is not None and ex.interval:
        rows.append(
            (
                "Period",
                f"{ex.period.number}: {clock(ex.period.start)} to {clock(ex.period.end)} UTC "
                f"(SitsPolicy {ex.policy} evaluates every {ex.interval:g}s); "
                f"last evaluation {age(ex.evaluated_at, now)} ago",
            )
        )
    if ex.candidate_values:
        rows.append(("Candidate", f"{ex.candidate_values} (latest samples)"))
    return fields(rows)


def _numbers(ex: Explanation) -> Table:
    observed = next((r.observed_at for r in ex.numbers if r.observed_at), None)
    title = f"Numbers of the last evaluation ({clock(observed)} UTC)"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("VARIANT", "SLI", "VALUE", "VERDICT", "BREACH", "WINDOW"):
        table.add_column(column, no_wrap=column != "BREACH")
    for row in ex.numbers:
        add_row(
            table,
            row.variant,
            row.sli,
            number(row.value),
            verdict_mark(row.verdict),
            row.breach or "?",
            row.window,
        )
    return table


def _bullets(title: str, lines: tuple[str, ...]) -> Group:
    """A titled list whose long lines wrap under their own text, not under the bullet."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for line in lines:
        add_row(grid, "  •", line)
    return Group(Text(title, style="bold"), grid)


def _notes(ex: Explanation) -> list[RenderableType]:
    return [Text(note, style="yellow") for note in ex.notes]
