"""A real Prometheus (Debian's /usr/bin/prometheus) on 127.0.0.1 for tests and the demo.

Scrapes every second so tests can run SITS2026's rules on 10-second windows;
`stop()`/`start()` keep the TSDB so an outage can be simulated. Targets are static
loopback addresses, or pods found on the local cluster's apiserver (``KubernetesSd``:
``kubernetes_sd_configs``, role pod), as a Prometheus in a real cluster finds the SITS
pods by the ``prometheus.io/*`` annotations the operator renders.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import network
from .build import cache_root, read_versions

if TYPE_CHECKING:
    from .cluster import LocalCluster


def built_prometheus() -> Path:
    """Where scripts/setup-prometheus.sh puts its build (with kubernetes_sd_configs)."""
    version = read_versions()["PROMETHEUS_MODULE_VERSION"]
    return cache_root() / f"prometheus-{version}" / "bin" / "prometheus"


# The project's build (scripts/setup.sh makes it); SITS_PROMETHEUS_BIN: another one.
# Debian's package (2.42.0+ds) is the last resort, for static targets only: it is built
# without kubernetes_sd_configs.
PROMETHEUS_BIN = os.environ.get("SITS_PROMETHEUS_BIN") or (
    str(built_prometheus())
    if built_prometheus().exists()
    else shutil.which("prometheus") or "/usr/bin/prometheus"
)
# The promtool built beside it (Debian's cannot parse kubernetes_sd_configs either).
PROMTOOL_BIN = str(Path(PROMETHEUS_BIN).with_name("promtool"))
_META = "__meta_kubernetes_pod_"


def kubernetes_sd_supported(workdir: Path) -> bool:
    """Whether ``PROMETHEUS_BIN`` has the kubernetes service discovery: Debian's package
    (2.42+ds) is built without it (client-go is not packaged there) and exits at once on
    ``kubernetes_sd_configs`` as an unknown field; the project's build loads it and runs
    (its discovery then retries an unreachable apiserver, which is fine for a probe)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "kubernetes-sd-probe.yml"
    sd = {"role": "pod", "api_server": "https://127.0.0.1:1"}
    job = {"job_name": "probe", "kubernetes_sd_configs": [sd]}
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}))
    proc = subprocess.Popen(
        [
            PROMETHEUS_BIN,
            f"--config.file={config}",
            f"--web.listen-address=127.0.0.1:{free_port()}",
            f"--storage.tsdb.path={workdir / 'probe-data'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        proc.wait(timeout=3)
        return False  # it exited: the configuration was refused
    except subprocess.TimeoutExpired:
        return True
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)


def ip_regex(cidr: str) -> str:
    """A regex of the addresses in ``cidr`` (whole octets only, as the node's /24 is):
    relabelling matches strings, not networks."""
    net = ipaddress.ip_network(cidr)
    if net.prefixlen % 8:
        raise ValueError(f"{cidr}: only prefixes on an octet boundary are supported")
    fixed = str(net.network_address).split(".")[: net.prefixlen // 8]
    return r"\.".join([*fixed, *[r"\d{1,3}"] * (4 - len(fixed))])


@dataclass(frozen=True)
class KubernetesSd:
    """Pods found through the apiserver (role pod) and kept only when (1) annotated
    ``prometheus.io/scrape: "true"``, scraped on ``prometheus.io/port`` and
    ``prometheus.io/path`` (what ``sits_operator.core.naming`` renders); (2) running on
    the real node's pod network (kwok pods have made-up addresses, and nothing outside
    loopback and the project's own pods is ever contacted).

    Credentials: the cluster CA and a client certificate (``tls_config``), as a kubeconfig
    would give them.
    """

    api_server: str
    ca_file: Path
    cert_file: Path
    key_file: Path
    namespaces: tuple[str, ...] = ()
    pod_cidr: str = network.NODE_POD_CIDR

    def __post_init__(self) -> None:
        own = ipaddress.ip_network(network.NODE_POD_CIDR)
        if not ipaddress.ip_network(self.pod_cidr).subnet_of(own):  # type: ignore[arg-type]
            raise ValueError(f"{self.pod_cidr} is not on the real node's pods ({own})")

    @classmethod
    def for_cluster(cls, cluster: LocalCluster, namespaces: tuple[str, ...] = ()) -> KubernetesSd:
        pki = cluster.pki
        return cls(cluster.server, pki.ca_cert, pki.admin_cert, pki.admin_key, namespaces)

    def scrape_config(self, job: str = "sits-pods") -> dict[str, Any]:
        """``honor_labels``: a series' own labels win over target labels of the same name.
        The request-metric contract's ``namespace`` is the SitsDeployment's, and the pod's
        namespace is also mapped to ``namespace`` (as usual, for every other series):
        without it Prometheus would keep the target's and rename the series' own to
        ``exported_namespace``, and no SLI query would find it."""
        sd: dict[str, Any] = {
            "role": "pod",
            "api_server": self.api_server,
            "tls_config": {
                "ca_file": str(self.ca_file),
                "cert_file": str(self.cert_file),
                "key_file": str(self.key_file),
            },
        }
        if self.namespaces:
            sd["namespaces"] = {"names": list(self.namespaces)}
        return {
            "job_name": job,
            "honor_labels": True,
            "kubernetes_sd_configs": [sd],
            "relabel_configs": self._relabel("prometheus_io_port", "prometheus_io_path"),
        }

    def vllm_scrape_config(self, job: str = "sits-vllm") -> dict[str, Any]:
        """vLLM's own ``/metrics`` (``vllm:*``) in the variant pods, on the port the operator
        names in ``sits.dev/vllm-metrics-port`` (the scrape annotations name the sidecar's).
        Its series have no labels of ours, so the target's namespace and pod are kept."""
        config = self.scrape_config(job)
        config["honor_labels"] = False
        config["relabel_configs"] = self._relabel("sits_dev_vllm_metrics_port", None)
        return config

    def _relabel(self, port: str, path: str | None) -> list[dict[str, Any]]:
        """Keep annotated, running pods on the real node's pod network; scrape the port
        (and path) their annotations name; label the series with namespace, pod and the
        pod's labels."""
        relabel: list[dict[str, Any]] = [
            {
                "source_labels": [f"{_META}annotation_prometheus_io_scrape"],
                "regex": "true",
                "action": "keep",
            },
            {"source_labels": [f"{_META}phase"], "regex": "Running", "action": "keep"},
            {"source_labels": [f"{_META}ip"], "regex": ip_regex(self.pod_cidr), "action": "keep"},
            # Pods that name no such port are not this job's (gateway pods have no vLLM).
            {"source_labels": [f"{_META}annotation_{port}"], "regex": r"\d+", "action": "keep"},
            {
                "source_labels": [f"{_META}ip", f"{_META}annotation_{port}"],
                "regex": r"(.+);(\d+)",
                "replacement": "$1:$2",
                "target_label": "__address__",
            },
        ]
        if path is not None:
            relabel.append(
                {
                    "source_labels": [f"{_META}annotation_{path}"],
                    "regex": "(.+)",
                    "target_label": "__metrics_path__",
                }
            )
        return [
            *relabel,
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": [f"{_META}name"], "target_label": "pod"},
            {"action": "labelmap", "regex": f"{_META}label_(.+)"},
        ]


#: What Prometheus logs once its web server serves (and its TSDB is open).
READY_LINE = b"Server is ready to receive web requests."


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalPrometheus:
    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        *,
        port: int | None = None,
        scrape_interval: str = "1s",
        kubernetes: KubernetesSd | None = None,
        web_config: Path | None = None,
    ) -> None:
        """`web_config`: Prometheus's --web.config.file (TLS, basic auth); then `url` is
        https and readiness is read from the log, since probing needs the credentials."""
        for target in targets:
            if not target.startswith("127."):
                raise ValueError(f"only loopback targets may be scraped, not {target}")
        self.workdir = workdir
        self.port = port or free_port()
        self._targets = targets
        self._kubernetes = kubernetes
        self._interval = scrape_interval
        self._web_config = web_config
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self._web_config is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        scrape: list[dict[str, Any]] = []
        if self._targets:
            scrape.append({"job_name": "sits", "static_configs": [{"targets": self._targets}]})
        if self._kubernetes is not None:
            scrape.append(self._kubernetes.scrape_config())
        interval = {"scrape_interval": self._interval, "evaluation_interval": self._interval}
        return {"global": interval, "scrape_configs": scrape}

    def _write_config(self) -> Path:
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        return config

    def start(self, timeout: float = 30) -> LocalPrometheus:
        if not Path(PROMETHEUS_BIN).exists():
            raise RuntimeError("prometheus is not installed (scripts/setup.sh installs it)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            PROMETHEUS_BIN,
            f"--config.file={self._write_config()}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        if self._web_config is not None:
            args.append(f"--web.config.file={self._web_config}")
        log_path = self.workdir / "prometheus.log"
        logged = log_path.stat().st_size if log_path.exists() else 0
        with log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._web_config is not None:
                if READY_LINE in log_path.read_bytes()[logged:]:
                    return self
                time.sleep(0.2)
                continue
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(
            f"Prometheus not ready in {timeout} s; see {self.workdir}/prometheus.log"
        )

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        self._proc = None
