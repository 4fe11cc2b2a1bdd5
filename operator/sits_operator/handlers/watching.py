"""What the operator watches of the children's kinds: only its own, filtered by the apiserver.

The handlers' `labels=` filters (handlers/operator.py) are applied by Kopf on the client:
alone, they would have the operator list and watch every Pod, Deployment, Service... of the
cluster (or of its namespaces) and drop the others in memory. Kopf (>= 1.45) also sends
label selectors with its list and watch requests (`settings.watching.label_selectors`):
`scope_watches` sets them from the same filters, so the apiserver sends only the owned
children (OWNED) and the pods of SitsDeployments (SELECTED), in both install modes (Kopf
adds them to its per-namespace requests too). An object whose labels stop matching leaves
the watch as a DELETED event, which also drops it from the indexes.

`count_watch_event` (handlers/operator.py) counts what reaches the operator, selected or not
(`sits_operator_watch_events_total{resource, selected}`): `selected="false"` stays 0 while
the selectors are sent; with SITS_SERVER_SIDE_SELECTORS=0 (only to measure the difference,
benchmarks/watch_scope.py) it counts what Kopf's client-side filters then drop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import kopf

from sits_operator.core import naming

# A handler's `labels=` filter: a value, kopf.PRESENT or kopf.ABSENT per label.
LabelFilter = Mapping[str, object]

# Objects the operator applies carry the managed-by label (core/render.py, core/gateway.py);
# pods, made by their ReplicaSets, carry the pod template's sits.dev/deployment.
OWNED = {naming.LABEL_MANAGED_BY: naming.MANAGED_BY}
SELECTED = {naming.LABEL_DEPLOYMENT: kopf.PRESENT}

# (group, version, plural) of every child kind the handlers watch, and the one label filter
# their handlers share (tests/unit/test_watch_scope.py checks the registry against it).
CHILD_RESOURCES: dict[tuple[str, str, str], LabelFilter] = {
    ("apps", "v1", "deployments"): OWNED,
    ("", "v1", "services"): OWNED,
    ("", "v1", "serviceaccounts"): OWNED,
    ("rbac.authorization.k8s.io", "v1", "roles"): OWNED,
    ("rbac.authorization.k8s.io", "v1", "rolebindings"): OWNED,
    ("policy", "v1", "poddisruptionbudgets"): OWNED,
    ("", "v1", "pods"): SELECTED,
}

ENV_SWITCH = "SITS_SERVER_SIDE_SELECTORS"


def label_selector(labels: LabelFilter) -> str:
    """A Kopf label filter as the apiserver's `labelSelector` (the same meaning)."""
    terms = []
    for key, value in sorted(labels.items()):
        if value is kopf.PRESENT:
            terms.append(key)
        elif value is kopf.ABSENT:
            terms.append(f"!{key}")
        elif isinstance(value, str):
            terms.append(f"{key}={value}")
        else:  # a callable filter cannot be sent to the server
            raise TypeError(f"label {key!r}: {value!r} has no server-side selector")
    return ",".join(terms)


def matches(labels: LabelFilter, actual: Mapping[str, str]) -> bool:
    """Whether an object's labels satisfy the filter, as the apiserver decides it."""
    for key, value in labels.items():
        if value is kopf.PRESENT:
            found = key in actual
        elif value is kopf.ABSENT:
            found = key not in actual
        else:
            found = actual.get(key) == value
        if not found:
            return False
    return True


def server_side_enabled(env: Mapping[str, str] | None = None) -> bool:
    """On unless SITS_SERVER_SIDE_SELECTORS is 0/false (only to measure the difference)."""
    env = os.environ if env is None else env
    return env.get(ENV_SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def scope_watches(settings: kopf.OperatorSettings, *, enabled: bool = True) -> None:
    """Have Kopf send each child kind's selector with its list and watch requests.

    Must run before the watchers start: in a startup handler, or on the settings given to
    kopf.operator."""
    if not enabled:
        return
    for (group, version, plural), labels in CHILD_RESOURCES.items():
        settings.watching.label_selectors[group, version, plural] = label_selector(labels)


def child_filter(plural: str) -> LabelFilter:
    """The label filter of a child kind by its plural (the watch-event counter's)."""
    for (_, _, name), labels in CHILD_RESOURCES.items():
        if name == plural:
            return labels
    raise KeyError(plural)
