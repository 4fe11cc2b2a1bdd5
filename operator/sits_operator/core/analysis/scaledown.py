"""When the losers of a terminal decision give their GPU slices back.

After Succeeded the old stable, after RolledBack the candidates, carry no traffic; each
keeps its pods for `spec.rollout.scaleDownDelay` after the decision (the router moves new
requests away at once, the streams already running must end) and is then scaled to zero
replicas, which frees its MIG slices. The decision to scale is the engine's (an event,
status, history); the reconciler renders the variants in `AnalysisState.scaled_down`
with zero replicas. Leaving the terminal phase (sits.dev/retry, a new revision) clears
the list, so the variants run again.
"""

from __future__ import annotations

from sits_operator.core.analysis.transition import TERMINAL
from sits_operator.model.analysis import AnalysisState


def losers(state: AnalysisState) -> tuple[str, ...]:
    """Variants a terminal phase left without traffic that still run, in weight order."""
    if state.phase not in TERMINAL:
        return ()
    return tuple(
        name
        for name, weight in state.weights.items()
        if weight == 0 and name not in state.scaled_down
    )


def _since(state: AnalysisState) -> float | None:
    """When the terminal phase began; a state from before finished_at existed counts from
    its last recorded decision."""
    if state.finished_at is not None:
        return state.finished_at
    return state.history[-1].at if state.history else None


def seconds_until(state: AnalysisState, delay: float, now: float) -> float | None:
    """Seconds until losers are due to be scaled down (0 when due); None: nothing pending."""
    since = _since(state)
    if since is None or not losers(state):
        return None
    return max(0.0, since + delay - now)


def due(state: AnalysisState, delay: float, now: float) -> tuple[str, ...]:
    """The losers to scale down now: those whose delay has passed."""
    wait = seconds_until(state, delay, now)
    return losers(state) if wait == 0.0 else ()
