"""Image layers as tar files made from directory trees: full layers, diffs, whiteouts.

Why our own tar writer instead of ``tarfile.add``: the same tree must always give the same
bytes (hence the same digest, which is what lets containerd share a layer between images),
so entries are sorted, owners are numeric with no names, times are clamped to a fixed
epoch and no access/change times are written; and a hard link may only point at a file
written earlier in the *same* tar, which ``tarfile``'s own inode bookkeeping does not know.

A diff layer compares a tree with a :data:`Snapshot` of its parent taken before the parent
was hard-link-copied (``cp -al``): unchanged files still share the parent's inode, so the
comparison is cheap, and a file that was rewritten in place through a shared inode still
shows up because its size or mtime no longer match the snapshot.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

# 2026-01-01T00:00:00Z. Files newer than this are written with this mtime, so a rebuild of
# the same content at another time gives the same layer. Python byte code in the images is
# compiled as unchecked-hash .pyc (see rootfs.compile_python), which does not read mtimes.
CLAMP_EPOCH = 1767225600
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
# Runtime mount points: the directories go into the base layer, their contents never do.
RUNTIME_DIRS = frozenset({"dev", "proc", "sys"})
# Extended attributes carried into layers (as PAX SCHILY.xattr records): only file
# capabilities, e.g. CoreDNS' cap_net_bind_service; anything else is host noise.
XATTRS = ("security.capability",)


@dataclass(frozen=True)
class Entry:
    """What a diff needs to know about one path (from ``lstat``)."""

    kind: str  # "f" file, "d" directory, "l" symlink
    mode: int
    uid: int
    gid: int
    size: int
    mtime_ns: int
    ino: int
    target: str = ""  # symlink target


Snapshot = dict[str, Entry]


@dataclass(frozen=True)
class LayerBlob:
    """A written layer: uncompressed, so its digest is also its diff_id."""

    path: Path
    digest: str  # "sha256:<hex>"
    size: int


class _Digesting:
    """A write-only file that hashes what passes through (one pass over multi-GB layers)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.raw.write(data)
        self.size += len(data)
        return len(data)


def _kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return "f"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    return None  # device nodes, sockets, fifos: never part of an image layer


def walk(tree: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every path below ``tree`` (relative, '/'-separated) with its lstat, unsorted.

    Children of /dev, /proc and /sys are skipped: the runtime mounts those.
    """
    stack = [("", str(tree))]
    while stack:
        rel_dir, abs_dir = stack.pop()
        with os.scandir(abs_dir) as it:
            for item in it:
                rel = f"{rel_dir}/{item.name}" if rel_dir else item.name
                st = item.stat(follow_symlinks=False)
                if _kind(st.st_mode) is None:
                    continue
                yield rel, st
                if stat.S_ISDIR(st.st_mode) and rel not in RUNTIME_DIRS:
                    stack.append((rel, item.path))


def entry_of(tree: Path, rel: str, st: os.stat_result) -> Entry:
    kind = _kind(st.st_mode)
    assert kind is not None
    target = os.readlink(tree / rel) if kind == "l" else ""
    return Entry(
        kind,
        stat.S_IMODE(st.st_mode),
        st.st_uid,
        st.st_gid,
        st.st_size if kind == "f" else 0,
        st.st_mtime_ns,
        st.st_ino,
        target,
    )


def snapshot(tree: Path) -> Snapshot:
    """The state of a tree that a later diff is measured against."""
    return {rel: entry_of(tree, rel, st) for rel, st in walk(tree)}


def _changed(old: Entry | None, new: Entry) -> bool:
    """Whether ``new`` must be written to the upper layer."""
    if old is None or old.kind != new.kind or (old.uid, old.gid) != (new.uid, new.gid):
        return True
    if new.kind == "l":
        return old.target != new.target
    if new.kind == "d":  # cp -al makes new directories: compare metadata, not inodes
        return (old.mode, old.mtime_ns) != (new.mode, new.mtime_ns)
    return (old.ino, old.size, old.mtime_ns, old.mode) != (
        new.ino,
        new.size,
        new.mtime_ns,
        new.mode,
    )


def diff(old: Snapshot, new: Snapshot) -> tuple[list[str], list[str]]:
    """(paths to write, paths to white out) turning ``old`` into ``new``.

    Only the top-most removed path gets a whiteout: removing a directory removes its
    children, and a directory replaced by a file or link needs none at all (the new entry
    replaces it when containerd applies the layer).
    """
    changed = [rel for rel, entry in new.items() if _changed(old.get(rel), entry)]
    removed = []
    for rel in old:
        if rel in new:
            continue
        parent = rel.rpartition("/")[0]
        if not parent or (parent in new and new[parent].kind == "d"):
            removed.append(rel)
    return changed, removed


def whiteout_name(rel: str) -> str:
    parent, _, name = rel.rpartition("/")
    return f"{parent}/{WHITEOUT}{name}" if parent else f"{WHITEOUT}{name}"


def _sort_key(rel: str) -> list[str]:
    """Path components: a directory always sorts before its contents."""
    return rel.split("/")


def _xattr_records(path: Path) -> dict[str, str]:
    records = {}
    for name in XATTRS:
        try:
            value = os.getxattr(path, name, follow_symlinks=False)
        except OSError:
            continue
        # tarfile writes a surrogate-escaped value back as the raw bytes (hdrcharset=BINARY).
        records[f"SCHILY.xattr.{name}"] = value.decode("utf-8", "surrogateescape")
    return records


def _tarinfo(tree: Path, rel: str, links: dict[tuple[int, int], str]) -> tarfile.TarInfo:
    """A normalized header for one path; regular files carry their size, others none."""
    path = tree / rel
    st = path.lstat()
    info = tarfile.TarInfo(rel)
    info.mode = stat.S_IMODE(st.st_mode)
    info.uid, info.gid = st.st_uid, st.st_gid
    info.uname = info.gname = ""
    info.mtime = min(int(st.st_mtime), CLAMP_EPOCH)
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISLNK(st.st_mode):
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
    else:
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and key in links:
            info.type, info.linkname = tarfile.LNKTYPE, links[key]
        else:
            links[key] = rel
            info.type, info.size = tarfile.REGTYPE, st.st_size
            info.pax_headers = _xattr_records(path)
    return info


def _whiteout_info(rel: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(whiteout_name(rel))
    info.mode, info.mtime, info.uname, info.gname = 0, CLAMP_EPOCH, "", ""
    return info


def write_layer(tree: Path, paths: Iterable[str], whiteouts: Iterable[str], out: Path) -> LayerBlob:
    """Write ``paths`` of ``tree`` plus whiteout entries as a deterministic tar at ``out``.

    Written to a temporary name and renamed, so a layer in the cache is always complete.
    """
    entries = [(rel, False) for rel in paths] + [(whiteout_name(r), True) for r in whiteouts]
    entries.sort(key=lambda item: _sort_key(item[0]))
    removed = {whiteout_name(r): r for r in whiteouts}
    links: dict[tuple[int, int], str] = {}
    tmp = out.with_name(out.name + ".partial")
    with tmp.open("wb") as raw:
        sink = _Digesting(raw)
        stream = cast(IO[bytes], sink)
        with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for name, is_whiteout in entries:
                if is_whiteout:
                    tar.addfile(_whiteout_info(removed[name]))
                    continue
                info = _tarinfo(tree, name, links)
                if info.type != tarfile.REGTYPE:
                    tar.addfile(info)
                    continue
                with (tree / name).open("rb") as data:
                    tar.addfile(info, data)
        raw.flush()
        os.fsync(raw.fileno())
    tmp.rename(out)
    return LayerBlob(out, f"sha256:{sink.sha.hexdigest()}", sink.size)


def write_full_layer(tree: Path, out: Path) -> LayerBlob:
    return write_layer(tree, [rel for rel, _ in walk(tree)], [], out)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _apply_whiteout(dest: Path, member: tarfile.TarInfo) -> None:
    parent, _, name = member.name.rstrip("/").rpartition("/")
    if name == OPAQUE:
        for child in (dest / parent).iterdir():
            _remove(child)
    else:
        _remove(dest / parent / name[len(WHITEOUT) :])


def extract_layers(layers: Iterable[Path], dest: Path) -> None:
    """Rebuild a tree from layer tars (in order), applying whiteouts as containerd does.

    An existing non-directory is unlinked before it is replaced, never written through:
    it may be a hard link whose other name belongs to a lower layer.
    """
    dest.mkdir(parents=True, exist_ok=True)
    for layer in layers:
        with tarfile.open(layer, mode="r|") as tar:
            for member in tar:
                if member.name.rpartition("/")[2].startswith(WHITEOUT):
                    _apply_whiteout(dest, member)
                    continue
                target = dest / member.name
                if (target.exists() or target.is_symlink()) and not (
                    member.isdir() and target.is_dir() and not target.is_symlink()
                ):
                    _remove(target)
                tar.extract(member, dest, numeric_owner=True, filter="fully_trusted")
