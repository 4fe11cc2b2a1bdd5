"""Weight maps for a rollout plan: the arithmetic every decision shares.

Weights are integer percentages that always sum to 100, keyed by variant name, stable
first. Keeping the arithmetic here (and pure) means a step, a cut, a rollback and a
promotion can never disagree about what "candidate at N %" means.
"""

from __future__ import annotations

from collections.abc import Mapping

from sits_operator.model.analysis import AnalysisState, RolloutPlan

ABTEST = "abTest"


def step_weights_for(step_weight: int, max_weight: int) -> tuple[int, ...]:
    """Canary steps from stepWeight increments up to maxWeight: 10, 50 -> (10, 20, 30, 40, 50).

    A last increment that would overshoot lands on maxWeight exactly (30, 50 -> (30, 50)),
    so the canary always reaches the weight the spec promises before promotion.
    """
    top = min(max_weight, 100)
    if step_weight <= 0 or top <= 0:
        return ()
    steps = tuple(range(step_weight, top + 1, step_weight))
    return steps if steps and steps[-1] == top else (*steps, top)


def variants(plan: RolloutPlan) -> tuple[str, ...]:
    return (plan.stable, *plan.candidates)


def weights_for(plan: RolloutPlan, candidate_weight: int) -> dict[str, int]:
    """Every candidate at candidate_weight and stable the rest, capped so the sum is 100."""
    if not plan.candidates:
        return {plan.stable: 100}
    each = max(0, min(candidate_weight, 100 // len(plan.candidates)))
    return {plan.stable: 100 - each * len(plan.candidates), **dict.fromkeys(plan.candidates, each)}


def rollback_weights(plan: RolloutPlan) -> dict[str, int]:
    return weights_for(plan, 0)


def promotion_weights(plan: RolloutPlan) -> dict[str, int]:
    """All traffic to the candidates, split evenly (the first ones take the remainder)."""
    if not plan.candidates:
        return {plan.stable: 100}
    share, extra = divmod(100, len(plan.candidates))
    split = {c: share + (1 if i < extra else 0) for i, c in enumerate(plan.candidates)}
    return {plan.stable: 0, **split}


def capped(plan: RolloutPlan, weights: Mapping[str, int], limit: int) -> dict[str, int]:
    """A setWeight cut: each candidate at min(current, limit), stable takes the rest."""
    cut = {c: max(0, min(weights.get(c, 0), limit)) for c in plan.candidates}
    return {plan.stable: 100 - sum(cut.values()), **cut}


def candidate_weight(plan: RolloutPlan, weights: Mapping[str, int]) -> int:
    """The heaviest candidate's weight: where a canary with several candidates stands."""
    return max((weights.get(c, 0) for c in plan.candidates), default=0)


def initial_weights(plan: RolloutPlan) -> dict[str, int]:
    """plan.initial_weights over exactly the plan's variants; stable defaults to the rest."""
    cands = {c: int(plan.initial_weights.get(c, 0)) for c in plan.candidates}
    stable = int(plan.initial_weights.get(plan.stable, 100 - sum(cands.values())))
    return {plan.stable: stable, **cands}


def current_weights(
    plan: RolloutPlan, observed: Mapping[str, int], state: AnalysisState
) -> dict[str, int]:
    """What traffic is doing now: the router's read-back, else what we last decided.

    Observed weights win (docs/architecture.md section 5: trust observed state); missing
    variants read as 0.
    """
    source = observed or state.weights
    if not source:
        return initial_weights(plan)
    return {v: int(source.get(v, 0)) for v in variants(plan)}


def masked_for_readiness(
    plan: RolloutPlan, observed: Mapping[str, int], decided: Mapping[str, int]
) -> bool:
    """Whether `observed` is `decided` with some candidates' shares moved to stable.

    That is the built-in router's own rule (core/status.effective_weights): a candidate
    without a ready pod gets no traffic, so status.traffic and the gateways that follow it
    show it at 0. Read back on the pass where the candidate has just turned ready, that 0
    is no decision anyone made; taken for the current weight, it put the rollout before
    its first step, a candidate at 0 % never gets the data the next step waits for, and
    the rollout waited for ever (seen live with a candidate that started late).
    """
    if not observed or not decided or dict(observed) == dict(decided):
        return False
    moved = 0
    for name in plan.candidates:
        seen, wanted = int(observed.get(name, 0)), int(decided.get(name, 0))
        if seen != wanted:
            if seen != 0:
                return False
            moved += wanted
    return int(observed.get(plan.stable, 0)) == int(decided.get(plan.stable, 0)) + moved


def position_for(plan: RolloutPlan, weight: int) -> int:
    """Index of the step we stand on when the candidate is at `weight`.

    The next step is the first one heavier than `weight`; we stand just before it. -1
    means "below the first step" (the next advance goes to step 0).
    """
    heavier = (i for i, w in enumerate(plan.step_weights) if w is not None and w > weight)
    return next(heavier, len(plan.step_weights)) - 1


def start_position(plan: RolloutPlan) -> tuple[dict[str, int], int]:
    """Weights and step index where an analysis (re)starts.

    abTest keeps its initial split. A canary whose initial weights already give a
    candidate traffic starts there (the next step is the first heavier one); otherwise
    it starts on step 0's weight.
    """
    initial = initial_weights(plan)
    if plan.strategy == ABTEST:
        return initial, 0
    already = candidate_weight(plan, initial)
    if already > 0:
        return initial, position_for(plan, already)
    first = plan.step_weights[0] if plan.step_weights else None
    return (initial if first is None else weights_for(plan, first)), 0


def is_pause_step(plan: RolloutPlan, index: int) -> bool:
    return 0 <= index < len(plan.step_weights) and plan.step_weights[index] is None


def pause_duration(plan: RolloutPlan, index: int) -> float | None:
    """Seconds a pause step lasts; None means "until sits.dev/resume"."""
    return plan.pause_seconds[index] if index < len(plan.pause_seconds) else None
