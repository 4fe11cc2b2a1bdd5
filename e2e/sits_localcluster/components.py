"""Command lines of the five control-plane processes, all bound to 127.0.0.1.

Flags follow envtest (kube-apiserver) and ``kwokctl --runtime binary`` (the rest), with two
deliberate differences: every listener is pinned to loopback (kwokctl defaults to 0.0.0.0,
and test traffic may only target 127.0.0.0/8), and ports default to unusual numbers so that
a developer's own cluster on 6443/2379 keeps running next to this one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import network
from .nodes import KWOK_NODE_SELECTOR
from .pki import PkiPaths

HOST = "127.0.0.1"
#: The apiserver listens on every address so that pods on the real node reach it through
#: the ``kubernetes`` Service (at the node IP); an iptables guard (``nodenet``) admits its
#: port from loopback and the node's bridge only. Every other listener is on loopback.
APISERVER_BIND = "0.0.0.0"
SERVICE_CIDR = network.SERVICE_CIDR
POD_CIDR = network.KWOK_POD_CIDR
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"


def _port(env: str, default: int) -> int:
    return int(os.environ.get(env, str(default)))


@dataclass(frozen=True)
class Ports:
    """TCP ports of each listener; every one can be moved with an environment variable."""

    apiserver: int = 16443
    etcd_client: int = 12379
    etcd_peer: int = 12380
    controller_manager: int = 20257
    scheduler: int = 20259
    kwok: int = 20247

    @classmethod
    def from_env(cls) -> Ports:
        return cls(
            apiserver=_port("SITS_APISERVER_PORT", cls.apiserver),
            etcd_client=_port("SITS_ETCD_CLIENT_PORT", cls.etcd_client),
            etcd_peer=_port("SITS_ETCD_PEER_PORT", cls.etcd_peer),
            controller_manager=_port("SITS_CONTROLLER_MANAGER_PORT", cls.controller_manager),
            scheduler=_port("SITS_SCHEDULER_PORT", cls.scheduler),
            kwok=_port("SITS_KWOK_PORT", cls.kwok),
        )


@dataclass(frozen=True)
class Component:
    """One process: what to run, which ports it must own, and how to tell it is healthy."""

    name: str
    binary: Path
    args: tuple[str, ...]
    ports: tuple[int, ...]
    health_url: str

    @property
    def endpoint(self) -> str:
        return self.health_url.rsplit("/", 1)[0]

    def argv(self) -> list[str]:
        return [str(self.binary), *self.args]


@dataclass(frozen=True)
class Layout:
    """Everything the command lines refer to: binaries, ports and files in the state dir."""

    bin_dir: Path
    state_dir: Path
    ports: Ports
    pki: PkiPaths
    kubeconfig: Path
    kwok_config: Path


def etcd(lay: Layout) -> Component:
    p = lay.ports
    client = f"http://{HOST}:{p.etcd_client}"
    peer = f"http://{HOST}:{p.etcd_peer}"
    args = (
        "--name=sits",
        f"--data-dir={lay.state_dir / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=sits={peer}",
        "--initial-cluster-state=new",
        "--auto-compaction-retention=1",
        "--quota-backend-bytes=4294967296",
        # A throw-away test store: skipping fsync makes every write ~10x faster on slow disks.
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    )
    return Component(
        "etcd", lay.bin_dir / "etcd", args, (p.etcd_client, p.etcd_peer), f"{client}/health"
    )


def kube_apiserver(lay: Layout) -> Component:
    p, k = lay.ports, lay.pki
    args = (
        f"--etcd-servers=http://{HOST}:{p.etcd_client}",
        f"--bind-address={APISERVER_BIND}",
        # Published as the `kubernetes` Service's endpoint: the node IP, where pods reach it.
        f"--advertise-address={network.NODE_IP}",
        f"--secure-port={p.apiserver}",
        f"--cert-dir={lay.state_dir / 'apiserver-certs'}",
        f"--tls-cert-file={k.serving_cert}",
        f"--tls-private-key-file={k.serving_key}",
        f"--client-ca-file={k.ca_cert}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={SA_ISSUER}",
        f"--service-account-key-file={k.sa_pub}",
        f"--service-account-signing-key-file={k.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        # The real node's kubelet may only touch its own Node and its pods' objects.
        "--enable-admission-plugins=NodeRestriction",
        # Logs, exec and port-forward: the apiserver calls the kubelet as the admin.
        f"--kubelet-client-certificate={k.admin_cert}",
        f"--kubelet-client-key={k.admin_key}",
        # The node's name is not in any DNS: call kubelets by their InternalIP.
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        # The operator's webhooks/aggregated APIs call out through the front proxy identity.
        f"--proxy-client-cert-file={k.admin_cert}",
        f"--proxy-client-key-file={k.admin_key}",
        "--profiling=false",
        "--v=1",
    )
    url = f"https://{HOST}:{p.apiserver}/readyz"
    return Component("kube-apiserver", lay.bin_dir / "kube-apiserver", args, (p.apiserver,), url)


def _delegated_auth(lay: Layout) -> tuple[str, ...]:
    """Flags that let controller-manager/scheduler serve /healthz over TLS on loopback.

    Without our serving cert they would write a self-signed one to /var/run/kubernetes.
    """
    return (
        f"--kubeconfig={lay.kubeconfig}",
        f"--authentication-kubeconfig={lay.kubeconfig}",
        f"--authorization-kubeconfig={lay.kubeconfig}",
        f"--bind-address={HOST}",
        f"--tls-cert-file={lay.pki.serving_cert}",
        f"--tls-private-key-file={lay.pki.serving_key}",
        "--leader-elect=false",
        "--profiling=false",
    )


def kube_controller_manager(lay: Layout) -> Component:
    p, k = lay.ports, lay.pki
    args = (
        *_delegated_auth(lay),
        f"--secure-port={p.controller_manager}",
        # The default set: deployment, replicaset, garbagecollector, endpointslice,
        # serviceaccount, serviceaccount-token, namespace, node-lifecycle, ...
        "--controllers=*",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={k.sa_key}",
        f"--root-ca-file={k.ca_cert}",
        f"--cluster-signing-cert-file={k.ca_cert}",
        f"--cluster-signing-key-file={k.ca_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # The defaults (20 QPS, 5 workers) throttle a burst of hundreds of Deployments to a
        # crawl; large real clusters raise them the same way.
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        "--concurrent-deployment-syncs=20",
        "--concurrent-replicaset-syncs=20",
        "--v=1",
    )
    url = f"https://{HOST}:{p.controller_manager}/healthz"
    return Component(
        "kube-controller-manager",
        lay.bin_dir / "kube-controller-manager",
        args,
        (p.controller_manager,),
        url,
    )


def kube_scheduler(lay: Layout) -> Component:
    p = lay.ports
    args = (*_delegated_auth(lay), f"--secure-port={p.scheduler}", "--v=1")
    url = f"https://{HOST}:{p.scheduler}/healthz"
    return Component("kube-scheduler", lay.bin_dir / "kube-scheduler", args, (p.scheduler,), url)


def kwok(lay: Layout) -> Component:
    p, k = lay.ports, lay.pki
    args = (
        f"--kubeconfig={lay.kubeconfig}",
        f"--config={lay.kwok_config}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_SELECTOR}",
        f"--server-address={HOST}:{p.kwok}",
        f"--tls-cert-file={k.serving_cert}",
        f"--tls-private-key-file={k.serving_key}",
        f"--cidr={POD_CIDR}",
        f"--node-port={p.kwok}",
        # kwok renews a Lease per node; without it node-lifecycle marks them NotReady at 40 s.
        "--node-lease-duration-seconds=40",
    )
    url = f"https://{HOST}:{p.kwok}/healthz"
    return Component("kwok", lay.bin_dir / "kwok", args, (p.kwok,), url)


def all_components(lay: Layout) -> list[Component]:
    """In start order; stopped in reverse."""
    return [
        etcd(lay),
        kube_apiserver(lay),
        kube_controller_manager(lay),
        kube_scheduler(lay),
        kwok(lay),
    ]
