"""Shared pytest wiring: the local control plane fixture lives with the cluster code.

A SIGTERM (a CI job's timeout, ``kill``) ends the session as Ctrl-C does: pytest then
tears its fixtures down, so the clusters, vLLM servers and namespaces they started stop
with it. By default SIGTERM kills pytest on the spot and leaves them running (a killed
``.ci/run`` left a host vLLM server behind).
"""

from __future__ import annotations

import signal
from types import FrameType

import pytest

pytest_plugins = ["sits_localcluster.pytest_plugin", "sits_vllm.pytest_plugin"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    signal.signal(signal.SIGTERM, _interrupt)
