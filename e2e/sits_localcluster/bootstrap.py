"""What ``up()`` does once the apiserver answers: GPU nodes, and waiting for usable state.

"The apiserver is ready" is not "a test can create a pod": the ``default`` ServiceAccount
only appears once the controller-manager's serviceaccount controller ran, and pods only
schedule once kwok marked the nodes Ready and node-lifecycle removed its not-ready taint.
Waiting for those here means no test has to know about them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .api import ApiClient
from .nodes import GPU_NODES

NODES_PATH = "/api/v1/nodes"


class BootstrapError(RuntimeError):
    """The cluster came up but never reached a state where tests can use it."""


def ensure_gpu_nodes(api: ApiClient) -> None:
    """Create or update the fake GPU nodes, then force their capacity/allocatable.

    Status is patched separately because server-side apply of the main resource ignores
    status on existing objects, and kwok only fills in defaults where status is empty.
    """
    for spec in GPU_NODES:
        api.apply(f"{NODES_PATH}/{spec.name}", spec.manifest())
        api.merge_patch(f"{NODES_PATH}/{spec.name}/status", spec.status_patch())


def _node_ready(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = node.get("spec", {}).get("taints") or []
    blocking = [t for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")]
    return ready and not blocking


def not_ready_nodes(api: ApiClient) -> list[str]:
    """Names of our GPU nodes that are missing, not Ready, or still carry a blocking taint."""
    waiting = []
    for spec in GPU_NODES:
        node = api.get(f"{NODES_PATH}/{spec.name}")
        if node is None or not _node_ready(node):
            waiting.append(spec.name)
    return waiting


def wait_for(
    what: str, pending: Callable[[], list[str]], timeout: float, interval: float = 0.25
) -> None:
    """Poll ``pending()`` (a list of what is still missing) until empty or ``timeout``."""
    deadline = time.monotonic() + timeout
    left = pending()
    while left and time.monotonic() < deadline:
        time.sleep(interval)
        left = pending()
    if left:
        raise BootstrapError(f"timed out after {timeout:.0f} s waiting for {what}: {left}")


def missing_default_service_account(api: ApiClient) -> list[str]:
    """['default/default'] until the serviceaccount controller created it."""
    found = api.get("/api/v1/namespaces/default/serviceaccounts/default")
    return [] if found is not None else ["default/default"]
