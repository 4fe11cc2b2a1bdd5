"""Run the real operator (`python -m sits_operator`) as a child process for tests and
benchmarks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sits_localcluster.prometheus import free_port
from sits_operator_testing.rbac import default_namespaces, rbac_mode


class OperatorProcess:
    """One operator process against the local cluster; restartable, logs kept on disk.

    `namespaces`: its `--namespace` list (empty: cluster-wide); None: as the session's
    RBAC mode says (rbac.default_namespaces)."""

    def __init__(
        self,
        kubeconfig: Path,
        log_dir: Path,
        *,
        extra_args: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
        namespaces: tuple[str, ...] | None = None,
    ) -> None:
        self._kubeconfig = kubeconfig
        self._log_dir = log_dir
        # E.g. ("--leader-elect",) and the election's POD_NAME for two operators at once.
        self._extra_args, self._extra_env = extra_args, dict(extra_env or {})
        self.namespaces = default_namespaces() if namespaces is None else tuple(namespaces)
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.alert_port = free_port()

    @property
    def alert_webhook_url(self) -> str:
        return f"http://127.0.0.1:{self.alert_port}/api/v1/alerts"

    @property
    def pid(self) -> int:
        """The running operator's process id (its memory and CPU under /proc)."""
        assert self._proc is not None, "operator not running"
        return self._proc.pid

    @property
    def log_path(self) -> Path:
        return self._log_dir / f"operator-{self.starts}.log"

    def start(self) -> None:
        self.starts += 1
        env = {**os.environ, "KUBECONFIG": str(self._kubeconfig), "SITS_RESYNC_SECONDS": "20"}
        env.update(self._extra_env)
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sits_operator",
                    "--metrics-address",
                    "",
                    "--alert-webhook-address",
                    f"127.0.0.1:{self.alert_port}",
                    *(f"--namespace={namespace}" for namespace in self.namespaces),
                    *self._extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.wait_for_log("startup", "sits-operator started", timeout=30)

    def wait_for_log(self, what: str, needle: str, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log_path.read_text(errors="replace"):
                return
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"operator exited during {what}:\n{self.tail()}")
            time.sleep(0.2)
        raise TimeoutError(f"operator: no {needle!r} within {timeout} s:\n{self.tail()}")

    def watch(self, *namespaces: str) -> None:
        """Serve exactly `namespaces` from now on (`--namespace` each): restarted when
        they change while it runs (Kopf takes its namespaces at start)."""
        if namespaces == self.namespaces:
            return
        self.namespaces = namespaces
        if self._proc is not None:
            self.restart()

    def forbidden(self) -> list[str]:
        """Log lines of every run that show the API server refusing the operator (403):
        its ServiceAccount lacks a verb the chart's RBAC should grant."""
        found = []
        for n in range(1, self.starts + 1):
            path = self._log_dir / f"operator-{n}.log"
            for line in path.read_text(errors="replace").splitlines():
                if "forbidden" in line.lower() or " 403" in line:
                    found.append(line)
        return found

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def send_signal(self, sig: int) -> None:
        """SIGKILL, SIGSTOP, SIGCONT... to the running operator (leader election tests)."""
        assert self._proc is not None, "operator not running"
        self._proc.send_signal(sig)

    def stop(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=5)
        self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def running_operator(
    kubeconfig: Path,
    log_dir: Path,
    *,
    namespaces: tuple[str, ...] | None = None,
    extra_env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
) -> Iterator[OperatorProcess]:
    """An operator process for a test module; afterwards, no 403 in any of its logs (the
    chart's RBAC, in the session's mode, must grant every verb the operator used)."""
    proc = OperatorProcess(
        kubeconfig, log_dir, namespaces=namespaces, extra_env=extra_env, extra_args=extra_args
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
    assert proc.forbidden() == [], (
        f"the chart's RBAC ({rbac_mode()} mode) lacks a verb the operator used"
    )
