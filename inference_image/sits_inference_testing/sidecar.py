"""Running the ``sits-cache`` console script as a process, for tests and benchmarks.

The integration tests and the benchmark start the sidecar exactly as a pod does: the
installed console script, configured only by ``SITS_CACHE_*`` variables.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import IO

LOOPBACK = "127.0.0.1"
STOP_GRACE_S = 15.0


class SidecarError(RuntimeError):
    """The sidecar did not come up; the message carries the tail of its log."""


def console_script() -> Path:
    """``sits-cache`` beside the running interpreter (the project's venv)."""
    return Path(sys.executable).parent / "sits-cache"


class SidecarProcess:
    """One ``sits-cache`` process listening on ``127.0.0.1:port``.

    ``env`` is the SITS_CACHE_* set (as the operator renders it); ``SITS_CACHE_LISTEN`` is
    forced to loopback. Its own process group, so ``stop()`` leaves nothing behind.
    """

    def __init__(self, env: Mapping[str, str], port: int, log_dir: Path | None = None) -> None:
        self.port = port
        self.env = {**env, "SITS_CACHE_LISTEN": f"{LOOPBACK}:{port}"}
        self.log_dir = Path(log_dir or Path(tempfile.gettempdir()) / "sits-cache-logs")
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, timeout: float = 180.0) -> SidecarProcess:
        """Start and wait until it answers ``/metrics`` (it listens once its tiers loaded;
        ``/health`` would also wait for vLLM, which a test may have stopped on purpose)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"sits-cache-{self.port}-{os.getpid()}.log"
        self._log = self.log_path.open("ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SITS_CACHE_")}
        env.update(self.env)
        self._proc = subprocess.Popen(
            [str(console_script())],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            self._wait_listening(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise SidecarError(self._failure(f"exited with {self._proc.returncode}"))
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"{self.url}/metrics", timeout=2) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.25)
        raise SidecarError(self._failure(f"not listening after {timeout:.0f} s"))

    def wait_healthy(self, timeout: float = 300.0) -> None:
        """Until ``/health`` is 200, i.e. the sidecar sees vLLM up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.health() == 200:
                return
            time.sleep(0.25)
        raise SidecarError(self._failure(f"/health not 200 after {timeout:.0f} s"))

    def health(self) -> int:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except (OSError, urllib.error.URLError):
            return 0

    def _failure(self, what: str) -> str:
        tail = ""
        if self.log_path is not None and self.log_path.exists():
            lines = self.log_path.read_text(errors="replace").splitlines()[-30:]
            tail = "\n".join(f"    {line}" for line in lines)
        return f"sits-cache on {self.url} {what}; log: {self.log_path}\n{tail}"

    def stop(self) -> int | None:
        """SIGTERM to the group, SIGKILL after a grace period; returns the exit code."""
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                code = proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def __enter__(self) -> SidecarProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
