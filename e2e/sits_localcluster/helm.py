"""Locate the cached ``helm`` binary that ``scripts/setup-helm.sh`` builds.

Helm is compiled from the Go module proxy (no release download is reachable from the
machines this project runs on), once per version, into the same cache as the control-plane
binaries. The path is derived here from the same inputs the script uses (``SITS_CACHE_DIR``
and ``HELM_VERSION`` in ``versions.env``) so that tests find the binary without starting a
shell, and so that bumping the pinned version can never silently pick up a stale build.
Building is deliberately left to the script: it takes minutes, and belongs in set-up, not
in a test's fixture.
"""

from __future__ import annotations

import os
from pathlib import Path

from sits_localcluster.build import cache_root, read_versions

SETUP_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "setup-helm.sh"


def helm_binary(versions: dict[str, str] | None = None) -> Path:
    """Return the cached helm for the pinned ``HELM_VERSION``; never builds it.

    Raises ``FileNotFoundError`` naming the script to run when the binary is missing, so a
    test fails with the fix rather than with a bare "No such file" from ``subprocess``.
    """
    v = versions or read_versions()
    version = v.get("HELM_VERSION")
    if not version:
        raise KeyError("HELM_VERSION is not pinned in e2e/cluster/versions.env")
    path = cache_root() / f"helm-{version}" / "bin" / "helm"
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(
            f"helm {version} is not built at {path}; run {SETUP_SCRIPT} (a few minutes, once)"
        )
    return path
