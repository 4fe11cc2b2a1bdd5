"""Bring the real node up on a running control plane, and take it down without a trace.

Order matters and each step waits for the previous one to be usable: host network
(the kubelet checks its node IP exists) -> containerd -> images imported (the sandbox
image must be there before the first pod) -> kubelet -> the Node registered, MIG slices
advertised, Ready -> kube-proxy -> CoreDNS Ready. Starting again on a running node redoes
only what is missing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import addons, network, nodeclean, nodenet
from .api import ApiClient
from .bootstrap import BootstrapError, wait_for
from .build import cache_root, read_versions
from .node import CTR, MIG_RESOURCES, NODE_NAME, NodeLayout

Progress = Callable[[str], object]
Kubectl = Callable[..., "subprocess.CompletedProcess[str]"]

NODE_READY_TIMEOUT = 90.0
COREDNS_TIMEOUT = 120.0
#: The images every node start makes sure of; the inference and operator images are
#: multi-GB on first build, so tests and the demo ask for them explicitly.
SYSTEM_IMAGES = ("pause", "coredns")


def shared_containerd_root() -> Path:
    """containerd's root for the machine's one real node, kept between clusters (why:
    ``NodeLayout``). ``SITS_CACHE_DIR`` moves it with the rest of the cache."""
    return cache_root() / "node-containerd"


def coredns_version() -> str:
    return read_versions()["COREDNS_VERSION"]


def ensure_node_images(lay: NodeLayout, names: tuple[str, ...], progress: Progress) -> None:
    """Build (cached by content) and import into the node's containerd what is missing."""
    from .images import ensure_images, import_images

    built = ensure_images(list(names), progress=progress)
    import_images(lay.containerd_socket, built, progress, store=lay.containerd_root)


def advertise_mig(api: ApiClient) -> None:
    """Capacity and allocatable of the MIG slices, as the NVIDIA device plugin sets them.

    A status patch, like the device plugin's: the kubelet keeps extended resources it does
    not manage itself, and its admission checks pods against them.
    """
    patch = {"status": {"capacity": MIG_RESOURCES, "allocatable": MIG_RESOURCES}}
    api.merge_patch(f"/api/v1/nodes/{NODE_NAME}/status", patch)


def _node(api: ApiClient) -> dict[str, Any] | None:
    return api.get(f"/api/v1/nodes/{NODE_NAME}")


def node_not_ready(api: ApiClient) -> list[str]:
    """[] once the node is registered, Ready and shows the MIG slices as allocatable."""
    node = _node(api)
    if node is None:
        return [f"{NODE_NAME} not registered"]
    status = node.get("status", {})
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", [])
    )
    missing = [r for r in MIG_RESOURCES if r not in status.get("allocatable", {})]
    if missing:
        advertise_mig(api)
    waiting = [] if ready else [f"{NODE_NAME} not Ready"]
    return waiting + [f"{r} not advertised" for r in missing]


def coredns_not_ready(api: ApiClient) -> list[str]:
    dep = api.get("/apis/apps/v1/namespaces/kube-system/deployments/coredns")
    ready = (dep or {}).get("status", {}).get("readyReplicas", 0)
    return [] if ready >= 1 else ["coredns not ready"]


def apply_objects(kubectl: Kubectl, objects: list[dict[str, Any]]) -> None:
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    kubectl("apply", "--server-side", "--field-manager=sits-cluster", "-f", "-", input=doc)


def install_addons(api: ApiClient, kubectl: Kubectl, progress: Progress) -> None:
    started = time.monotonic()
    apply_objects(kubectl, [addons.storage_class(), *addons.coredns_objects(coredns_version())])
    wait_for("CoreDNS Ready on the real node", lambda: coredns_not_ready(api), COREDNS_TIMEOUT)
    progress(f"CoreDNS Ready at {network.DNS_SERVICE_IP} in {time.monotonic() - started:.1f} s")


def wait_node_ready(api: ApiClient, progress: Progress) -> None:
    started = time.monotonic()
    try:
        wait_for(f"{NODE_NAME} Ready", lambda: node_not_ready(api), NODE_READY_TIMEOUT)
    except BootstrapError as err:
        raise BootstrapError(f"{err}\nsee the kubelet log") from err
    progress(f"{NODE_NAME} Ready with {MIG_RESOURCES} in {time.monotonic() - started:.1f} s")


def _ctr(lay: NodeLayout, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    argv = [str(CTR), "-a", str(lay.containerd_socket), "-n", "k8s.io", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def active_snapshots(listing: str) -> list[str]:
    """Keys of the writable (``Active``) snapshots in ``ctr snapshots ls`` output: the
    containers' root file systems. Image layers are ``Committed``; an Active one is a
    container's, or an unpack that an interrupted import left behind."""
    rows = (line.split() for line in listing.splitlines()[1:])  # KEY PARENT KIND
    return [row[0] for row in rows if row and row[-1] == "Active"]


def sweep_containers(lay: NodeLayout) -> int:
    """Kill and delete every CRI task and container, and their writable snapshots, while
    containerd runs; returns how many containers there were.

    Why everything: containerd's root outlives the cluster (``NodeLayout``), and a
    container (a pod sandbox included) of a cluster that is gone has no kubelet to remove
    it. Images stay. What this misses (containerd already gone, a shim stuck)
    :mod:`.nodeclean` kills through the pod cgroups afterwards.
    """
    if not lay.containerd_socket.exists():
        return 0
    tasks = _ctr(lay, "tasks", "ls", "-q").stdout.split()
    for task in tasks:
        _ctr(lay, "tasks", "kill", "-a", "-s", "SIGKILL", task)
    for task in tasks:
        _ctr(lay, "tasks", "delete", "-f", task)
    containers = _ctr(lay, "containers", "ls", "-q").stdout.split()
    for container in containers:
        _ctr(lay, "containers", "rm", container)
    for key in active_snapshots(_ctr(lay, "snapshots", "ls").stdout):
        _ctr(lay, "snapshots", "rm", key)
    # The CRI plugin's per-container files (hostname, resolv.conf, logs' fifos) of the
    # containers just removed.
    for kind in ("sandboxes", "containers"):
        for leftover in (lay.containerd_root / "io.containerd.grpc.v1.cri" / kind).glob("*"):
            shutil.rmtree(leftover, ignore_errors=True)
    return len(containers)


def clean_host(lay: NodeLayout, progress: Progress) -> None:
    nodeclean.clean(lay.root, lay.containerd_socket, progress, lay.containerd_root)


def remove_volume_data(lay: NodeLayout, name: str) -> None:
    shutil.rmtree(lay.volumes_dir / name, ignore_errors=True)


def volume_dir(lay: NodeLayout, name: str, source: Path) -> Path:
    """Copy ``source`` into the node's volume directory ``name`` (readable by any uid)."""
    target = lay.volumes_dir / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    for path in [*target.parents, target, *target.rglob("*")]:
        if not path.is_relative_to(lay.volumes_dir):
            continue
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


#: Which cluster (state dir) runs the machine's one real node.
OWNER_FILE = Path("/run/sits-real-node.owner")


def node_owner() -> Path | None:
    try:
        return Path(OWNER_FILE.read_text().strip())
    except FileNotFoundError:
        return None


def claim_node(state_dir: Path) -> None:
    OWNER_FILE.write_text(str(state_dir))


def release_node(state_dir: Path) -> None:
    if node_owner() == state_dir:
        OWNER_FILE.unlink(missing_ok=True)


def setup_network(lay: NodeLayout) -> None:
    nodenet.setup(lay.root)
