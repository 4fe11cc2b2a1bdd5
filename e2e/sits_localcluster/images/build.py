"""Build the local images, each layer cached by the digest of its inputs.

Cache layout under ``$SITS_CACHE_DIR/images`` (default ``~/.cache/sits/images``):

    layers/<stage>-<key>.tar   an uncompressed layer, <key> from the stage's inputs,
    layers/<stage>-<key>.json  its digest and size (written after the tar is complete)
    images/<name>-<key>.oci.tar  an OCI layout tarball, <key> from its config and layers
    work/                      trees being built; emptied at the start and end of a build

Only missing layers are built, parents first. A parent's tree is reused while it is still
on disk (``cp -al`` when another child needs it too, else simply moved), or rebuilt from
the cached layer tars; every tree is deleted once no stage left to build needs it, so at
most one copy of each big tree exists and the tars are the cache. A new layer or image
replaces the older ones of the same stage or image name, so the cache does not grow.
A file lock makes a second concurrent build wait rather than build the same thing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from ..build import cache_root
from .layers import LayerBlob, Snapshot, diff, extract_layers, snapshot, write_layer
from .oci import canonical, config_json, write_layout_tar
from .rootfs import Progress, Root, compile_python, remove_tree, timed
from .specs import ImageSpec, Stage, image_specs

# Bump when layers.py or oci.py change the bytes they write for the same tree.
FORMAT = "1"


def human(size: int) -> str:
    return f"{size / 1e9:.2f} GB" if size >= 1e8 else f"{size / 1e6:.1f} MB"


class ImageBuildError(RuntimeError):
    """An image name is unknown or an image could not be built."""


@dataclass(frozen=True)
class BuiltImage:
    short: str  # "vllm-cpu"
    name: str  # "sits.local/vllm-cpu:0.32.0", what pods name in ``image:``
    tar: Path  # OCI layout tarball for ``ctr images import``
    manifest_digest: str  # what ``ctr images ls`` shows once it is imported
    size: int  # bytes of the tar
    layers: tuple[str, ...]  # layer digests, bottom first


def images_root() -> Path:
    return cache_root() / "images"


def host_pip_cache() -> Path | None:
    """The host's pip cache, shared with the builds (None when pip caching is off)."""
    if os.environ.get("PIP_NO_CACHE_DIR"):
        return None
    default = Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "pip"
    path = Path(os.environ.get("PIP_CACHE_DIR", str(default)))
    path.mkdir(parents=True, exist_ok=True)
    return path


class Store:
    """The on-disk cache: layer tars, image tars and the work area for trees."""

    def __init__(self, root: Path) -> None:
        self.root, self.layers, self.images = root, root / "layers", root / "images"
        self.work = root / "work"
        for path in (self.layers, self.images, self.work):
            path.mkdir(parents=True, exist_ok=True)

    def layer_path(self, stage: Stage, key: str) -> Path:
        return self.layers / f"{stage.name}-{key}.tar"

    def layer(self, stage: Stage, key: str) -> LayerBlob | None:
        """The cached layer, if its tar and metadata are both there and agree."""
        path = self.layer_path(stage, key)
        meta = path.with_suffix(".json")
        if not (path.is_file() and meta.is_file()):
            return None
        info = json.loads(meta.read_text())
        if path.stat().st_size != info["size"]:
            return None
        return LayerBlob(path, info["digest"], info["size"])

    def save_layer(self, stage: Stage, key: str, blob: LayerBlob, seconds: float) -> None:
        meta = {
            "stage": stage.name,
            "key": key,
            "digest": blob.digest,
            "size": blob.size,
            "build_seconds": round(seconds),
        }
        blob.path.with_suffix(".json").write_text(json.dumps(meta, indent=1))
        self.prune(self.layers, stage.name, keep=blob.path, suffix=".tar")

    def prune(self, directory: Path, name: str, keep: Path, suffix: str) -> None:
        """Remove older entries of the same stage or image (and their .json)."""
        pattern = re.compile(rf"{re.escape(name)}-[0-9a-f]{{20}}{re.escape(suffix)}")
        for path in directory.iterdir():
            if path != keep and pattern.fullmatch(path.name):
                path.unlink()
                path.with_name(path.name[: -len(suffix)] + ".json").unlink(missing_ok=True)


def _key(parts: object) -> str:
    return hashlib.sha256(canonical(parts)).hexdigest()[:20]


class Keys:
    """Stage keys: a stage's inputs, its recipe and its parent's key, hashed (memoized)."""

    def __init__(self) -> None:
        self._keys: dict[int, str] = {}

    def __call__(self, stage: Stage) -> str:
        if id(stage) not in self._keys:
            parent = self(stage.parent) if stage.parent else ""
            self._keys[id(stage)] = _key(
                {
                    "format": FORMAT,
                    "stage": stage.name,
                    "recipe": stage.recipe,
                    "parent": parent,
                    "inputs": stage.inputs(),
                }
            )
        return self._keys[id(stage)]


class Builder:
    """Builds the missing layers of some images, managing the trees in ``work/``."""

    def __init__(self, store: Store, keys: Keys, progress: Progress) -> None:
        self.store, self.keys, self.progress = store, keys, progress
        self.live: dict[str, tuple[Path, Snapshot]] = {}  # stage key -> tree, its snapshot
        self.pending: Counter[str] = Counter()  # stage key -> children still to build

    def build_missing(self, specs: Iterable[ImageSpec]) -> None:
        stages: dict[str, Stage] = {}
        for spec in specs:
            for stage in spec.top.chain():
                stages.setdefault(self.keys(stage), stage)
        missing = [(s, k) for k, s in stages.items() if self.store.layer(s, k) is None]
        for stage, _ in missing:
            if stage.parent:
                self.pending[self.keys(stage.parent)] += 1
        for stage, key in missing:
            self._build(stage, key)

    def _parent_tree(self, parent: Stage) -> tuple[Path, Snapshot]:
        """The parent's tree: still on disk from this build, or rebuilt from its layers."""
        key = self.keys(parent)
        if key not in self.live:
            tree = self.store.work / key
            remove_tree(tree)
            blobs = [self.store.layer(s, self.keys(s)) for s in parent.chain()]
            paths = [blob.path for blob in blobs if blob is not None]
            assert len(paths) == len(blobs), "parents are built before their children"
            with timed(self.progress, f"{parent.name}: unpacking its {len(paths)} cached layers"):
                extract_layers(paths, tree)
                self.live[key] = (tree, snapshot(tree))
        return self.live[key]

    def _start_tree(self, stage: Stage, tree: Path) -> Snapshot:
        """Put the parent's content at ``tree``; return what the new layer is diffed against."""
        if stage.parent is None:
            return {}
        parent_key = self.keys(stage.parent)
        parent_tree, before = self._parent_tree(stage.parent)
        self.pending[parent_key] -= 1
        if self.pending[parent_key] > 0:  # another child still needs the parent as it is
            with timed(self.progress, f"{stage.name}: cp -al {stage.parent.name} tree"):
                subprocess.run(["cp", "-al", str(parent_tree), str(tree)], check=True)
        else:
            parent_tree.rename(tree)
            del self.live[parent_key]
        return before

    def _build(self, stage: Stage, key: str) -> None:
        self.progress(f"[images] layer {stage.name} ({key}): building")
        started = time.monotonic()
        tree = self.store.work / key
        remove_tree(tree)
        before = self._start_tree(stage, tree)
        with tempfile.TemporaryDirectory(prefix=f"sits-image-{stage.name}-") as host_dir:
            root = Root(tree, Path(host_dir), host_pip_cache(), self.progress)
            stage.build(root)
            if stage.python:
                self._compile(root, before, stage.python)
        after = snapshot(tree)
        paths, whiteouts = diff(before, after)
        with timed(
            self.progress,
            f"{stage.name}: writing the layer ({len(paths)} entries, {len(whiteouts)} whiteouts)",
        ):
            blob = write_layer(tree, paths, whiteouts, self.store.layer_path(stage, key))
        self.store.save_layer(stage, key, blob, time.monotonic() - started)
        self.progress(
            f"[images] layer {stage.name}: {human(blob.size)}, {blob.digest[:19]}, "
            f"{time.monotonic() - started:.0f} s"
        )
        if self.pending[key] > 0:
            self.live[key] = (tree, after)
        else:
            remove_tree(tree)

    def _compile(self, root: Root, before: Snapshot, python: str) -> None:
        changed, _ = diff(before, snapshot(root.tree))
        sources = sorted(p for p in changed if p.endswith(".py") and (root.tree / p).is_file())
        with timed(self.progress, f"compiling {len(sources)} new .py files (unchecked-hash)"):
            compile_python(root, sources, python)

    def close(self) -> None:
        """Delete every tree, kept or half-built (a failed stage's too)."""
        self.live.clear()
        for tree in self.store.work.iterdir():
            remove_tree(tree)


def assemble(store: Store, spec: ImageSpec, keys: Keys, progress: Progress) -> BuiltImage:
    """The image's layout tar: reused when its config and layers are unchanged."""
    chain = spec.top.chain()
    blobs = [store.layer(stage, keys(stage)) for stage in chain]
    layers = [blob for blob in blobs if blob is not None]
    if len(layers) != len(chain):
        raise ImageBuildError(f"{spec.short}: a layer is missing after the build")
    config = config_json(spec.config, [b.digest for b in layers], [s.describe for s in chain])
    tar = store.images / f"{spec.short}-{_key([spec.reference, config.decode()])}.oci.tar"
    meta = tar.with_name(tar.name.removesuffix(".oci.tar") + ".json")
    if tar.is_file() and meta.is_file():
        saved = json.loads(meta.read_text())
        return BuiltImage(
            spec.short,
            spec.reference,
            tar,
            saved["manifest_digest"],
            tar.stat().st_size,
            tuple(saved["layers"]),
        )
    with timed(progress, f"{spec.short}: writing {tar.name}"):
        manifest = write_layout_tar(tar, spec.reference, config, layers)
    image = BuiltImage(
        spec.short,
        spec.reference,
        tar,
        manifest.digest,
        tar.stat().st_size,
        tuple(b.digest for b in layers),
    )
    meta.write_text(json.dumps({**asdict(image), "tar": str(tar)}, indent=1))
    store.prune(store.images, spec.short, keep=tar, suffix=".oci.tar")
    return image


def select(names: Sequence[str] | None, coredns_binary: Path | None = None) -> list[ImageSpec]:
    specs = image_specs(coredns_binary)
    unknown = sorted(set(names or ()) - set(specs))
    if unknown:
        raise ImageBuildError(f"unknown image(s) {unknown}; known: {sorted(specs)}")
    return list(specs.values()) if names is None else [specs[n] for n in dict.fromkeys(names)]


@contextmanager
def _locked(store: Store, progress: Progress) -> Iterator[None]:
    with (store.root / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress("[images] another build holds the lock; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_images(
    names: Sequence[str] | None = None,
    progress: Progress = print,
    *,
    coredns_binary: Path | None = None,
) -> list[BuiltImage]:
    """Build whatever is missing of these images (all when None); return all of them.

    Needs root (mmdebstrap, chroot, mount namespaces) for the Debian-based images; the
    pause and CoreDNS images need only gcc and the CoreDNS binary.
    """
    specs = select(names, coredns_binary)
    store, keys = Store(images_root()), Keys()
    for spec in specs:  # missing inputs (the CoreDNS binary) fail here, not after the lock
        keys(spec.top)
    with _locked(store, progress):
        for stale in store.work.iterdir():  # left by a build that was killed
            remove_tree(stale)
        builder = Builder(store, keys, progress)
        try:
            builder.build_missing(specs)
        finally:
            builder.close()
        images = [assemble(store, spec, keys, progress) for spec in specs]
    for image in images:
        progress(f"[images] {image.name}: {human(image.size)}, {image.manifest_digest[:19]}")
    return images


def cache_status(
    names: Sequence[str] | None = None, coredns_binary: Path | None = None
) -> list[tuple[ImageSpec, list[str], str]]:
    """(spec, stages whose layer must be built, a note) per image, building nothing."""
    store, keys = Store(images_root()), Keys()
    rows: list[tuple[ImageSpec, list[str], str]] = []
    for spec in select(names, coredns_binary):
        try:
            missing = [s.name for s in spec.top.chain() if store.layer(s, keys(s)) is None]
        except (OSError, RuntimeError) as error:
            rows.append((spec, [], f"cannot tell: {error}"))
            continue
        tars = sorted(store.images.glob(f"{spec.short}-*.oci.tar"))
        note = "layers cached" if not missing else f"to build: {', '.join(missing)}"
        if tars and not missing:
            note += f"; {tars[-1]} ({human(tars[-1].stat().st_size)})"
        rows.append((spec, missing, note))
    return rows
