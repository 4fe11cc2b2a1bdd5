"""Decide which children to apply and which to delete, from desired vs. observed.

Level-triggered like a controller-runtime reconciler: the plan depends only on what
should exist and what the watch cache says exists, never on the event that woke us.
"""

from __future__ import annotations

from dataclasses import dataclass

from sits_operator.core import naming
from sits_operator.core.render import Manifest
from sits_operator.model.observed import ObservedChild


@dataclass(frozen=True)
class ChildKey:
    kind: str
    name: str


@dataclass(frozen=True)
class Plan:
    """Writes needed to converge; empty when the cluster already matches the spec."""

    apply: tuple[Manifest, ...]
    delete: tuple[ChildKey, ...]

    @property
    def empty(self) -> bool:
        return not self.apply and not self.delete


def _key(manifest: Manifest) -> ChildKey:
    return ChildKey(kind=str(manifest["kind"]), name=str(manifest["metadata"]["name"]))


def _hash(manifest: Manifest) -> str:
    return str(manifest["metadata"]["annotations"][naming.ANNOTATION_TEMPLATE_HASH])


def plan_children(desired: list[Manifest], observed: tuple[ObservedChild, ...]) -> Plan:
    """Apply what is missing or whose content hash differs; delete what is no longer wanted."""
    seen = {ChildKey(c.kind, c.name): c for c in observed}
    wanted = {_key(m) for m in desired}
    to_apply = tuple(
        m
        for m in desired
        if (child := seen.get(_key(m))) is None or child.template_hash != _hash(m)
    )
    to_delete = tuple(
        sorted((key for key in seen if key not in wanted), key=lambda k: (k.kind, k.name))
    )
    return Plan(apply=to_apply, delete=to_delete)
