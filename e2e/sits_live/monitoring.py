"""Prometheus for the live system: on the host, finding pods through the apiserver, and
reachable by the operator's pod under a cluster DNS name.

Prometheus 2.42 (Debian's) listens on one address. It listens on the node IP (the bridge
``sits0``), which the host and the pods reach and nothing outside the machine does: the
apiserver's iptables guard (``SITS-GUARD``: loopback and the bridge only) is extended to
its port while it runs. In the cluster a Service without selector and its EndpointSlice
(``<name>.sits-monitoring.svc:9090``) point at it, as an external Prometheus is often
published, so the SitsDeployments name it the way a real install would.

Scrape discovery is ``sits_localcluster.prometheus.KubernetesSd`` (role pod, the
``prometheus.io/*`` annotations the operator renders); alerting rules and an Alertmanager
are optional (the SRE path).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sits_localcluster import network, nodenet
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.prometheus import PROMETHEUS_BIN, KubernetesSd

MONITORING_NS = "sits-monitoring"
SERVICE_PORT = 9090

#: Requests from this process to the node IP must not go through a proxy from the env.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url: str, timeout: float = 5.0) -> bytes:
    with _OPENER.open(url, timeout=timeout) as response:
        body: bytes = response.read()
        return body


#: Every child started here, referenced until it is stopped (see Background._proc).
_STARTED: list[subprocess.Popen[bytes]] = []


class Background:
    """A named process that outlives this one (the demo leaves it for the user to browse),
    found again through its pid file in the cluster's state directory."""

    def __init__(self, state_dir: Path, name: str) -> None:
        self.name = name
        self.pid_file = state_dir / "run" / f"{name}.pid"
        self.log = state_dir / "logs" / f"{name}.log"
        # The child this object started, kept so that stopping it also reaps it (and so
        # that no Popen is collected while its process runs: a ResourceWarning).
        self._proc: subprocess.Popen[bytes] | None = None

    def pid(self) -> int | None:
        if not self.pid_file.exists():
            return None
        if self._proc is not None and self._proc.poll() is not None:
            return None  # our own child has exited (poll reaped it)
        pid = int(self.pid_file.read_text())
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    def start(self, argv: list[str], env: dict[str, str] | None = None) -> bool:
        """Start unless running; True when it started it."""
        if self.pid() is not None:
            return False
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self._proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        _STARTED.append(self._proc)
        self.pid_file.write_text(str(self._proc.pid))
        return True

    def stop(self) -> None:
        if (pid := self.pid()) is not None:
            os.killpg(pid, signal.SIGTERM)
            for _ in range(50):
                if self.pid() is None:
                    break
                time.sleep(0.2)
            else:
                os.killpg(pid, signal.SIGKILL)
        if self._proc is not None:
            self._proc.wait(timeout=10)
            _STARTED.remove(self._proc)
            self._proc = None
        self.pid_file.unlink(missing_ok=True)


@dataclass
class LiveMonitoring:
    """Prometheus on ``NODE_IP:port`` scraping ``namespaces``, published in the cluster."""

    cluster: LocalCluster
    namespaces: tuple[str, ...]
    # 0: a free port, chosen once and kept in the state directory (a restarted demo finds
    # its Prometheus again); two instances (the demo's, a benchmark's) never share one.
    port: int = 0
    rules: list[dict[str, Any]] | None = None
    alertmanager_url: str | None = None
    name: str = "prometheus-live"

    @property
    def url(self) -> str:
        return f"http://{network.NODE_IP}:{self.port}"

    @property
    def workdir(self) -> Path:
        return self.cluster.state_dir / self.name

    def __post_init__(self) -> None:
        self._background = Background(self.cluster.state_dir, self.name)
        if not self.port:
            self.port = self._remembered_port()

    def _remembered_port(self) -> int:
        """This instance's port: the one it used before, or a free one on the node IP."""
        record = self.cluster.state_dir / "run" / f"{self.name}.port"
        if record.exists():
            return int(record.read_text())
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(str(port))
        return port

    @property
    def in_cluster_url(self) -> str:
        """How pods (the operator) reach it: its own Service in ``MONITORING_NS``."""
        return f"http://{self.name}.{MONITORING_NS}.svc:{SERVICE_PORT}"

    def _process(self) -> Background:
        return self._background

    def config(self) -> dict[str, Any]:
        sd = KubernetesSd.for_cluster(self.cluster, self.namespaces)
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [sd.scrape_config(), sd.vllm_scrape_config()],
        }
        if self.rules:
            rules = self.workdir / "rules.yaml"
            rules.write_text(yaml.safe_dump({"groups": self.rules}, sort_keys=False))
            config["rule_files"] = [str(rules)]
        if self.alertmanager_url:
            target = self.alertmanager_url.removeprefix("http://")
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [target]}]}]}
        return config

    def start(self, progress: Callable[[str], object] = print) -> None:
        """Start (or restart with a new configuration) and publish; idempotent."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        config_file = self.workdir / "prometheus.yml"
        # The listen address is part of what must match for a running one to be reused.
        text = f"# listen: {network.NODE_IP}:{self.port}\n" + yaml.safe_dump(
            self.config(), sort_keys=False
        )
        process = self._process()
        if process.pid() is not None and config_file.exists() and config_file.read_text() == text:
            progress(f"Prometheus already running at {self.url}")
        else:
            process.stop()
            config_file.write_text(text)
            nodenet.guard_port(self.port)
            process.start(
                [
                    PROMETHEUS_BIN,
                    f"--config.file={config_file}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address={network.NODE_IP}:{self.port}",
                    "--storage.tsdb.retention.time=1d",
                ]
            )
            self._wait_ready()
            progress(f"Prometheus at {self.url} (in the cluster: {self.in_cluster_url})")
        self.cluster.kubectl("apply", "-f", "-", input=json.dumps(self.manifests()))

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                http_get(f"{self.url}/-/ready", timeout=1)
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"Prometheus not ready in {timeout:.0f} s; see {self.workdir}")

    def stop(self) -> None:
        self._process().stop()
        nodenet.unguard_port(self.port)
        for kind, name in (("service", self.name), ("endpointslice", f"{self.name}-host")):
            self.cluster.kubectl(
                "delete", kind, name, "-n", MONITORING_NS, "--ignore-not-found", check=False
            )

    def manifests(self) -> dict[str, Any]:
        """The namespace, a Service without selector and its EndpointSlice (the node IP)."""
        service = self.name
        meta = {"namespace": MONITORING_NS, "labels": {"app.kubernetes.io/name": "prometheus"}}
        items = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MONITORING_NS}},
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": service, **meta},
                "spec": {
                    "ports": [
                        {
                            "name": "web",
                            "port": SERVICE_PORT,
                            "targetPort": self.port,
                            "protocol": "TCP",
                        }
                    ]
                },
            },
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": f"{service}-host",
                    "namespace": MONITORING_NS,
                    "labels": {
                        "kubernetes.io/service-name": service,
                        "endpointslice.kubernetes.io/managed-by": "sits-live",
                    },
                },
                "addressType": "IPv4",
                "ports": [{"name": "web", "port": self.port, "protocol": "TCP"}],
                "endpoints": [{"addresses": [network.NODE_IP], "conditions": {"ready": True}}],
            },
        ]
        return {"apiVersion": "v1", "kind": "List", "items": items}

    def query(self, promql: str) -> dict[str, float]:
        """An instant query; {variant label: value}."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        body = json.loads(http_get(url))
        return {
            str(r["metric"].get("variant", "")): float(r["value"][1])
            for r in body["data"]["result"]
        }

    def query_range(self, promql: str, seconds: float, step_s: float = 5.0) -> list[dict[str, str]]:
        """A range query over the last ``seconds``, as Grafana runs an annotation or a
        graph over its time range; the label sets of the series with a value in it."""
        end = time.time()
        params = {"query": promql, "start": end - seconds, "end": end, "step": step_s}
        url = f"{self.url}/api/v1/query_range?" + urllib.parse.urlencode(params)
        body = json.loads(http_get(url, timeout=15.0))
        return [dict(r["metric"]) for r in body["data"]["result"] if r["values"]]
