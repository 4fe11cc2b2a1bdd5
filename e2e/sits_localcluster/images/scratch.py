"""Single-binary images from scratch: the pod sandbox's ``pause`` and CoreDNS.

Neither needs a distribution: pause is a static C program compiled here (no registry to
pull registry.k8s.io/pause from), CoreDNS a static Go binary that
e2e/cluster/build-control-plane.sh builds. Their trees hold the binary and nothing else.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
from pathlib import Path

from .rootfs import Progress, relay

PAUSE_SOURCE = Path(__file__).resolve().parent / "pause.c"
CAP_NET_BIND_SERVICE = 10
# struct vfs_cap_data, revision 2, with the effective flag: what `setcap
# cap_net_bind_service=+ep` writes. Lets CoreDNS bind port 53 as a non-root user, the way
# the upstream CoreDNS image does it; containerd applies it from the layer's PAX xattr.
_VFS_CAP_REVISION_2 = 0x02000000
_VFS_CAP_FLAGS_EFFECTIVE = 0x1


class ScratchError(RuntimeError):
    """A binary for a scratch image is missing or cannot be compiled."""


def file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def compiler_identity() -> str:
    """``gcc --version``'s first line, after checking a static libc exists at all."""
    if shutil.which("gcc") is None:
        raise ScratchError("gcc is not installed (Debian packages: gcc libc6-dev)")
    libc = subprocess.run(
        ["gcc", "-print-file-name=libc.a"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not os.path.isabs(libc) or not Path(libc).is_file():
        raise ScratchError("no static libc (libc.a) for gcc -static (Debian package: libc6-dev)")
    version = subprocess.run(["gcc", "--version"], capture_output=True, text=True, check=True)
    return version.stdout.splitlines()[0]


def pause_inputs() -> dict[str, str]:
    return {"pause.c": file_digest(PAUSE_SOURCE), "gcc": compiler_identity()}


def build_pause_tree(tree: Path, progress: Progress) -> None:
    """/pause, statically linked and stripped, in an otherwise empty tree."""
    tree.mkdir(parents=True)
    binary = tree / "pause"
    argv = [
        "gcc",
        "-static",
        "-Os",
        "-s",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-o",
        str(binary),
        str(PAUSE_SOURCE),
    ]
    relay(argv, progress, what="gcc -static pause.c")
    binary.chmod(0o755)


def require_binary(path: Path, how: str) -> Path:
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ScratchError(f"{path} is missing or not executable: {how}")
    return path


def coredns_inputs(binary: Path) -> dict[str, str]:
    return {"coredns": file_digest(binary)}


def file_capability(*caps: int) -> bytes:
    """The ``security.capability`` xattr value granting ``caps`` permitted+effective."""
    permitted = [0, 0]
    for cap in caps:
        permitted[cap // 32] |= 1 << (cap % 32)
    magic = _VFS_CAP_REVISION_2 | _VFS_CAP_FLAGS_EFFECTIVE
    return struct.pack("<5I", magic, permitted[0], 0, permitted[1], 0)


def build_coredns_tree(tree: Path, binary: Path) -> None:
    """/coredns with cap_net_bind_service, so user 65532 can serve on port 53."""
    tree.mkdir(parents=True)
    target = tree / "coredns"
    shutil.copyfile(binary, target)
    target.chmod(0o755)
    os.setxattr(target, "security.capability", file_capability(CAP_NET_BIND_SERVICE))
