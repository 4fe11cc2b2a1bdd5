"""Remove what the real node's containers leave on the host, so ``down`` leaves nothing.

Stopping the kubelet and containerd does not stop containers: each runs under its own
``containerd-shim-runc-v2``, re-parented to init. So ``down`` kills them through their
cgroups (all under ``/kubepods``: the kubelet runs with ``cgroupsPerQOS``), then removes
the cgroup directories, unmounts everything under the node's state directory (container
root file systems, volumes, network namespaces), deletes the iptables chains kube-proxy
and the kubelet made, and finally the bridge and routes (:mod:`.nodenet`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from . import nodenet, procs

CGROUP_ROOT = Path("/sys/fs/cgroup")
POD_CGROUP = "kubepods"
CHAIN_PREFIXES = ("KUBE-", "CNI-")
TABLES = ("filter", "nat", "mangle")


def pod_cgroup_dirs() -> list[Path]:
    """Every ``kubepods`` directory, one per cgroup v1 controller (and v2 if unified)."""
    found = []
    for controller in sorted(CGROUP_ROOT.iterdir()) if CGROUP_ROOT.is_dir() else []:
        candidate = controller / POD_CGROUP
        if candidate.is_dir():
            found.append(candidate)
    if (CGROUP_ROOT / POD_CGROUP / "cgroup.procs").exists():
        found.append(CGROUP_ROOT / POD_CGROUP)
    return found


def pod_pids() -> set[int]:
    """Pids of every process in a pod cgroup (containers and their sandboxes)."""
    pids: set[int] = set()
    for top in pod_cgroup_dirs():
        for procs_file in top.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs_file.read_text().split())
            except OSError:
                continue
    return pids


def kill_pod_processes(timeout: float = 15.0) -> int:
    """SIGKILL every pod process until none is left; returns how many were killed."""
    killed = 0
    deadline = time.monotonic() + timeout
    while (pids := pod_pids()) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return killed


def kill_shims(socket: Path) -> list[int]:
    """SIGKILL the containerd shims that belong to our containerd (by its socket path)."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = procs.cmdline(int(entry.name))
        if argv and "containerd-shim" in argv[0] and str(socket) in argv:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed


def remove_pod_cgroups() -> None:
    """rmdir the (now empty) pod cgroup trees, deepest first."""
    for top in pod_cgroup_dirs():
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for path in [*dirs, top]:
            with contextlib.suppress(OSError):
                path.rmdir()


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root``, deepest first (from /proc/self/mountinfo)."""
    prefix = str(root.resolve())
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split(" ")[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(set(points), key=lambda p: -p.count("/"))


def unmount_all(root: Path) -> list[str]:
    """Unmount everything below ``root``; a mount that stays busy is detached (lazy)."""
    left = []
    for _ in range(3):
        for point in mounts_under(root):
            if subprocess.run(["umount", point], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", point], capture_output=True)
        left = mounts_under(root)
        if not left:
            break
    return left


CONTAINER_LOG_LINKS = Path("/var/log/containers")


def log_links(node_root: Path) -> list[Path]:
    """The kubelet's links in /var/log/containers (a fixed path) into our pod logs."""
    if not CONTAINER_LOG_LINKS.is_dir():
        return []
    ours = str(node_root / "pod-logs")
    return [
        link
        for link in CONTAINER_LOG_LINKS.iterdir()
        if link.is_symlink() and os.readlink(link).startswith(ours)
    ]


def _chains(binary: str, table: str) -> list[str]:
    out = subprocess.run(
        [binary, "-w", "5", "-t", table, "-S"], capture_output=True, text=True, check=False
    ).stdout
    return [
        line.split()[1]
        for line in out.splitlines()
        if line.startswith("-N ") and line.split()[1].startswith(CHAIN_PREFIXES)
    ]


def remove_kube_chains() -> list[str]:
    """Delete the rules jumping to KUBE-*/CNI-* chains, then the chains (IPv4 and IPv6)."""
    removed = []
    for binary in ("iptables", "ip6tables"):
        for table in TABLES:
            chains = _chains(binary, table)
            if not chains:
                continue
            rules = subprocess.run(
                [binary, "-w", "5", "-t", table, "-S"], capture_output=True, text=True
            ).stdout.splitlines()
            for rule in rules:
                words = shlex.split(rule)
                if rule.startswith("-A ") and any(c in words for c in chains):
                    subprocess.run([binary, "-w", "5", "-t", table, "-D", *words[1:]])
            for chain in chains:
                subprocess.run([binary, "-w", "5", "-t", table, "-F", chain])
            for chain in chains:
                subprocess.run([binary, "-w", "5", "-t", table, "-X", chain])
                removed.append(f"{binary}:{table}:{chain}")
    return removed


def clean(
    node_root: Path, socket: Path, progress: Callable[[str], object], containerd_root: Path
) -> None:
    """Everything after the node's processes are stopped, in dependency order.

    ``containerd_root`` (shared between clusters, kept) only gets its mounts removed: an
    unpack or a snapshot mount can sit there when containerd died mid-operation."""
    shims = kill_shims(socket)
    killed = kill_pod_processes()
    if shims or killed:
        progress(f"killed {len(shims)} containerd shim(s) and {killed} container process(es)")
    remove_pod_cgroups()
    for root in (node_root, containerd_root):
        left = unmount_all(root)
        if left:
            progress(f"WARNING: still mounted under {root}: {', '.join(left)}")
    netns = node_root / "containerd" / "state" / "netns"
    for leftover in netns.iterdir() if netns.is_dir() else []:
        leftover.unlink(missing_ok=True)
    for link in log_links(node_root):
        link.unlink(missing_ok=True)
    chains = remove_kube_chains()
    if chains:
        progress(f"removed {len(chains)} iptables chain(s) of kube-proxy/kubelet/CNI")
    nodenet.teardown(node_root)


def leftovers(node_root: Path, socket: Path, containerd_root: Path) -> list[str]:
    """What of the node is still on the host (empty after a clean ``down``)."""
    found = [
        f"mount {m}"
        for root in (node_root, containerd_root)
        if root.exists()
        for m in mounts_under(root)
    ]
    found += [f"cgroup {p}" for p in pod_cgroup_dirs()]
    found += [f"pod process {pid}" for pid in sorted(pod_pids())]
    found += [f"log link {link}" for link in log_links(node_root)]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            argv = procs.cmdline(int(entry.name))
            if argv and "containerd-shim" in argv[0] and str(socket) in argv:
                found.append(f"shim {entry.name}")
    netns = node_root / "containerd" / "state" / "netns"
    if netns.is_dir():
        found += [f"netns {p}" for p in netns.iterdir()]
    for binary in ("iptables", "ip6tables"):
        for table in TABLES:
            found += [f"{binary} {table} chain {c}" for c in _chains(binary, table)]
    found += nodenet.leftovers()
    found += [f"path {p}" for p in nodenet.fixed_paths_left(node_root)]
    return found
