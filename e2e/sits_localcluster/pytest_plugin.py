"""pytest fixtures for tests that need the local control plane (mark them ``cluster``).

``local_cluster`` (session scope) runs the same code as ``sits-cluster up``: it builds the
binaries if needed, reuses a running cluster, and stops the cluster at session end only if
this session started it, so a cluster a developer keeps running survives test runs.

Why the start-up happens in a ``pytest_runtest_protocol`` wrapper: pytest-timeout's timer
covers fixture set-up, and a cold build (tens of minutes) or a cold start (~30 s) must not
be charged to whichever test happens to run first. Failures are remembered and re-raised by
the fixture as test failures: a missing cluster never turns into a silent skip.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .build import ensure_binaries
from .cluster import LocalCluster, default_state_dir
from .components import Ports

FIXTURE = "local_cluster"


@dataclass
class _SessionCluster:
    """Process-wide memo: one start attempt per pytest session."""

    cluster: LocalCluster | None = None
    started_here: bool = False
    error: str | None = None
    attempted: bool = False


_STATE = _SessionCluster()


def _progress(line: str) -> object:
    """Write past pytest's capture: build and start-up progress is worth seeing live."""
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"[sits-cluster] {line}\n")
    stream.flush()
    return None


# Tests get their own cluster (state and ports), apart from the demo's: what a demo left
# behind (workloads holding MIG slices, extra nodes) must not change test outcomes.
TEST_PORTS = Ports(
    apiserver=18443,
    etcd_client=14379,
    etcd_peer=14380,
    controller_manager=22257,
    scheduler=22259,
    kwok=22247,
)


def cluster_for_tests(bin_dir: Path | None = None) -> LocalCluster:
    """The tests' cluster; SITS_CLUSTER_DIR (and SITS_*_PORT) select another one."""
    if os.environ.get("SITS_CLUSTER_DIR"):
        return LocalCluster(bin_dir=bin_dir, progress=_progress)
    state = Path(
        os.environ.get("SITS_TEST_CLUSTER_DIR", default_state_dir().parent / "test-cluster")
    )
    return LocalCluster(state, bin_dir=bin_dir, ports=TEST_PORTS, progress=_progress)


def _bring_up() -> None:
    """Build (if needed) and start or reuse the cluster; remember any failure.

    A cluster that is not running is started from empty state, so every fresh session
    (and CI) tests against a clean cluster; a running one is reused for quick reruns.
    """
    if _STATE.attempted:
        return
    _STATE.attempted = True
    try:
        bin_dir = ensure_binaries(_progress)
        cluster = cluster_for_tests(bin_dir)
        if not cluster.is_running():
            cluster.down(purge=True)
        _STATE.started_here = cluster.up(user_pid=os.getpid())
        _STATE.cluster = cluster
    except Exception as err:  # any failure must surface as a test failure, with its reason
        _STATE.error = f"{type(err).__name__}: {err}"
        # Also now, in the live log: the failures' summary comes only at the session's end.
        _progress(f"the cluster did not start: {_STATE.error}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Start the cluster before the per-test timeout clock starts for the first user."""
    if FIXTURE in getattr(item, "fixturenames", ()):
        _bring_up()
    return (yield)


@contextlib.contextmanager
def uncaptured(config: pytest.Config) -> Iterator[None]:
    """Let progress lines through pytest's fd-level capture during fixture set-up/teardown."""
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is None:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield


@pytest.fixture(scope="session")
def local_cluster(pytestconfig: pytest.Config) -> Iterator[LocalCluster]:
    """The running local cluster, stopped at session end only if a test session started it.

    It is left running while another live session still uses it (the last one out stops
    it), and always when a person started or re-upped it with ``sits-cluster up``.
    """
    with uncaptured(pytestconfig):
        _bring_up()
    cluster = _STATE.cluster
    if cluster is None:
        pytest.fail(f"local cluster unavailable: {_STATE.error}", pytrace=False)
    yield cluster
    with uncaptured(pytestconfig):
        cluster.release(os.getpid())


@pytest.fixture
def cluster_namespace(local_cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards without waiting for it to drain."""
    name = f"sits-test-{uuid.uuid4().hex[:8]}"
    local_cluster.kubectl("create", "namespace", name)
    yield name
    local_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
