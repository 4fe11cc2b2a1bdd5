"""Import the node's images into its shared containerd root before any cluster starts.

Why: the real node's containerd root is one per machine (``realnode.shared_containerd_root``),
so its images are imported once per machine, but that once used to be inside the first
cluster start: about 3 minutes of the first test session or the first ``make demo`` on a
fresh machine, on the critical path. Set-up calls this right after building the images, in
its background job beside the Go builds, so the first start finds them "already in
containerd". A containerd of its own is started on the shared root for the import (its
socket, state and config in a temporary directory) and stopped afterwards.

Not while a cluster's node runs: its containerd holds the root (containerd locks its
metadata database), and that node imports what it lacks itself when a test or the demo asks.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import health, procs, realnode
from .cluster import running_node_owner
from .components import Component
from .images.build import BuiltImage
from .images.ctr import ContainerdImportError, import_images
from .images.rootfs import Progress
from .node import NodeLayout, NodePorts, containerd, containerd_config

#: containerd on an idle machine is serving in well under a second; a loaded one can be slow.
START_TIMEOUT_S = 60.0


def preimport(
    images: Sequence[BuiltImage],
    progress: Progress,
    *,
    root: Path | None = None,
    ports: NodePorts | None = None,
) -> list[BuiltImage]:
    """Import into the node's shared containerd root what it lacks; returns the images
    imported (none while a node runs on it). ``root`` and ``ports`` are for tests: another
    root, and another metrics port than the node's, so a running node is no obstacle."""
    if root is None:
        owner = running_node_owner()
        if owner is not None:
            progress(f"[images] the real node of {owner} is running: it imports what it lacks")
            return []
    store = root or realnode.shared_containerd_root()
    store.mkdir(parents=True, exist_ok=True)
    # In /tmp: the socket's path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(prefix="sits-preimport-", dir="/tmp") as tmp:
        no_bin, no_ca = Path("/nonexistent"), Path(tmp) / "no-ca.crt"  # containerd needs neither
        lay = NodeLayout(Path(tmp), no_bin, no_ca, store, ports or NodePorts())
        lay.containerd_dir.mkdir(parents=True)
        lay.containerd_config.write_text(containerd_config(lay))
        comp = containerd(lay)
        log = Path(tmp) / "containerd.log"
        pid = procs.spawn_detached(comp.argv(), log)
        try:
            _wait_serving(comp, pid, log)
            return import_images(lay.containerd_socket, images, progress, store=store)
        finally:
            procs.stop(pid, comp.binary)


def _wait_serving(comp: Component, pid: int, log: Path) -> None:
    ok, detail = health.wait_until(
        lambda: health.probe(comp.health_url, None),
        START_TIMEOUT_S,
        alive=lambda: procs.pid_alive(pid),
    )
    if not ok:
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise ContainerdImportError(
            f"containerd for the image import did not start ({detail}; another containerd "
            f"holding the same root makes it wait): its log:\n{tail}"
        )
