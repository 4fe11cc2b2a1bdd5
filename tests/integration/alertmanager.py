"""A real Alertmanager (Debian's prometheus-alertmanager) on 127.0.0.1 for one test."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from sits_localcluster.prometheus import free_port

BINARY = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"


class LocalAlertmanager:
    def __init__(self, workdir: Path, *, webhook: str) -> None:
        if not webhook.startswith("http://127."):
            raise ValueError("the webhook must be on loopback")
        self.workdir, self.webhook, self.port = workdir, webhook, free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LocalAlertmanager:
        config = self.workdir / "alertmanager.yml"
        config.write_text(
            "route:\n  receiver: sits\n  group_by: [alertname, namespace, sits_deployment]\n"
            "  group_wait: 1s\n  group_interval: 5s\n  repeat_interval: 1h\n"
            f"receivers:\n  - name: sits\n    webhook_configs:\n      - url: {self.webhook}\n"
            "        send_resolved: false\n"
        )
        with (self.workdir / "alertmanager.log").open("ab") as log:
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
