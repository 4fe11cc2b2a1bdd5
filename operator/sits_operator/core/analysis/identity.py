"""Is a changed spec a new rollout, or the same state written down in Git?

After a terminal decision the natural GitOps commit states the outcome in the spec: after
Succeeded the promoted candidate becomes the stable (the old stable removed, or kept at
zero weight); after RolledBack the losing candidate is removed. Such a commit changes the
revision key (roles and the set of variants are part of it) but nothing that runs: the
analysis must not restart, no weight may move, no pod may roll. A spec that brings a
revision the analysis has not judged is a new rollout and restarts it.

The rule, from the stored terminal state and the new key: every variant of the new spec
is one the analysis knew, with the same revision; the new stable is a variant that
serves traffic (the promoted candidate, or the stable after a rollback); and every
variant that serves traffic is still there (so no weight has to move).
"""

from __future__ import annotations

from enum import StrEnum

from sits_operator.core.analysis.transition import TERMINAL
from sits_operator.model.analysis import AnalysisState, VariantRevision, parse_revision_key
from sits_operator.model.spec import Role


class SpecChange(StrEnum):
    SAME = "Same"  # the key is the one under analysis
    COMMITTED = "Committed"  # the spec now states the terminal outcome: adopt it
    NEW = "New"  # a first analysis or a new revision: (re)start


def spec_change(state: AnalysisState, revision_key: str) -> SpecChange:
    """How a spec whose revision key is `revision_key` relates to the stored analysis."""
    if state.revision_key == revision_key:
        return SpecChange.SAME
    if state.phase not in TERMINAL:
        return SpecChange.NEW
    before = parse_revision_key(state.revision_key)
    after = parse_revision_key(revision_key)
    if before is None or after is None:
        return SpecChange.NEW
    return SpecChange.COMMITTED if _commits(before, after, state.weights) else SpecChange.NEW


def _commits(
    before: tuple[VariantRevision, ...],
    after: tuple[VariantRevision, ...],
    weights: dict[str, int],
) -> bool:
    known = {(v.name, v.revision) for v in before}
    if any((v.name, v.revision) not in known for v in after):
        return False  # a revision the analysis has not judged
    serving = {name for name, weight in weights.items() if weight > 0}
    stable = next((v.name for v in after if v.role is Role.STABLE), None)
    return stable in serving and serving <= {v.name for v in after}


def describe_commit(state: AnalysisState, revision_key: str) -> str:
    """What the commit says, for the event: "v2 is the stable, v1 removed"."""
    before = parse_revision_key(state.revision_key) or ()
    after = parse_revision_key(revision_key) or ()
    stable = next((v.name for v in after if v.role is Role.STABLE), "?")
    removed = sorted({v.name for v in before} - {v.name for v in after})
    said = f"spec names {stable} the stable"
    return f"{said}, {', '.join(removed)} removed" if removed else said
