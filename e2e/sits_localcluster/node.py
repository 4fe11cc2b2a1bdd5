"""The real worker node ``sits-node-0``: containerd, kubelet and kube-proxy as processes.

Why a real node beside the kwok ones: kwok pretends pods run; the operator's pods (vLLM
arguments, probes, the sidecar, volumes, the memory limit) only prove themselves when a
kubelet runs them in containers. The node is the same pieces a kubeadm node has: Debian's
containerd and runc (CRI), the CNI ``bridge`` + ``host-local`` plugins on ``sits0``, a
kubelet and kube-proxy built from the control plane's Kubernetes release (same version,
so no skew to reason about), and CoreDNS as a pod (:mod:`.addons`).

This module only renders configuration files and command lines (no side effects beyond
writing files under the state directory); :mod:`.nodenet` sets up and removes the host
network pieces and :mod:`.nodeclean` removes what containers leave behind.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import network
from .components import HOST, Component

NODE_NAME = "sits-node-0"
#: Pods only land on the real node when they tolerate this taint: the kwok GPU nodes'
#: tests place pods by MIG resources alone and must never get a real container by chance.
REAL_NODE_TAINT_KEY = "sits.dev/real-node"
REAL_NODE_TAINT = {"key": REAL_NODE_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
REAL_NODE_TOLERATION = {"key": REAL_NODE_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
#: ... and a pod that must run there also selects it by this label.
REAL_NODE_LABEL = {"sits.dev/node": "real"}
SANDBOX_IMAGE = "sits.local/pause:3.10"
CNI_BIN_DIR = Path("/usr/lib/cni")
CONTAINERD = Path("/usr/bin/containerd")
CTR = Path("/usr/bin/ctr")
CNI_NETWORK = "sits"


@dataclass(frozen=True)
class NodePorts:
    """Node listeners. Only the kubelet's API is on the node IP (the apiserver calls it)."""

    kubelet: int = 20250
    kubelet_healthz: int = 20248
    kube_proxy_healthz: int = 20256
    kube_proxy_metrics: int = 20249
    containerd_metrics: int = 20338


@dataclass(frozen=True)
class NodeLayout:
    """Files of the node under ``<cluster state>/node``, and containerd's ``root``.

    ``containerd_root`` (content store, snapshots, metadata) lives apart from the cluster's
    state, in the cache (:func:`shared_containerd_root`): the node's images are 14 GB
    unpacked and took 2 to 3 minutes to import into every new cluster (each test session
    purges its cluster). The machine has one real node at a time (``realnode.claim_node``),
    so one root serves the test and demo clusters in turn; what a cluster ran in it
    (containers, their writable snapshots) is swept on ``down`` and before the kubelet
    starts (``realnode.sweep_containers``), so only images carry over.
    """

    root: Path
    bin_dir: Path
    ca_cert: Path
    containerd_root: Path
    ports: NodePorts = NodePorts()
    runc: Path = Path("/usr/sbin/runc")

    @property
    def containerd_dir(self) -> Path:
        """containerd's per-cluster files: config, socket, ``state`` (mounts, netns)."""
        return self.root / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.containerd_dir / "config.toml"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet-config.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.root / "kubelet.kubeconfig"

    @property
    def proxy_config(self) -> Path:
        return self.root / "kube-proxy-config.yaml"

    @property
    def proxy_kubeconfig(self) -> Path:
        return self.root / "kube-proxy.kubeconfig"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam_dir(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def netns_dir(self) -> Path:
        """Where containerd mounts pod network namespaces (``netns_mounts_under_state_dir``)."""
        return self.containerd_dir / "state" / "netns"

    @property
    def pod_logs_dir(self) -> Path:
        """Container logs (the kubelet still links each into /var/log/containers)."""
        return self.root / "pod-logs"

    @property
    def volumes_dir(self) -> Path:
        """Host directories behind the node's local PersistentVolumes."""
        return self.root / "volumes"


def containerd_config(lay: NodeLayout) -> str:
    """containerd 1.6 config (version 2) with everything under the node's state dir.

    ``restrict_oom_score_adj``: this VM lacks CAP_SYS_RESOURCE, and without it runc fails
    every sandbox ("can't get final child's PID from pipe"). ``netns_mounts_under_state_dir``
    keeps pod network namespaces out of the host's ``/var/run/netns`` so ``down`` removes
    exactly ours. The stream server (exec, logs, port-forward) stays on loopback.
    """
    d = lay.containerd_dir
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{lay.containerd_root}"
state = "{d / "state"}"
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{lay.containerd_socket}"

[ttrpc]
  address = "{lay.containerd_socket}.ttrpc"

[metrics]
  address = "{HOST}:{lay.ports.containerd_metrics}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d / "opt"}"

[{cri}]
  sandbox_image = "{SANDBOX_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "{HOST}"
  stream_server_port = "0"
  enable_selinux = false
  max_container_log_line_size = 16384

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{d / "runc"}"
  BinaryName = "{lay.runc}"

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{lay.cni_conf_dir}"
  max_conf_num = 1

[{cri}.registry]
  config_path = ""
"""


def cni_conflist(lay: NodeLayout) -> str:
    """Bridge + host-local on the node's /24, routes for the local block only.

    No default route and no masquerading in the pods: a pod can reach other pods, Services
    and the node, and nothing outside the block (there is nothing of ours out there).
    """
    conf = {
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": network.BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(lay.cni_ipam_dir),
                    "ranges": [
                        [
                            {
                                "subnet": network.NODE_POD_CIDR,
                                "gateway": network.NODE_IP,
                                "rangeStart": _nth(network.NODE_POD_CIDR, 10),
                            }
                        ]
                    ],
                    "routes": [{"dst": network.BLOCK, "gw": network.NODE_IP}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2)


def _nth(cidr: str, n: int) -> str:
    return str(ipaddress.IPv4Network(cidr).network_address + n)


def kubelet_config(lay: NodeLayout) -> str:
    """KubeletConfiguration for this VM (cgroup v1 hybrid, cgroupfs, no systemd as PID 1).

    Why each unusual setting: ``failCgroupV1: false`` (the kubelet refuses cgroup v1 by
    default since 1.35); ``cgroupDriver: cgroupfs`` (no systemd); image GC off and eviction
    thresholds at 1 %: images are imported, not pulled, so a collected image cannot come
    back; ``resolvConf: ""``: pods resolve through cluster DNS only, never the host's.
    """
    cfg = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": network.NODE_IP,
        "port": lay.ports.kubelet,
        "readOnlyPort": 0,
        "healthzBindAddress": HOST,
        "healthzPort": lay.ports.kubelet_healthz,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(lay.ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "cgroupsPerQOS": True,
        "cgroupRoot": "/",
        "enforceNodeAllocatable": [],
        "containerRuntimeEndpoint": f"unix://{lay.containerd_socket}",
        "failSwapOn": False,
        "resolvConf": "",
        "clusterDNS": [network.DNS_SERVICE_IP],
        "clusterDomain": network.CLUSTER_DOMAIN,
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "200Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "maxPods": 40,
        "podCIDR": network.NODE_POD_CIDR,
        "registerNode": True,
        "registerWithTaints": [REAL_NODE_TAINT],
        "rotateCertificates": False,
        "volumePluginDir": str(lay.kubelet_dir / "volume-plugins"),
        "podLogsDir": str(lay.pod_logs_dir),
        "containerLogMaxSize": "10Mi",
        "containerLogMaxFiles": 2,
        "shutdownGracePeriod": "0s",
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "20s",
        "staticPodPath": "",
        "localStorageCapacityIsolation": True,
    }
    return yaml.safe_dump(cfg, sort_keys=False)


def kube_proxy_config(lay: NodeLayout) -> str:
    """iptables mode; every listener on loopback; NodePorts only on the node IP.

    ``conntrack.maxPerCore: 0`` leaves the host's conntrack table size alone (kube-proxy
    would otherwise raise a host-wide sysctl that ``down`` would have to restore), and
    ``localhostNodePorts: false`` keeps it from setting ``route_localnet``.
    """
    cfg = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(lay.proxy_kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "bindAddress": HOST,
        "healthzBindAddress": f"{HOST}:{lay.ports.kube_proxy_healthz}",
        "metricsBindAddress": f"{HOST}:{lay.ports.kube_proxy_metrics}",
        "clusterCIDR": network.BLOCK,
        "nodePortAddresses": [f"{network.NODE_IP}/32"],
        "conntrack": {"maxPerCore": 0, "min": 0},
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False, "syncPeriod": "10s"},
    }
    return yaml.safe_dump(cfg, sort_keys=False)


def write_configs(lay: NodeLayout) -> None:
    """Write every config file; directories made here, nothing outside ``lay.root`` but
    the (shared) containerd root."""
    for path in (lay.containerd_dir, lay.kubelet_dir, lay.cni_conf_dir, lay.cni_ipam_dir):
        path.mkdir(parents=True, exist_ok=True)
    lay.containerd_root.mkdir(parents=True, exist_ok=True)
    lay.volumes_dir.mkdir(parents=True, exist_ok=True)
    lay.containerd_config.write_text(containerd_config(lay))
    (lay.cni_conf_dir / f"10-{CNI_NETWORK}.conflist").write_text(cni_conflist(lay))
    lay.kubelet_config.write_text(kubelet_config(lay))
    lay.proxy_config.write_text(kube_proxy_config(lay))


def node_labels() -> dict[str, str]:
    """The labels GPU feature discovery would set on an A100-SXM4-80GB in ``all-1g.10gb``."""
    return {
        **REAL_NODE_LABEL,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/mig-1g.10gb.count": "7",
        "nvidia.com/mig-1g.10gb.memory": "9728",
        "nvidia.com/mig-1g.10gb.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
    }


#: What the NVIDIA device plugin advertises for that layout: seven 1g.10gb slices.
MIG_RESOURCES: dict[str, str] = {"nvidia.com/mig-1g.10gb": "7"}


def containerd(lay: NodeLayout) -> Component:
    args = ("--config", str(lay.containerd_config), "--log-level", "warn")
    url = f"http://{HOST}:{lay.ports.containerd_metrics}/v1/metrics"
    return Component("containerd", CONTAINERD, args, (lay.ports.containerd_metrics,), url)


def kubelet(lay: NodeLayout) -> Component:
    labels = ",".join(f"{k}={v}" for k, v in sorted(node_labels().items()))
    args = (
        f"--config={lay.kubelet_config}",
        f"--kubeconfig={lay.kubelet_kubeconfig}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={network.NODE_IP}",
        f"--root-dir={lay.kubelet_dir}",
        f"--cert-dir={lay.kubelet_dir / 'pki'}",
        f"--node-labels={labels}",
        "--v=1",
    )
    url = f"http://{HOST}:{lay.ports.kubelet_healthz}/healthz"
    ports = (lay.ports.kubelet_healthz,)
    return Component("kubelet", lay.bin_dir / "kubelet", args, ports, url)


def kube_proxy(lay: NodeLayout) -> Component:
    args = (f"--config={lay.proxy_config}", "--v=1")
    url = f"http://{HOST}:{lay.ports.kube_proxy_healthz}/livez"
    ports = (lay.ports.kube_proxy_healthz, lay.ports.kube_proxy_metrics)
    return Component("kube-proxy", lay.bin_dir / "kube-proxy", args, ports, url)


def node_components(lay: NodeLayout) -> list[Component]:
    """In start order; stopped in reverse."""
    return [containerd(lay), kubelet(lay), kube_proxy(lay)]
