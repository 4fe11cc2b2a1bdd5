"""Get the control-plane binaries: from the cache, or built by ``build-control-plane.sh``.

No package registry ships kube-apiserver, so the binaries are compiled from the Go module
proxy by the shell script next to ``versions.env`` (one source of truth for CI, the CLI and
the pytest fixture). A cold build takes tens of minutes on 2 cores, hence the cache keyed by
versions, the Python-side fast path that does not even start bash when all binaries are
there, and a file lock so that two concurrent callers never build the same thing twice.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

Progress = Callable[[str], object]

CONTROL_PLANE = ("etcd", "kwok", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
NODE = ("kubelet", "kube-proxy")
CLUSTER_DIR = Path(__file__).resolve().parent.parent / "cluster"
BUILD_SCRIPT = CLUSTER_DIR / "build-control-plane.sh"
VERSIONS_FILE = CLUSTER_DIR / "versions.env"


class BuildError(RuntimeError):
    """The binaries could not be built; the message carries the tail of the build output."""


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse ``versions.env`` (KEY=VALUE lines, ``#`` comments) exactly like bash sources it."""
    versions: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            versions[key.strip()] = value.strip().strip("'\"")
    return versions


def cache_root() -> Path:
    return Path(os.environ.get("SITS_CACHE_DIR", str(Path.home() / ".cache" / "sits")))


def default_bin_dir(versions: dict[str, str] | None = None) -> Path:
    """The directory the build script fills; must match the script's ``key`` formula."""
    v = versions or read_versions()
    key = f"k8s-{v['KUBERNETES_VERSION']}-etcd-{v['ETCD_VERSION']}-kwok-{v['KWOK_VERSION']}"
    return cache_root() / key / "bin"


def required_binaries(versions: dict[str, str] | None = None) -> tuple[str, ...]:
    """The control plane's and the real node's binaries (CoreDNS named by its version)."""
    v = versions or read_versions()
    return (*CONTROL_PLANE, *NODE, f"coredns-{v['COREDNS_VERSION']}")


def missing_binaries(bin_dir: Path) -> list[str]:
    return [name for name in required_binaries() if not os.access(bin_dir / name, os.X_OK)]


def ensure_binaries(progress: Progress = print) -> Path:
    """Return the bin dir holding all five binaries, building whatever is missing.

    ``SITS_BIN_DIR`` points at prebuilt binaries and is only checked, never built into.
    Build output is streamed line by line to ``progress`` because a silent 30-minute step
    looks exactly like a hang.
    """
    override = os.environ.get("SITS_BIN_DIR")
    if override:
        bin_dir = Path(override)
        missing = missing_binaries(bin_dir)
        if missing:
            raise BuildError(f"SITS_BIN_DIR={bin_dir} lacks {', '.join(missing)}")
        return bin_dir
    bin_dir = default_bin_dir()
    if not missing_binaries(bin_dir):
        return bin_dir
    bin_dir.parent.mkdir(parents=True, exist_ok=True)
    with (bin_dir.parent / ".build.lock").open("w") as lock:
        progress(f"building control-plane binaries into {bin_dir} (waiting for the build lock)")
        fcntl.flock(lock, fcntl.LOCK_EX)
        if missing_binaries(bin_dir):
            _run_build_script(bin_dir, progress)
    missing = missing_binaries(bin_dir)
    if missing:
        raise BuildError(f"build finished but {bin_dir} lacks {', '.join(missing)}")
    return bin_dir


def _run_build_script(bin_dir: Path, progress: Progress) -> None:
    """Run the script, relay its stderr lines, and raise with the last lines on failure."""
    tail: list[str] = []
    with subprocess.Popen(
        ["bash", str(BUILD_SCRIPT), str(bin_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            progress(line)
            tail = [*tail[-39:], line]
        rc = proc.wait()
    if rc != 0:
        raise BuildError(
            f"{BUILD_SCRIPT} failed with exit code {rc}; last output:\n" + "\n".join(tail)
        )
