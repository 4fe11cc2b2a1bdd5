"""A real Prometheus (Debian's /usr/bin/prometheus) on 127.0.0.1 for tests and the demo.

Scrapes the given loopback targets every second so tests can run SITS2026's rules on
10-second windows; `stop()`/`start()` keep the TSDB so an outage can be simulated.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

PROMETHEUS_BIN = shutil.which("prometheus") or "/usr/bin/prometheus"


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
    ) -> None:
        for target in targets:
            if not target.startswith("127."):
                raise ValueError(f"only loopback targets may be scraped, not {target}")
        self.workdir = workdir
        self.port = port or free_port()
        self._targets = targets
        self._interval = scrape_interval
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_config(self) -> Path:
        config = self.workdir / "prometheus.yml"
        targets = ", ".join(f'"{t}"' for t in self._targets)
        config.write_text(
            f"global:\n  scrape_interval: {self._interval}\n"
            f"  evaluation_interval: {self._interval}\n"
            f"scrape_configs:\n  - job_name: sits\n    static_configs:\n"
            f"      - targets: [{targets}]\n"
        )
        return config

    def start(self, timeout: float = 30) -> LocalPrometheus:
        if not Path(PROMETHEUS_BIN).exists():
            raise RuntimeError("prometheus is not installed (scripts/setup.sh installs it)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        with (self.workdir / "prometheus.log").open("ab") as log:
            self._proc = subprocess.Popen(
                [
                    PROMETHEUS_BIN,
                    f"--config.file={self._write_config()}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
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
