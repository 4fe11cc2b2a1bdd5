"""``LocalCluster``: start, reuse, inspect and stop the loopback-only control plane.

One implementation serves the ``sits-cluster`` CLI, the pytest fixture and CI, so that a
cluster a developer started by hand is exactly what the tests would have started. State
(PKI, etcd data, logs, pid records) lives in one directory, ``~/.local/state/sits/cluster``
unless ``SITS_CLUSTER_DIR`` says otherwise; nothing is written anywhere else.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from . import bootstrap, health, nodeclean, nodenet, procs, realnode
from .api import ApiClient
from .build import Progress, ensure_binaries
from .components import HOST, Component, Layout, Ports, all_components
from .node import NODE_NAME, NodeLayout, node_components, write_configs
from .pki import PkiPaths, ensure_pki, write_admin_kubeconfig, write_client_kubeconfig

KUBECTL = "/usr/bin/kubectl"
ETCD_TIMEOUT = 30.0
APISERVER_TIMEOUT = 120.0
COMPONENT_TIMEOUT = 60.0
BOOTSTRAP_TIMEOUT = 90.0


class ClusterError(RuntimeError):
    """The cluster could not be started or used; the message names the log to read."""


class KubectlError(ClusterError):
    """kubectl exited non-zero; carries the command and its stderr."""

    def __init__(self, args: list[str], result: subprocess.CompletedProcess[str]) -> None:
        super().__init__(
            f"kubectl {' '.join(args)} failed (exit {result.returncode}):\n{result.stderr.strip()}"
        )
        self.result = result


@dataclass(frozen=True)
class ComponentStatus:
    """What ``sits-cluster status`` prints for one process."""

    name: str
    pid: int | None
    alive: bool
    endpoint: str
    log: Path


def node_wanted_by_default() -> bool:
    """The real node starts unless ``SITS_REAL_NODE=0`` (kwok-only fast runs)."""
    return os.environ.get("SITS_REAL_NODE", "1") != "0"


def default_state_dir() -> Path:
    env = os.environ.get("SITS_CLUSTER_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".local" / "state" / "sits" / "cluster"


class LocalCluster:
    """A local control plane with fake GPU nodes, owned through its state directory."""

    def __init__(
        self,
        state_dir: Path | None = None,
        *,
        bin_dir: Path | None = None,
        ports: Ports | None = None,
        progress: Progress = print,
        node: bool | None = None,
    ) -> None:
        self.state_dir = (state_dir or default_state_dir()).expanduser().resolve()
        self.ports = ports or Ports.from_env()
        self.progress = progress
        self._bin_dir = bin_dir
        self.node = node_wanted_by_default() if node is None else node

    # ----- paths and addresses -------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{HOST}:{self.ports.apiserver}"

    @property
    def pki(self) -> PkiPaths:
        return PkiPaths(self.state_dir / "pki")

    def log_file(self, name: str) -> Path:
        return self.state_dir / "logs" / f"{name}.log"

    def _record_file(self, name: str) -> Path:
        return self.state_dir / "run" / f"{name}.json"

    def _layout(self, bin_dir: Path) -> Layout:
        return Layout(
            bin_dir=bin_dir,
            state_dir=self.state_dir,
            ports=self.ports,
            pki=self.pki,
            kubeconfig=self.kubeconfig,
            kwok_config=self.state_dir / "kwok.yaml",
        )

    def node_layout(self, bin_dir: Path | None = None) -> NodeLayout:
        """Files of the real node; the bin dir only matters for starting."""
        return NodeLayout(
            root=self.state_dir / "node",
            bin_dir=bin_dir or self._bin_dir or Path("/nonexistent"),
            ca_cert=self.pki.ca_cert,
            containerd_root=realnode.shared_containerd_root(),
        )

    def _control_plane(self) -> list[Component]:
        return all_components(self._layout(self._bin_dir or Path("/nonexistent")))

    def _node_components(self) -> list[Component]:
        return node_components(self.node_layout())

    def _components(self) -> list[Component]:
        """Component definitions, the node's included when it is wanted."""
        return self._control_plane() + (self._node_components() if self.node else [])

    # ----- process records -----------------------------------------------------------

    def _read_record(self, name: str) -> tuple[int, Path] | None:
        """(pid, binary) of a started component, as written by ``_start``."""
        try:
            data = json.loads(self._record_file(name).read_text())
            return int(data["pid"]), Path(data["binary"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None

    def _alive(self, name: str) -> bool:
        record = self._read_record(name)
        return record is not None and procs.is_running(*record)

    def _still_alive(self, name: str) -> bool:
        """Alive, or alive again within 3 s: odd reads of /proc under heavy load must not
        fail a start that is going fine (seen on a 2-core machine at load 12, and once in
        a CI run for containerd, whose failed start then left it running)."""
        for _ in range(10):
            if self._alive(name):
                return True
            record = self._read_record(name)
            if record is None or not procs.pid_alive(record[0]):
                return False  # gone for good: no need to wait
            time.sleep(0.3)
        return self._alive(name)

    def pids(self) -> dict[str, int | None]:
        """Pid of each component as recorded (alive or not); handy for reuse checks."""
        out: dict[str, int | None] = {}
        for comp in self._components():
            record = self._read_record(comp.name)
            out[comp.name] = record[0] if record else None
        return out

    def status(self) -> list[ComponentStatus]:
        statuses = []
        for comp in self._components():
            record = self._read_record(comp.name)
            statuses.append(
                ComponentStatus(
                    name=comp.name,
                    pid=record[0] if record else None,
                    alive=record is not None and procs.is_running(*record),
                    endpoint=comp.endpoint,
                    log=self.log_file(comp.name),
                )
            )
        return statuses

    def readyz(self) -> tuple[bool, str]:
        """The apiserver's /readyz, authenticated with the admin cert."""
        if not self.pki.admin_cert.is_file():
            return False, "no PKI yet"
        return health.probe(f"{self.server}/readyz", health.client_context(self.pki))

    def is_running(self) -> bool:
        """All five processes alive and the apiserver ready: what ``up()`` reuses."""
        return all(s.alive for s in self.status()) and self.readyz()[0]

    def api(self) -> ApiClient:
        return ApiClient(self.server, health.client_context(self.pki))

    # ----- lifecycle -----------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialize up()/down() across processes (a CLI call racing a pytest session)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / ".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def up(self, user_pid: int | None = None, *, persist: bool = False) -> bool:
        """Start the cluster, or reuse a healthy one. Returns True when it started it.

        A half-dead cluster (some processes gone, or the apiserver not ready) is stopped
        and started again with its data and PKI kept.

        ``user_pid`` (test sessions) registers that process as a user under the same lock,
        so no other session can stop the cluster in between; if this call started the
        cluster, the last registered user to :meth:`release` it stops it. ``persist``
        (``sits-cluster up``: a person wants it) cancels that: the cluster then stays up
        until ``sits-cluster down``.
        """
        with self._locked():
            if user_pid is not None:
                self._users_dir().mkdir(parents=True, exist_ok=True)
                (self._users_dir() / str(user_pid)).touch()
            started = self._up_locked()
            if persist:
                self._stop_marker().unlink(missing_ok=True)
            elif started and user_pid is not None:
                self._stop_marker().touch()
            return started

    def _up_locked(self) -> bool:
        control_plane = [c.name for c in self._control_plane()]
        if all(self._alive(n) for n in control_plane) and self.readyz()[0]:
            start = time.monotonic()
            nodenet.ensure_block_guard(self.state_dir)
            bootstrap.ensure_gpu_nodes(self.api())
            if self.node:
                self._ensure_node()
            self.progress(
                f"reusing running cluster at {self.server} "
                f"(checked in {time.monotonic() - start:.1f} s)"
            )
            return False
        if any(s.alive for s in self.status()):
            self.progress("cluster is half-running: stopping it before a clean start")
            self._stop_all()
        self._start_all()
        return True

    def _node_running(self) -> bool:
        return all(self._alive(c.name) for c in self._node_components())

    def _ensure_node(self) -> None:
        """Start the real node on a running control plane, or check a running one."""
        if self._node_running():
            realnode.wait_node_ready(self.api(), self.progress)
            realnode.install_addons(self.api(), self.kubectl, self.progress)
            return
        if any(self._alive(c.name) for c in self._node_components()):
            self.progress("the real node is half-running: stopping it before a clean start")
        self._check_node_owner()
        self._stop_node()  # whatever a crashed earlier run left (no-op on a clean host)
        self._bin_dir = self._bin_dir or ensure_binaries(self.progress)
        self._start_node()

    def _check_node_owner(self) -> None:
        """One real node per machine: its bridge, address block and cgroups are global."""
        owner = running_node_owner()
        if owner is not None and owner != self.state_dir:
            raise ClusterError(
                f"the real node of the cluster in {owner} is running; stop it first "
                f"(SITS_CLUSTER_DIR={owner} sits-cluster down) or start this one with "
                "--no-node"
            )

    def _start_node(self) -> None:
        """Host network, containerd, images, kubelet, kube-proxy, CoreDNS; undone on failure."""
        started = time.monotonic()
        lay = self.node_layout()
        try:
            realnode.claim_node(self.state_dir)
            realnode.setup_network(lay)
            write_configs(lay)
            write_client_kubeconfig(
                self.pki,
                self.server,
                lay.kubelet_kubeconfig,
                f"system:node:{NODE_NAME}",
                ("system:nodes",),
            )
            write_client_kubeconfig(
                self.pki, self.server, lay.proxy_kubeconfig, "system:kube-proxy"
            )
            comps = {c.name: c for c in node_components(lay)}
            self._start_and_wait([comps["containerd"]], COMPONENT_TIMEOUT)
            self._sweep_stale_containers(comps["containerd"])
            realnode.ensure_node_images(lay, realnode.SYSTEM_IMAGES, self.progress)
            self._start_and_wait([comps["kubelet"]], COMPONENT_TIMEOUT)
            realnode.wait_node_ready(self.api(), self.progress)
            self._start_and_wait([comps["kube-proxy"]], COMPONENT_TIMEOUT)
            realnode.install_addons(self.api(), self.kubectl, self.progress)
        except BaseException as err:
            # Whatever stopped the start (a timeout, pytest's Failed, Ctrl-C included),
            # nothing it started may outlive it.
            self._stop_node_after_failure()
            if isinstance(err, ClusterError) or not isinstance(err, Exception):
                raise
            logs = ", ".join(str(self.log_file(c)) for c in ("containerd", "kubelet", "kube-proxy"))
            raise ClusterError(f"the real node did not start: {err}\nsee {logs}") from err
        self.progress(f"real node {NODE_NAME} ready in {time.monotonic() - started:.1f} s")

    def _sweep_stale_containers(self, containerd: Component) -> None:
        """Remove what a cluster that did not stop cleanly left in the shared containerd root,
        then restart containerd: its CRI plugin loaded those containers at start, and the
        kubelet must find none."""
        lay = self.node_layout()
        swept = realnode.sweep_containers(lay)
        if not swept:
            return
        self.progress(f"removed {swept} container(s) an earlier cluster left in containerd")
        self._stop_components([containerd])
        self._start_and_wait([containerd], COMPONENT_TIMEOUT)

    def _stop_node_after_failure(self) -> None:
        """Undo a failed start, unless ``SITS_KEEP_FAILED_NODE=1`` asks to keep it for a look."""
        if os.environ.get("SITS_KEEP_FAILED_NODE") == "1":
            self.progress("SITS_KEEP_FAILED_NODE=1: leaving the failed node as it is")
            return
        self._stop_node()

    def ensure_images(self, names: tuple[str, ...]) -> None:
        """Build (cached) and import images into the real node's containerd."""
        realnode.ensure_node_images(self.node_layout(), names, self.progress)

    def _users_dir(self) -> Path:
        return self.state_dir / "run" / "users"

    def _stop_marker(self) -> Path:
        """Present while the cluster was started by a test session and should not outlive it."""
        return self.state_dir / "run" / "stop-when-unused"

    def live_users(self) -> list[int]:
        """Pids of processes (test sessions) registered through ``up(user_pid=...)``."""
        users = []
        for entry in self._users_dir().glob("*"):
            if entry.name.isdigit() and procs.pid_alive(int(entry.name)):
                users.append(int(entry.name))
            else:
                entry.unlink(missing_ok=True)
        return sorted(users)

    def release(self, user_pid: int) -> bool:
        """Unregister ``user_pid``; stop the cluster if a session started it and none is left.

        Why: two pytest sessions may share one cluster; the one that started it must not
        pull it away from the other mid-run. Returns True when it stopped the cluster.
        """
        with self._locked():
            (self._users_dir() / str(user_pid)).unlink(missing_ok=True)
            if not self._stop_marker().exists():
                return False
            others = [pid for pid in self.live_users() if pid != user_pid]
            if others:
                pids = ", ".join(map(str, others))
                self.progress(f"leaving the cluster running: still used by pid(s) {pids}")
                return False
            self._stop_all()
            self._stop_marker().unlink(missing_ok=True)
            return True

    def down(self, purge: bool = False) -> None:
        """Stop every component (SIGTERM, then SIGKILL); ``purge`` also deletes all state."""
        with self._locked():
            self._stop_all()
        if purge and self.state_dir.exists():
            shutil.rmtree(self.state_dir)
            self.progress(f"removed {self.state_dir}")

    def stop_component(self, name: str) -> None:
        """Stop one control-plane process and keep its data (fault tests: etcd stopped
        mid-rollout); `start_component` brings it back on the same state."""
        with self._locked():
            self._stop_components([c for c in self._control_plane() if c.name == name])

    def start_component(self, name: str, timeout: float = COMPONENT_TIMEOUT) -> None:
        """Start one control-plane process again (same flags, ports and data directory)
        and wait until its health endpoint answers."""
        with self._locked():
            self._bin_dir = self._bin_dir or ensure_binaries(self.progress)
            comps = all_components(self._layout(self._bin_dir))
            self._start_and_wait([c for c in comps if c.name == name], timeout)

    def _stop_components(self, comps: list[Component]) -> None:
        for comp in reversed(comps):
            record = self._read_record(comp.name)
            if record is None:
                continue
            pid, binary = record
            if procs.is_running(pid, binary):
                killed = procs.stop(pid, binary)
                how = "killed" if killed else "stopped"
                self.progress(f"{how} {comp.name} (pid {pid})")
            self._record_file(comp.name).unlink(missing_ok=True)

    def _stop_node(self) -> None:
        """Stop the node's processes, then remove what containers left on the host.

        Runs whether or not the node is wanted now: a node started earlier must not
        outlive ``down``.
        """
        lay = self.node_layout()
        if not lay.root.exists():
            return
        if self._node_is_others():
            # The machine's one real node is another cluster's: the host's iptables chains,
            # bridge and routes are its, and cleaning them would break it.
            owner = realnode.node_owner()
            self.progress(f"the real node belongs to {owner}: its host state is left alone")
            self._stop_components(self._node_components())
            return
        if self._alive("containerd"):
            self._stop_components([c for c in self._node_components() if c.name != "containerd"])
            realnode.sweep_containers(lay)
        self._stop_components(self._node_components())
        realnode.clean_host(lay, self.progress)
        realnode.release_node(self.state_dir)

    def _node_is_others(self) -> bool:
        owner = realnode.node_owner()
        return owner is not None and owner != self.state_dir

    def _stop_all(self) -> None:
        shared = self._node_is_others()
        self._stop_node()
        self._stop_components(self._control_plane())
        # Only this apiserver's jump when another cluster's node shares the guard chain;
        # otherwise every jump (a listener the live stack guarded and left) and the chain.
        nodenet.remove_apiserver_guard(self.ports.apiserver if shared else None)
        nodenet.release_block_guard(self.state_dir)

    def leftovers(self) -> list[str]:
        """What of the cluster is still on the host after ``down`` (tests check it is [])."""
        alive = [f"process {s.name} (pid {s.pid})" for s in self.status() if s.alive]
        return alive + self.node_leftovers()

    def node_leftovers(self) -> list[str]:
        """What of the real node is still on the host (after stopping the node alone)."""
        lay = self.node_layout()
        alive = [f"process {c.name}" for c in node_components(lay) if self._alive(c.name)]
        return alive + nodeclean.leftovers(lay.root, lay.containerd_socket, lay.containerd_root)

    def _start_all(self) -> None:
        """Cold start; on any failure everything is stopped again and the log is named."""
        total = time.monotonic()
        bin_dir = self._bin_dir or ensure_binaries(self.progress)
        self._bin_dir = bin_dir
        layout = self._layout(bin_dir)
        comps = {c.name: c for c in all_components(layout)}
        self._check_ports_free(list(comps.values()))
        self._prepare_files(layout)
        try:
            nodenet.ensure_apiserver_guard(self.ports.apiserver)
            nodenet.ensure_block_guard(self.state_dir)
            self._start_and_wait([comps["etcd"]], ETCD_TIMEOUT)
            self._start_and_wait([comps["kube-apiserver"]], APISERVER_TIMEOUT)
            rest = ("kube-controller-manager", "kube-scheduler", "kwok")
            self._start_and_wait([comps[n] for n in rest], COMPONENT_TIMEOUT)
            self._bootstrap()
            if self.node:
                self._ensure_node()
        except Exception:
            self._stop_all()
            raise
        self.progress(f"cluster ready in {time.monotonic() - total:.1f} s at {self.server}")

    def _check_ports_free(self, comps: list[Component]) -> None:
        """Fail early and clearly if something else already listens on one of our ports."""
        for comp in comps:
            for port in comp.ports:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        sock.bind((HOST, port))
                    except OSError as err:
                        raise ClusterError(
                            f"port {HOST}:{port} needed by {comp.name} is in use ({err}); "
                            "stop whatever holds it or move ours with SITS_*_PORT variables"
                        ) from err

    def _prepare_files(self, layout: Layout) -> None:
        ensure_pki(self.pki.root)
        write_admin_kubeconfig(self.pki, self.server, self.kubeconfig)
        stages = resources.files(__package__).joinpath("kwok_stages.yaml").read_text()
        layout.kwok_config.write_text(stages)
        (self.state_dir / "run").mkdir(parents=True, exist_ok=True)

    def _start(self, comp: Component) -> int:
        log = self.log_file(comp.name)
        pid = procs.spawn_detached(comp.argv(), log)
        record = {"pid": pid, "binary": str(comp.binary), "argv": comp.argv()}
        self._record_file(comp.name).write_text(json.dumps(record, indent=1))
        return pid

    def _start_and_wait(self, comps: list[Component], timeout: float) -> None:
        """Start ``comps`` together, then wait for each one's health endpoint."""
        started = time.monotonic()
        for comp in comps:
            self.progress(f"starting {comp.name}...")
            self._start(comp)
        ctx = health.client_context(self.pki)
        for comp in comps:
            tls = None if comp.health_url.startswith("http://") else ctx
            ok, detail = health.wait_until(
                functools.partial(health.probe, comp.health_url, tls),
                timeout,
                alive=functools.partial(self._still_alive, comp.name),
            )
            if not ok:
                record = self._read_record(comp.name)
                what = (
                    f"exited during start-up (record {record}, "
                    f"state {procs._proc_state(record[0]) if record else None}, "
                    f"argv0 {procs.cmdline(record[0])[:1] if record else None})"
                    if not self._alive(comp.name)
                    else f"not healthy at {comp.health_url} after {timeout:.0f} s"
                )
                raise ClusterError(
                    f"{comp.name} {what} ({detail})\n"
                    f"see {self.log_file(comp.name)}; last lines:\n"
                    + _tail(self.log_file(comp.name))
                )
            self.progress(f"{comp.name} ready in {time.monotonic() - started:.1f} s")

    def _bootstrap(self) -> None:
        """GPU nodes in, default ServiceAccount present, nodes Ready and schedulable."""
        started = time.monotonic()
        api = self.api()
        bootstrap.ensure_gpu_nodes(api)
        try:
            bootstrap.wait_for(
                "the default ServiceAccount (controller-manager)",
                lambda: bootstrap.missing_default_service_account(api),
                BOOTSTRAP_TIMEOUT,
            )
            bootstrap.wait_for(
                "GPU nodes Ready and untainted (kwok, node-lifecycle)",
                lambda: bootstrap.not_ready_nodes(api),
                BOOTSTRAP_TIMEOUT,
            )
        except bootstrap.BootstrapError as err:
            logs = ", ".join(str(self.log_file(n)) for n in ("kube-controller-manager", "kwok"))
            raise ClusterError(f"{err}\nsee {logs}") from err
        self.progress(f"GPU nodes Ready in {time.monotonic() - started:.1f} s")

    # ----- kubectl -------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run ``/usr/bin/kubectl --kubeconfig <ours> ARGS``; raise with stderr if ``check``."""
        cmd = [KUBECTL, f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise KubectlError(list(args), result)
        return result


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log written)"


def running_node_owner() -> Path | None:
    """The state dir of the cluster whose real node (containerd or kubelet) is running."""
    owner = realnode.node_owner()
    if owner is None:
        return None
    other = LocalCluster(owner, node=True)
    return owner if other._alive("containerd") or other._alive("kubelet") else None
