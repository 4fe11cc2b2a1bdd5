"""Manual control through sits.dev/<command> annotations, each acted on exactly once.

An annotation stays on the object after it was handled, so "new" means: its value differs
from the one recorded in `acknowledged`. Several new commands at once (the operator was
down) are applied in a fixed order in which the safest lands last: retry, pause, resume,
promote, abort.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from sits_operator.core.analysis.transition import TERMINAL, Context, Transition, hold, normal
from sits_operator.core.analysis.transitions import (
    PAUSED,
    advance,
    on_pause_step,
    pause,
    restart,
    resume,
    rollback,
    succeed,
)
from sits_operator.model.analysis import (
    AnalysisPhase,
    AnalysisState,
    Command,
    DecisionAction,
    command_annotation,
)
from sits_operator.model.events import EventReason

ORDER = (Command.RETRY, Command.PAUSE, Command.RESUME, Command.PROMOTE, Command.ABORT)

_Handler = Callable[[Context, AnalysisState, str], Transition]


def pending(state: AnalysisState, commands: Mapping[Command, str]) -> list[tuple[Command, str]]:
    """Commands whose annotation value has not been acknowledged yet, in ORDER."""
    return [
        (cmd, commands[cmd])
        for cmd in ORDER
        if cmd in commands and state.acknowledged.get(cmd.value) != commands[cmd]
    ]


def apply_commands(
    ctx: Context, state: AnalysisState, commands: Mapping[Command, str]
) -> Transition | None:
    """Acknowledge and act on every new command; None when there is none."""
    applied: Transition | None = None
    for cmd, value in pending(state, commands):
        current = state if applied is None else applied.state
        acked = replace(current, acknowledged={**current.acknowledged, cmd.value: value})
        step = _HANDLERS[cmd](ctx, acked, f"{command_annotation(cmd)}={value}")
        applied = step if applied is None else applied.then(step)
    return applied


def _ignored(state: AnalysisState, annotation: str, why: str) -> Transition:
    """Acknowledged but nothing to do: say so, in status and in an event."""
    reason = f"{annotation} ignored: {why}"
    return hold(state, reason, action=DecisionAction.NONE).after_events(
        (normal(EventReason.COMMAND_IGNORED, reason),)
    )


def _retry(ctx: Context, state: AnalysisState, annotation: str) -> Transition:
    return restart(ctx, state, f"analysis restarted by {annotation}", EventReason.RETRY)


def _pause(ctx: Context, state: AnalysisState, annotation: str) -> Transition:
    if state.phase in TERMINAL or state.phase is PAUSED:
        return _ignored(state, annotation, f"phase is {state.phase.value}")
    return pause(ctx, state, f"paused by {annotation}", by_hand=True)


def _resume(ctx: Context, state: AnalysisState, annotation: str) -> Transition:
    """Leave a pause (any cause); on a pause step, go on to the next step."""
    if state.phase is PAUSED:
        return resume(ctx, state, f"resumed by {annotation}")
    if on_pause_step(ctx, state):
        return advance(ctx, state, f"resumed by {annotation}")
    return _ignored(state, annotation, f"nothing paused (phase {state.phase.value})")


def _promote(ctx: Context, state: AnalysisState, annotation: str) -> Transition:
    if state.phase is AnalysisPhase.SUCCEEDED:
        return _ignored(state, annotation, "already Succeeded")
    return succeed(ctx, state, f"promoted by {annotation}")


def _abort(ctx: Context, state: AnalysisState, annotation: str) -> Transition:
    if state.phase is AnalysisPhase.ROLLED_BACK:
        return _ignored(state, annotation, "already RolledBack")
    return rollback(ctx, state, f"aborted by {annotation}")


_HANDLERS: dict[Command, _Handler] = {
    Command.RETRY: _retry,
    Command.PAUSE: _pause,
    Command.RESUME: _resume,
    Command.PROMOTE: _promote,
    Command.ABORT: _abort,
}
