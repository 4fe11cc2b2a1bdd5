"""Breach bookkeeping: how long each rule has been failing, and which rule acts.

Counters move only on Fail (up) and Pass (reset); NoData and Error leave them as they
are, so a Prometheus outage neither advances a rule toward rollback nor forgives it.
"""

from __future__ import annotations

from sits_operator.core.analysis.verdicts import Judgement, RuleResult
from sits_operator.model.analysis import Breach, Verdict
from sits_operator.model.policy import ActionType, CompareTo, Rule

# rollback beats setWeight beats pause beats hold (the safest action wins).
_RANK = {ActionType.ROLLBACK: 0, ActionType.SET_WEIGHT: 1, ActionType.PAUSE: 2, ActionType.HOLD: 3}


def next_breach(breach: Breach, verdict: Verdict, now: float) -> Breach:
    if verdict is Verdict.FAIL:
        return Breach(breach.periods + 1, now if breach.since is None else breach.since)
    if verdict is Verdict.PASS:
        return Breach()
    return breach


def updated(
    breaches: dict[str, Breach], results: tuple[RuleResult, ...], now: float
) -> dict[str, Breach]:
    """New counters after this period; rules at rest (no breach) are not stored."""
    new = {
        r.rule.name: next_breach(breaches.get(r.rule.name, Breach()), r.verdict, now)
        for r in results
    }
    return {name: b for name, b in sorted(new.items()) if b != Breach()}


def triggered(rule: Rule, breach: Breach, now: float) -> bool:
    """Whether the breach has lasted as long as the rule asks (one period by default)."""
    if rule.for_seconds is not None:
        return breach.since is not None and now - breach.since >= rule.for_seconds
    return breach.periods >= (rule.for_periods or 1)


def pick(
    results: tuple[RuleResult, ...], breaches: dict[str, Breach], now: float
) -> RuleResult | None:
    """The rule whose action runs this period: failing now, lasted long enough, safest.

    A rule must fail in this very period to act; an old breach seen through NoData is not
    enough. Among setWeight rules the lowest weight wins.
    """
    due = [
        r
        for r in results
        if r.verdict is Verdict.FAIL and triggered(r.rule, breaches.get(r.rule.name, Breach()), now)
    ]
    return min(due, key=_precedence, default=None)


def _precedence(result: RuleResult) -> tuple[int, int]:
    action = result.rule.action
    return _RANK[action.type], action.weight if action.weight is not None else 0


def describe(result: RuleResult, breach: Breach, now: float) -> str:
    """'<rule>: <sli> of <variant> = <value> <cmp> <reference> <duration>' for humans."""
    rule = result.rule
    return f"{rule.name}: {_comparison(rule, result.worst)}{_lasting(rule, breach, now)}"


def _comparison(rule: Rule, judged: Judgement) -> str:
    if judged.detail:
        return judged.detail
    value = "no value" if judged.value is None else f"{judged.value:g}"
    head = f"{rule.sli} of {judged.variant} = {value}"
    if judged.reference is None:
        return head
    if rule.compare_to is CompareTo.STABLE:
        ref = f"stable within {rule.tolerance:g} ({judged.reference:g})"
    else:
        ref = f"{judged.reference:g}"
    return f"{head} {rule.comparison.value} {ref}"


def _lasting(rule: Rule, breach: Breach, now: float) -> str:
    if rule.for_seconds is not None:
        held = 0.0 if breach.since is None else now - breach.since
        return f" for {held:g}s (rule: {rule.for_seconds:g}s)"
    need = rule.for_periods or 1
    return f" for {breach.periods} of {need} period{'s' if need != 1 else ''}"
