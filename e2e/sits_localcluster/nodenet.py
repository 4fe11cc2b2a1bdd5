"""Host network pieces of the real node: the bridge, the block's routes, two guards.

Set up before the kubelet starts (it checks that its node IP is on an interface) and
removed by ``down``. Everything made here is named so it can be found and removed
exactly: the bridge ``sits0``, routes for ``network.BLOCK`` and ``network.SERVICE_CIDR``,
and the iptables chain ``SITS-GUARD``. What the kernel had before (``ip_forward``,
``bridge-nf-call-iptables``) is recorded in the state dir and put back.

The guards:
- ``unreachable`` for the whole block beside the bridge's /24: a packet to a pod or
  Service address nobody holds fails here instead of following the default route out of
  the machine.
- the Service range is routed onto the bridge (not unreachable), because a connection the
  host opens to a ClusterIP is routed *before* kube-proxy's DNAT rewrites it.
- ``SITS-GUARD`` accepts the apiserver's port only from loopback and the bridge: the
  apiserver listens on all addresses so pods reach it through the ``kubernetes`` Service.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from . import network

GUARD_CHAIN = "SITS-GUARD"
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/bridge/bridge-nf-call-iptables",
)


class NodeNetError(RuntimeError):
    """A host network command failed; the message carries the command and its stderr."""


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise NodeNetError(f"{' '.join(cmd)} failed: {result.stderr.strip()}")
    return result


def link_exists(name: str) -> bool:
    return _run("ip", "link", "show", name, check=False).returncode == 0


def _ensure_br_netfilter() -> None:
    """Service traffic between two pods on one bridge must pass iptables (kube-proxy's DNAT)."""
    if not Path("/proc/sys/net/bridge").is_dir():
        _run("modprobe", "br_netfilter", check=False)
    if not Path("/proc/sys/net/bridge").is_dir():
        raise NodeNetError("br_netfilter is not available: /proc/sys/net/bridge is missing")


def _save_and_set_sysctls(saved: Path) -> None:
    if not saved.exists():
        before = {name: Path("/proc/sys", name).read_text().strip() for name in SYSCTLS}
        saved.write_text(json.dumps(before))
    for name in SYSCTLS:
        Path("/proc/sys", name).write_text("1")


def _restore_sysctls(saved: Path) -> None:
    try:
        before = json.loads(saved.read_text())
    except FileNotFoundError:
        return
    for name, value in before.items():
        path = Path("/proc/sys", name)
        if path.exists():
            path.write_text(str(value))
    saved.unlink(missing_ok=True)


def _ensure_bridge() -> None:
    if not link_exists(network.BRIDGE):
        _run("ip", "link", "add", network.BRIDGE, "type", "bridge")
    addr = f"{network.NODE_IP}/{network.NODE_POD_CIDR.split('/')[1]}"
    shown = _run("ip", "-o", "addr", "show", "dev", network.BRIDGE).stdout
    if addr not in shown:
        _run("ip", "addr", "add", addr, "dev", network.BRIDGE)
    _run("ip", "link", "set", network.BRIDGE, "up")


def _ensure_routes() -> None:
    _run("ip", "route", "replace", "unreachable", network.BLOCK)
    service_route = (network.SERVICE_CIDR, "dev", network.BRIDGE, "src", network.NODE_IP)
    _run("ip", "route", "replace", *service_route)


def _iptables(
    *args: str, check: bool = True, binary: str = "iptables"
) -> subprocess.CompletedProcess[str]:
    return _run(binary, "-w", "5", *args, check=check)


#: The apiserver's wildcard listener takes IPv4 and IPv6: both families are guarded.
IPTABLES = ("iptables", "ip6tables")


def ensure_apiserver_guard(port: int) -> None:
    """The apiserver's port is reachable from loopback and the bridge only (idempotent)."""
    for binary in IPTABLES:
        if _iptables("-n", "-L", GUARD_CHAIN, check=False, binary=binary).returncode != 0:
            _iptables("-N", GUARD_CHAIN, binary=binary)
        _iptables("-F", GUARD_CHAIN, binary=binary)
        _iptables("-A", GUARD_CHAIN, "-i", "lo", "-j", "RETURN", binary=binary)
        _iptables("-A", GUARD_CHAIN, "-i", network.BRIDGE, "-j", "RETURN", binary=binary)
        _iptables("-A", GUARD_CHAIN, "-j", "DROP", binary=binary)
        jump = ("INPUT", "-p", "tcp", "--dport", str(port), "-j", GUARD_CHAIN)
        if _iptables("-C", *jump, check=False, binary=binary).returncode != 0:
            _iptables("-I", *jump, binary=binary)


def guard_port(port: int) -> None:
    """Another listener on the node IP (the live stack's Prometheus, for the operator pod)
    gets the apiserver's guard: reachable from loopback and the bridge only. The chain
    exists while the node runs; ``unguard_port`` (or ``down``) removes the jump."""
    for binary in IPTABLES:
        jump = ("INPUT", "-p", "tcp", "--dport", str(port), "-j", GUARD_CHAIN)
        if _iptables("-C", *jump, check=False, binary=binary).returncode != 0:
            _iptables("-I", *jump, binary=binary)


def unguard_port(port: int) -> None:
    for binary in IPTABLES:
        jump = ("INPUT", "-p", "tcp", "--dport", str(port), "-j", GUARD_CHAIN)
        while _iptables("-C", *jump, check=False, binary=binary).returncode == 0:
            _iptables("-D", *jump, binary=binary)


def remove_apiserver_guard(port: int | None = None) -> None:
    """Remove the jump of ``port``'s apiserver (every jump when None), then the chain itself
    once no jump to it is left: two clusters (the demo's and the tests') share the chain,
    and stopping one must not unguard the other."""
    for binary in IPTABLES:
        listing = _iptables("-S", "INPUT", check=False, binary=binary).stdout.splitlines()
        jumps = [r for r in listing if r.startswith("-A INPUT") and f"-j {GUARD_CHAIN}" in r]
        mine = [r for r in jumps if port is None or f"--dport {port} " in f"{r} "]
        for rule in mine:
            _iptables("-D", *rule.split()[1:], check=False, binary=binary)
        if len(mine) == len(jumps) and (
            _iptables("-n", "-L", GUARD_CHAIN, check=False, binary=binary).returncode == 0
        ):
            _iptables("-F", GUARD_CHAIN, binary=binary)
            _iptables("-X", GUARD_CHAIN, binary=binary)


#: Paths the kubelet and containerd use whatever they are told (compiled-in defaults: the
#: device-plugin directory, the CNI result cache, containerd's fifo and shim socket
#: directories, the log links). ``down`` removes those that did not exist before ``up``.
FIXED_PATHS = (
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/run/containerd",
    "/var/log/containers",
    "/var/log/pods",
)


def _record_fixed_paths(saved: Path) -> None:
    """Called once per start (after any clean-up): which fixed paths this start creates."""
    saved.write_text(json.dumps([p for p in FIXED_PATHS if not Path(p).exists()]))


def _remove_fixed_paths(saved: Path) -> None:
    try:
        created = json.loads(saved.read_text())
    except FileNotFoundError:
        return
    for path in created:
        shutil.rmtree(path, ignore_errors=True)


def fixed_paths_left(state_dir: Path) -> list[str]:
    """Fixed paths this node created that still exist (empty after ``down``)."""
    try:
        created = json.loads((state_dir / "fixed-paths-created.json").read_text())
    except FileNotFoundError:
        return []
    return [p for p in created if Path(p).exists()]


def setup(state_dir: Path) -> None:
    """Bridge with the node IP, routes, sysctls; safe to call again on a running node."""
    _ensure_br_netfilter()
    state_dir.mkdir(parents=True, exist_ok=True)
    _save_and_set_sysctls(state_dir / "sysctls-before.json")
    _record_fixed_paths(state_dir / "fixed-paths-created.json")
    _ensure_bridge()
    _ensure_routes()


def teardown(state_dir: Path) -> None:
    """Remove the routes, the veths left on the bridge, the bridge; restore sysctls. The
    block's ``unreachable`` route stays while a cluster still holds the block guard."""
    _run("ip", "route", "del", network.SERVICE_CIDR, check=False)
    if not block_guard_users():
        _run("ip", "route", "del", "unreachable", network.BLOCK, check=False)
    for veth in bridge_ports():
        _run("ip", "link", "del", veth, check=False)
    if link_exists(network.BRIDGE):
        _run("ip", "link", "del", network.BRIDGE)
    _restore_sysctls(state_dir / "sysctls-before.json")
    _remove_fixed_paths(state_dir / "fixed-paths-created.json")


#: One file per running cluster (named by a digest of its state dir) that holds the guard.
BLOCK_GUARD_USERS = Path("/run/sits-block-guard")


def block_guard_users() -> list[str]:
    """State dirs of the clusters holding the block guard (entries of removed dirs pruned)."""
    if not BLOCK_GUARD_USERS.is_dir():
        return []
    users = []
    for entry in BLOCK_GUARD_USERS.iterdir():
        state_dir = entry.read_text().strip()
        if Path(state_dir).is_dir():
            users.append(state_dir)
        else:
            entry.unlink(missing_ok=True)
    return users


def _guard_entry(state_dir: Path) -> Path:
    return BLOCK_GUARD_USERS / hashlib.sha256(str(state_dir).encode()).hexdigest()[:16]


def ensure_block_guard(state_dir: Path) -> None:
    """The block is ``unreachable`` on the host for as long as a cluster runs, node or not.

    Why also without the real node: kwok gives pods fake addresses in the block, and the
    operator connects to them (it reads the gateway pods' routing); without the route such
    a connection follows the default route out of the machine instead of failing here.
    """
    BLOCK_GUARD_USERS.mkdir(parents=True, exist_ok=True)
    _guard_entry(state_dir).write_text(str(state_dir))
    _run("ip", "route", "replace", "unreachable", network.BLOCK)


def release_block_guard(state_dir: Path) -> None:
    """This cluster no longer needs the guard; the route goes with the last holder (and
    only when no real node, whose pods are in the block, is on the host)."""
    _guard_entry(state_dir).unlink(missing_ok=True)
    if block_guard_users() or link_exists(network.BRIDGE):
        return
    _run("ip", "route", "del", "unreachable", network.BLOCK, check=False)
    if BLOCK_GUARD_USERS.is_dir() and not any(BLOCK_GUARD_USERS.iterdir()):
        BLOCK_GUARD_USERS.rmdir()


def bridge_ports() -> list[str]:
    """Interfaces enslaved to the bridge (the host ends of pod veths)."""
    if not link_exists(network.BRIDGE):
        return []
    out = _run("ip", "-o", "link", "show", "master", network.BRIDGE, check=False).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def leftovers() -> list[str]:
    """What of ours is still on the host; ``down`` must leave this empty (tests check)."""
    found = []
    if link_exists(network.BRIDGE):
        found.append(f"link {network.BRIDGE}")
    routes = _run("ip", "route", "show", "table", "all", check=False).stdout
    for line in routes.splitlines():
        if line.split(" ")[:2] in (["unreachable", network.BLOCK], [network.SERVICE_CIDR, "dev"]):
            found.append(f"route {line.strip()}")
    for binary in IPTABLES:
        for rule in _iptables("-S", check=False, binary=binary).stdout.splitlines():
            if GUARD_CHAIN in rule:
                found.append(f"{binary} {rule}")
    veths = _run("ip", "-o", "link", "show", "type", "veth", check=False).stdout
    for line in veths.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith("veth"):  # the CNI bridge plugin's host-side names
            found.append(f"veth {name}")
    return found
