"""The real node's files: per-cluster state apart from the shared containerd root."""

from __future__ import annotations

from pathlib import Path

import pytest

from sits_localcluster import realnode
from sits_localcluster.node import NodeLayout, containerd_config


def _layout(tmp_path: Path) -> NodeLayout:
    return NodeLayout(
        root=tmp_path / "cluster" / "node",
        bin_dir=tmp_path / "bin",
        ca_cert=tmp_path / "ca.crt",
        containerd_root=tmp_path / "cache" / "node-containerd",
    )


def test_containerd_keeps_images_in_the_shared_root_and_everything_else_per_cluster(
    tmp_path: Path,
) -> None:
    lay = _layout(tmp_path)
    config = containerd_config(lay)
    assert f'root = "{tmp_path / "cache" / "node-containerd"}"' in config
    # State (mounts, network namespaces), socket and runc's state stay with the cluster,
    # which `down` cleans and a purge deletes.
    assert f'state = "{lay.root / "containerd" / "state"}"' in config
    assert f'address = "{lay.containerd_socket}"' in config
    assert lay.containerd_socket.is_relative_to(lay.root)
    assert lay.netns_dir.is_relative_to(lay.root)
    assert f'Root = "{lay.root / "containerd" / "runc"}"' in config


def test_the_shared_root_follows_the_cache_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SITS_CACHE_DIR", str(tmp_path))
    assert realnode.shared_containerd_root() == tmp_path / "node-containerd"


@pytest.mark.parametrize(
    ("listing", "active"),
    [
        ("KEY PARENT KIND\n", []),
        (
            "KEY                      PARENT          KIND\n"
            "sha256:aaa                               Committed\n"
            "sha256:bbb               sha256:aaa      Committed\n"
            "4f1c0e2d                 sha256:bbb      Active\n"
            "extract-12-sha256:ccc    sha256:bbb      Active\n",
            ["4f1c0e2d", "extract-12-sha256:ccc"],
        ),
        ("", []),
    ],
)
def test_only_writable_snapshots_are_swept(listing: str, active: list[str]) -> None:
    assert realnode.active_snapshots(listing) == active
