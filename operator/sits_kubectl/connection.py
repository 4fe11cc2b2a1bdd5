"""Which cluster, as whom, in which namespace: kubectl's own connection flags."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Connection:
    """`--kubeconfig`, `--context`, `-n`, `--as`, `--as-group`; None: kubectl's default
    (KUBECONFIG or ~/.kube/config, its current context, that context's namespace)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    as_user: str | None = None
    as_group: str | None = None
