"""Import built images into containerd, skipping what it already has.

Why compare digests first: the inference image is several GB, and ``ctr images import``
reads the whole tarball even when every blob is already in the content store (measured
here: 142 s to re-import an unchanged 7 GB image, 252 s the first time). A warm node start
asks ``ctr images ls`` once and imports only images whose name is missing or points at
another manifest digest (a rebuilt image keeps its name and gets a new digest); and an
image whose lower layers containerd already holds is imported from a thin copy of its
tar without them (a rebuilt sits-inference: its top layer, not the 7 GB below it).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .build import BuiltImage, human
from .oci import write_thin_layout_tar
from .rootfs import Progress, relay, timed

NAMESPACE = "k8s.io"  # the namespace containerd's CRI plugin (hence the kubelet) uses
#: What an import must leave free on containerd's file system: the pods' writable layers
#: and logs, and a margin above the kubelet's eviction threshold (1 % here, see node.py).
#: Below it the kubelet's eviction manager reclaims space by deleting images (a CI run
#: lost the 7 GB inference image that way, mid-suite), which imported images cannot
#: survive: nothing can pull them back.
DISK_HEADROOM_BYTES = 4 * 2**30


class ContainerdImportError(RuntimeError):
    """containerd did not end up with the image we imported."""


class NotEnoughDiskError(ContainerdImportError):
    """The import would leave containerd's file system too full for the node to run."""


def check_disk(store: Path, image: str, tar_bytes: int) -> None:
    """Refuse, before writing anything, an import that would fill ``store``'s file system.

    containerd keeps the tar's layers twice: as content and unpacked as a snapshot (the
    layers are uncompressed, so about the same size again)."""
    need = 2 * tar_bytes + DISK_HEADROOM_BYTES
    free = shutil.disk_usage(store).free
    if free < need:
        raise NotEnoughDiskError(
            f"not enough disk to import {image} into containerd at {store}: {human(free)} "
            f"free, {human(need)} needed ({human(tar_bytes)} of layers, stored twice, and "
            f"{human(DISK_HEADROOM_BYTES)} left for the pods). Free some space (old "
            f"checkouts; or, with no cluster running, the node's image store: rm -rf {store}, "
            "whose images are imported again) and start again"
        )


def _ctr(ctr: str, socket: Path, namespace: str) -> list[str]:
    return [ctr, "-a", str(socket), "-n", namespace]


def containerd_images(
    socket: Path, *, namespace: str = NAMESPACE, ctr: str = "ctr"
) -> dict[str, str]:
    """Image name -> manifest digest, as ``ctr images ls`` reports them."""
    out = subprocess.run(
        [*_ctr(ctr, socket, namespace), "images", "ls"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    images = {}
    for line in out.splitlines()[1:]:  # REF TYPE DIGEST SIZE PLATFORMS LABELS
        fields = line.split()
        if len(fields) >= 3:
            images[fields[0]] = fields[2]
    return images


def containerd_blobs(socket: Path, *, namespace: str = NAMESPACE, ctr: str = "ctr") -> set[str]:
    """Digests of the blobs in containerd's content store."""
    out = subprocess.run(
        [*_ctr(ctr, socket, namespace), "content", "ls", "-q"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return set(out.split())


@contextmanager
def _thin(image: BuiltImage, present: set[str]) -> Iterator[Path]:
    """The image's tar, or a temporary copy without the layers containerd already has."""
    if not present:
        yield image.tar
        return
    with tempfile.TemporaryDirectory(prefix="thin-", dir=image.tar.parent) as tmp:
        thin = Path(tmp) / image.tar.name
        write_thin_layout_tar(image.tar, thin, present)
        yield thin


def import_images(
    ctr_socket: Path,
    images: Sequence[BuiltImage],
    progress: Progress = print,
    *,
    namespace: str = NAMESPACE,
    ctr: str = "ctr",
    snapshotter: str | None = None,
    store: Path | None = None,
) -> list[BuiltImage]:
    """Import those of ``images`` containerd lacks (unpacked for its snapshotter).

    ``store``, containerd's root (content and snapshots), is checked for space before
    each import (``check_disk``). Returns the images that were imported; raises when one
    is not there afterwards.
    """
    have = containerd_images(ctr_socket, namespace=namespace, ctr=ctr)
    todo = [image for image in images if have.get(image.name) != image.manifest_digest]
    for image in images:
        if image not in todo:
            progress(f"[images] {image.name}: already in containerd ({image.manifest_digest[:19]})")
    argv = [*_ctr(ctr, ctr_socket, namespace), "images", "import"]
    argv += [f"--snapshotter={snapshotter}"] if snapshotter else []
    for image in todo:
        present = set(image.layers) & containerd_blobs(ctr_socket, namespace=namespace, ctr=ctr)
        with _thin(image, present) as tar:
            size = image.size if tar == image.tar else tar.stat().st_size
            if store is not None:
                check_disk(store, image.name, size)
            what = (
                f"ctr images import {image.name} ({human(size)} of {human(image.size)}; "
                f"{len(present)} of {len(image.layers)} layers already there)"
            )
            with timed(progress, what):
                relay([*argv, str(tar)], progress, what=f"ctr images import {tar}")
    if todo:
        have = containerd_images(ctr_socket, namespace=namespace, ctr=ctr)
        wrong = [i.name for i in todo if have.get(i.name) != i.manifest_digest]
        if wrong:
            raise ContainerdImportError(f"containerd lacks {wrong} with the imported digests")
    return todo
