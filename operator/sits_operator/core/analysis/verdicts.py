"""Judging samples: one rule, one variant, one period -> Pass, Fail, NoData or Error.

The four verdicts follow docs/architecture.md section 5: only Fail moves toward an
action, NoData (no number, or too few requests behind it) holds, Error (the query failed)
freezes. Keeping the reference value next to the verdict lets reasons and events name
exactly what was compared with what.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sits_operator.model.analysis import RolloutPlan, RuleSamples, RuleVerdict, Sample, Verdict
from sits_operator.model.policy import CompareTo, Comparison, Policy, Rule

_BREACHED: dict[Comparison, Callable[[float, float], bool]] = {
    Comparison.LT: lambda value, ref: value < ref,
    Comparison.LE: lambda value, ref: value <= ref,
    Comparison.GT: lambda value, ref: value > ref,
    Comparison.GE: lambda value, ref: value >= ref,
}

# When several candidates disagree, the most alarming verdict speaks for the rule.
_SEVERITY = (Verdict.FAIL, Verdict.ERROR, Verdict.NO_DATA, Verdict.PASS)


@dataclass(frozen=True)
class Judgement:
    """A verdict with the numbers behind it: the variant's value and what it was held to."""

    variant: str
    verdict: Verdict
    value: float | None = None
    reference: float | None = None
    # Words that replace "<sli> = <value> <cmp> <reference>" where numbers say too little
    # (the built-in containers rule: the kubelet's reason and vLLM's last words).
    detail: str = ""


@dataclass(frozen=True)
class RuleResult:
    """One rule in one period: the candidates' judgements and their combined verdict."""

    rule: Rule
    verdict: Verdict
    candidates: tuple[Judgement, ...]
    stable: Judgement
    error: str | None = None

    @property
    def worst(self) -> Judgement:
        """The candidate judgement that decided the combined verdict (for reasons)."""
        return next((j for j in self.candidates if j.verdict is self.verdict), self.stable)


def assess(rule: Rule, policy: Policy, samples: RuleSamples, variant: str, stable: str) -> Verdict:
    """The verdict of `rule` for `variant` in this period (see `judge`)."""
    return judge(rule, policy, samples, variant, stable).verdict


def judge(rule: Rule, policy: Policy, samples: RuleSamples, variant: str, stable: str) -> Judgement:
    """Judge one variant; the comparison describes the breach, so holding means Fail."""
    sample = samples.by_variant.get(variant)
    raw = None if sample is None else sample.value
    if samples.error is not None:
        return Judgement(variant, Verdict.ERROR, raw)
    value = usable(sample, rule, policy)
    if value is None:
        return Judgement(variant, Verdict.NO_DATA, raw)
    reference = _reference(rule, policy, samples, stable)
    if isinstance(reference, Verdict):
        return Judgement(variant, reference, value)
    breached = _BREACHED[rule.comparison](value, reference)
    return Judgement(variant, Verdict.FAIL if breached else Verdict.PASS, value, reference)


def usable(sample: Sample | None, rule: Rule, policy: Policy) -> float | None:
    """The sample's value when it is a finite number backed by enough requests, else None."""
    if sample is None or sample.value is None or not math.isfinite(sample.value):
        return None
    if sample.requests is not None and sample.requests < policy.min_requests_for(rule):
        return None
    return sample.value


def _reference(rule: Rule, policy: Policy, samples: RuleSamples, stable: str) -> float | Verdict:
    """What the candidate is held to; a Verdict when there is nothing to hold it to."""
    if rule.compare_to is CompareTo.STABLE:
        base = usable(samples.by_variant.get(stable), rule, policy)
        return Verdict.NO_DATA if base is None else widen(rule, base)
    # A threshold rule without a threshold cannot be judged: freeze rather than guess.
    return Verdict.ERROR if rule.threshold is None else rule.threshold


def widen(rule: Rule, stable_value: float) -> float:
    """Stable's value moved by the tolerance in the candidate's favour.

    For "<"/"<=" (lower is bad) the candidate may be up to tolerance below stable; for
    ">"/">=" up to tolerance above. abs() keeps the direction right for negative values.
    """
    slack = abs(stable_value) * rule.tolerance
    if rule.comparison in (Comparison.LT, Comparison.LE):
        return stable_value - slack
    return stable_value + slack


def judge_rules(
    policy: Policy, plan: RolloutPlan, observations: tuple[RuleSamples, ...]
) -> tuple[RuleResult, ...]:
    """Every rule for every variant; a rule with no observation reads as NoData."""
    by_rule = {o.rule: o for o in observations}
    return tuple(
        _judge_rule(rule, policy, plan, by_rule.get(rule.name, RuleSamples(rule.name)))
        for rule in policy.rules
    )


def _judge_rule(rule: Rule, policy: Policy, plan: RolloutPlan, samples: RuleSamples) -> RuleResult:
    cands = tuple(judge(rule, policy, samples, c, plan.stable) for c in plan.candidates)
    stable = judge(rule, policy, samples, plan.stable, plan.stable)
    verdict = combined(tuple(j.verdict for j in cands))
    return RuleResult(rule, verdict, cands, stable, samples.error)


def combined(verdicts: tuple[Verdict, ...]) -> Verdict:
    """Fail if any candidate fails, then Error, then NoData; Pass only when all pass."""
    return next((v for v in _SEVERITY if v in verdicts), Verdict.NO_DATA)


def rows(results: tuple[RuleResult, ...]) -> tuple[RuleVerdict, ...]:
    """Status rows: stable first (for display only), then each candidate."""
    return tuple(
        RuleVerdict(r.rule.name, r.rule.sli, j.variant, j.verdict, j.value, r.rule.window_seconds)
        for r in results
        for j in (r.stable, *r.candidates)
    )
