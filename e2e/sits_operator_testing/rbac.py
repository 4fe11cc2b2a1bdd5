"""Under which of the chart's two RBAC modes the integration suites run the operator.

``SITS_TEST_RBAC=cluster`` (the default): the chart's ClusterRole, the operator
cluster-wide. ``SITS_TEST_RBAC=namespaced``: the chart's namespaced install
(operator.watchNamespaces): a Role in each test namespace, the read-only SitsPolicy
ClusterRole, and every operator the suites start serves only the namespaces it is
given (``--namespace``). Either way the operator holds nothing but the chart's grants,
and a 403 in its log fails the module (process.running_operator).
"""

from __future__ import annotations

import os
from enum import StrEnum

RBAC_MODE_ENV = "SITS_TEST_RBAC"
#: Under the namespaced RBAC, what an operator serves before a test gives it its own
#: namespace: one with the chart's Role in it (an operator may not watch the cluster).
HOME_NAMESPACE = "sits-test-home"


class RbacMode(StrEnum):
    CLUSTER = "cluster"
    NAMESPACED = "namespaced"


def rbac_mode() -> RbacMode:
    value = os.environ.get(RBAC_MODE_ENV) or RbacMode.CLUSTER.value
    try:
        return RbacMode(value)
    except ValueError:
        expected = " or ".join(m.value for m in RbacMode)
        raise ValueError(f"{RBAC_MODE_ENV}={value!r}: expected {expected}") from None


def namespaced() -> bool:
    return rbac_mode() is RbacMode.NAMESPACED


def watched(*namespaces: str) -> tuple[str, ...]:
    """The `--namespace` list for an operator meant to act in `namespaces`: those under
    the namespaced RBAC, none (cluster-wide) under the ClusterRole."""
    return tuple(namespaces) if namespaced() else ()


def default_namespaces() -> tuple[str, ...]:
    """What an operator serves unless told otherwise: every namespace, or under the
    namespaced RBAC the home namespace."""
    return watched(HOME_NAMESPACE)
