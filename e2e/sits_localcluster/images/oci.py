"""OCI image config, manifest and image-layout tarball, as ``ctr images import`` reads them.

Why uncompressed layers (media type ``...layer.v1.tar``): these images never cross a
network, they go from this disk into containerd's content store on the same disk. gzip
would cost minutes of single-threaded compression per multi-GB layer here and as long
again to decompress when containerd 1.6 unpacks it (Go's gzip, unless unpigz happens to be
installed), to save disk space we have. Uncompressed, the blob digest is also the layer's
diff_id, and unpacking is a plain read at disk speed.

Everything is serialized canonically (sorted keys, no whitespace, fixed times), so the
same layers and config always give the same manifest digest: that digest is how
:mod:`.ctr` decides whether containerd already has an image.
"""

from __future__ import annotations

import hashlib
import json
import platform
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

from .layers import CLAMP_EPOCH, LayerBlob

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
ANNOTATION_IMAGE_NAME = "io.containerd.image.name"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
CREATED = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(CLAMP_EPOCH))
_GOARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@dataclass(frozen=True)
class ImageConfig:
    """The runtime half of an image: what ``docker inspect`` shows under Config."""

    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    user: str = ""
    workdir: str = ""
    ports: tuple[str, ...] = ()  # "8000/tcp", "53/udp"
    labels: tuple[tuple[str, str], ...] = field(default=())

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int

    def as_json(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def canonical(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def architecture() -> str:
    machine = platform.machine()
    return _GOARCH.get(machine, machine)


def config_json(config: ImageConfig, diff_ids: Sequence[str], history: Sequence[str]) -> bytes:
    """The image config blob; ``history`` has one line per layer (what made it)."""
    runtime: dict[str, Any] = {
        "Entrypoint": list(config.entrypoint),
        "Cmd": list(config.cmd) if config.cmd else None,
        "Env": [f"{key}={value}" for key, value in config.env],
        "User": config.user,
        "WorkingDir": config.workdir,
        "ExposedPorts": {port: {} for port in config.ports},
        "Labels": dict(config.labels),
    }
    return canonical(
        {
            "created": CREATED,
            "architecture": architecture(),
            "os": "linux",
            "config": {key: value for key, value in runtime.items() if value is not None},
            "rootfs": {"type": "layers", "diff_ids": list(diff_ids)},
            "history": [{"created": CREATED, "created_by": line} for line in history],
        }
    )


def manifest_json(config: Descriptor, layers: Sequence[Descriptor]) -> bytes:
    return canonical(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": config.as_json(),
            "layers": [layer.as_json() for layer in layers],
        }
    )


def split_reference(reference: str) -> tuple[str, str]:
    """("sits.local/vllm-cpu", "0.32.0") from "sits.local/vllm-cpu:0.32.0"."""
    repo, sep, tag = reference.rpartition(":")
    if not sep or "/" in tag:
        raise ValueError(f"image reference without a tag: {reference}")
    return repo, tag


def index_json(manifest: Descriptor, reference: str) -> bytes:
    """The layout's index: containerd names the image after ``io.containerd.image.name``."""
    entry = manifest.as_json()
    entry["platform"] = {"architecture": architecture(), "os": "linux"}
    entry["annotations"] = {
        ANNOTATION_IMAGE_NAME: reference,
        ANNOTATION_REF_NAME: split_reference(reference)[1],
    }
    return canonical({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [entry]})


def _member(name: str, size: int, *, directory: bool = False) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime, info.uname, info.gname = CLAMP_EPOCH, "", ""
    if directory:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.size, info.mode = size, 0o644
    return info


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    tar.addfile(_member(name, len(data)), BytesIO(data))


def blob_name(digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    return f"blobs/{algorithm}/{hexdigest}"


def write_layout_tar(
    out: Path, reference: str, config: bytes, layers: Sequence[LayerBlob]
) -> Descriptor:
    """Write an OCI image layout tarball for one image; return its manifest descriptor.

    Layer blobs are streamed from the layer cache; written under a temporary name and
    renamed, so a tar that exists is complete.
    """
    config_desc = Descriptor(MEDIA_CONFIG, sha256_digest(config), len(config))
    layer_descs = [Descriptor(MEDIA_LAYER, blob.digest, blob.size) for blob in layers]
    manifest = manifest_json(config_desc, layer_descs)
    manifest_desc = Descriptor(MEDIA_MANIFEST, sha256_digest(manifest), len(manifest))
    tmp = out.with_name(out.name + ".partial")
    with tarfile.TarFile(tmp, "w", format=tarfile.PAX_FORMAT, copybufsize=1 << 20) as tar:
        _add_bytes(tar, "oci-layout", canonical({"imageLayoutVersion": "1.0.0"}))
        _add_bytes(tar, "index.json", index_json(manifest_desc, reference))
        for name in ("blobs", "blobs/sha256"):
            tar.addfile(_member(name, 0, directory=True))
        _add_bytes(tar, blob_name(manifest_desc.digest), manifest)
        _add_bytes(tar, blob_name(config_desc.digest), config)
        written = set()
        for blob in layers:
            if blob.digest in written:  # the same layer twice in one image: one blob
                continue
            written.add(blob.digest)
            with blob.path.open("rb") as data:
                tar.addfile(_member(blob_name(blob.digest), blob.size), data)
    tmp.rename(out)
    return manifest_desc


def read_layout_tar(path: Path) -> dict[str, Any]:
    """index.json, the manifest and the config of a layout tar (for tests and checks)."""
    with tarfile.open(path) as tar:

        def load(name: str) -> Any:
            member = tar.extractfile(name)
            assert member is not None, name
            return json.loads(member.read())

        index = load("index.json")
        manifest = load(blob_name(index["manifests"][0]["digest"]))
        config = load(blob_name(manifest["config"]["digest"]))
        names = tar.getnames()
    return {"index": index, "manifest": manifest, "config": config, "names": names}


def write_thin_layout_tar(source: Path, out: Path, leave_out: set[str]) -> int:
    """Copy a layout tar without the blobs in ``leave_out``; return how many were left out.

    For an importer that already holds those blobs: containerd 1.6 completes and unpacks an
    image whose manifest names blobs from its content store, so a rebuilt top layer is all
    that has to travel, instead of re-reading the several GB below it.
    """
    skipped = {blob_name(digest) for digest in leave_out}
    count = 0
    with (
        tarfile.open(source) as src,
        tarfile.TarFile(out, "w", format=tarfile.PAX_FORMAT, copybufsize=1 << 20) as dst,
    ):
        for member in src:
            if member.name in skipped:
                count += 1
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
    return count
