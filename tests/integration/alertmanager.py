"""A real Alertmanager (Debian's prometheus-alertmanager) on 127.0.0.1 for one test."""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from sits_localcluster import network
from sits_localcluster.prometheus import free_port

BINARY = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"


def _own_address(url: str) -> bool:
    """Loopback, or the real node's pod network (pods the project runs itself)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address in ipaddress.ip_network(network.NODE_POD_CIDR)


class LocalAlertmanager:
    def __init__(self, workdir: Path, *, webhook: str, token: str | None = None) -> None:
        if not _own_address(webhook):
            raise ValueError("the webhook must be on loopback or one of the project's pods")
        self.workdir, self.webhook, self.port = workdir, webhook, free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self.configure(token)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "alertmanager.log"

    def configure(self, token: str | None) -> None:
        """Write the configuration: the webhook receiver, with the bearer token Alertmanager
        sends (`http_config.authorization.credentials_file`) or without credentials; a
        running Alertmanager takes it up on `reload()`."""
        receiver: dict[str, Any] = {"url": self.webhook, "send_resolved": False}
        if token is not None:
            secret = self.workdir / "webhook-token"
            secret.write_text(token)
            secret.chmod(0o600)
            receiver["http_config"] = {"authorization": {"credentials_file": str(secret)}}
        config = {
            "route": {
                "receiver": "sits",
                "group_by": ["alertname", "namespace", "sits_deployment", "variant"],
                "group_wait": "1s",
                "group_interval": "5s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "sits", "webhook_configs": [receiver]}],
        }
        (self.workdir / "alertmanager.yml").write_text(yaml.safe_dump(config, sort_keys=False))

    def reload(self) -> None:
        request = urllib.request.Request(f"{self.url}/-/reload", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200

    def __enter__(self) -> LocalAlertmanager:
        config = self.workdir / "alertmanager.yml"
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [
                    BINARY,
                    f"--config.file={config}",
                    f"--storage.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--cluster.listen-address=",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"Alertmanager not ready; see {self.workdir}/alertmanager.log")

    def fire(self, labels: dict[str, str]) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        body = json.dumps(
            [{"labels": labels, "startsAt": now, "annotations": {"summary": "test alert"}}]
        ).encode()
        request = urllib.request.Request(
            f"{self.url}/api/v2/alerts",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.status == 200

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
