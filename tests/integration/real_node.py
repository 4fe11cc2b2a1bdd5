"""Helpers for tests on the local cluster's real node (``sits-node-0``); the ones the live
demo shares live in ``sits_live.stack``."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sits_localcluster.cluster import LocalCluster


def wait(what: str, check: Callable[[], bool], timeout: float = 90.0, step: float = 0.5) -> float:
    """Poll ``check``; fail the test after ``timeout``. Returns the seconds it took."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)
    return time.monotonic() - start


def routes(host: str, port: int) -> bool:
    """Whether a Service's ClusterIP accepts a TCP connection: a pod turns Ready before
    the endpoint controller and kube-proxy have put it behind the Service (until then
    kube-proxy rejects, and a client sees "connection refused")."""
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return True
    except OSError:
        return False


def container_status(pod: dict[str, Any], name: str) -> dict[str, Any] | None:
    for status in pod.get("status", {}).get("containerStatuses", []):
        if status["name"] == name:
            result: dict[str, Any] = status
            return result
    return None


def kill_container(cluster: LocalCluster, pod: dict[str, Any], container: str) -> None:
    """SIGKILL a container's processes from the host (as the OOM killer or a crash would).

    From inside, PID 1 of a container ignores SIGKILL sent from its own PID namespace.
    """
    status = container_status(pod, container)
    assert status is not None, f"no container {container} in {pod['metadata']['name']}"
    container_id = status["containerID"].removeprefix("containerd://")
    socket = cluster.node_layout().containerd_socket
    subprocess.run(
        [
            "ctr",
            "-a",
            str(socket),
            "-n",
            "k8s.io",
            "tasks",
            "kill",
            "-a",
            "-s",
            "SIGKILL",
            container_id,
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )


def container_cgroup(pod: dict[str, Any], container: str, controller: str = "memory") -> Path:
    """The container's cgroup directory (cgroup v1, cgroupfs driver, kubelet QoS tree)."""
    status = container_status(pod, container)
    assert status is not None
    container_id = str(status["containerID"]).removeprefix("containerd://")
    uid = str(pod["metadata"]["uid"])
    qos = str(pod["status"]["qosClass"]).lower()
    base = Path("/sys/fs/cgroup") / controller / "kubepods"
    pod_dir = base / f"pod{uid}" if qos == "guaranteed" else base / qos / f"pod{uid}"
    return pod_dir / container_id
