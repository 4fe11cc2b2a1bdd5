"""A namespace with everything a live rollout needs, set up and removed as one: the
operator from its chart watching it, the live policy, Prometheus scraping it, and the
model volume. The live scenario tests and the live benchmark each use one."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sits_localcluster.cluster import LocalCluster

from . import stack, stories
from .monitoring import LiveMonitoring


@dataclass
class LiveNamespace:
    cluster: LocalCluster
    prefix: str = "sits-live"
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def __post_init__(self) -> None:
        self.namespace = f"{self.prefix}-{self.suffix}"
        # A release name of its own: the chart's cluster-scoped objects (ClusterRole...)
        # are named after it, and another install (the demo's) may be in the cluster.
        self.operator = stack.OperatorInstall(
            self.cluster,
            f"{self.prefix}-system-{self.suffix}",
            (self.namespace,),
            release=f"sits-{self.suffix}",
        )
        # The operator's namespace too: its sits_rollout_* gauges (dashboards, the chart's
        # candidate alert) come from its pod's /metrics.
        self.monitoring = LiveMonitoring(
            self.cluster,
            (self.namespace, self.operator.namespace),
            name=f"prometheus-{self.suffix}",
        )
        self.volume = stack.ModelVolume(self.cluster, self.namespace)

    def up(self) -> LiveNamespace:
        """Images imported, then the namespace, operator, policy, Prometheus, volume."""
        self.cluster.ensure_images(stack.IMAGES)
        self.cluster.kubectl("create", "namespace", self.namespace)
        self.operator.install()
        stack.apply(self.cluster, None, stories.live_policy(self.monitoring.in_cluster_url))
        self.monitoring.start()
        self.volume.create()
        return self

    def down(self) -> None:
        """Remove all of it: every step is tried even when an earlier one failed (a kubectl
        call can time out on a loaded machine), and the first failure is raised at the end,
        so a fixture's cleanup never leaves Prometheus or the operator behind silently."""
        kubectl = self.cluster.kubectl
        steps: list[tuple[str, Callable[[], object]]] = [
            (
                "namespace",
                lambda: kubectl("delete", "namespace", self.namespace, "--wait=false", check=False),
            ),
            ("operator", self.operator.uninstall),
            ("prometheus", self.monitoring.stop),
            ("volume", self.volume.delete),
            (
                "policy",
                lambda: kubectl(
                    "delete", "sitspolicy", stories.POLICY_NAME, "--ignore-not-found", check=False
                ),
            ),
        ]
        failures: list[tuple[str, Exception]] = []
        for what, step in steps:
            try:
                step()
            except Exception as error:  # every step runs; the first failure is raised below
                print(f"[live] removing the {what} of {self.namespace} failed: {error}")
                failures.append((what, error))
        if failures:
            first, cause = failures[0]
            raise RuntimeError(f"{self.namespace}: removing the {first} failed") from cause
