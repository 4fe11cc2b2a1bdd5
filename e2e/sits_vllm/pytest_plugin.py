"""pytest fixtures for tests against a real vLLM (mark them ``vllm``).

- ``tiny_model`` (session): the cached tiny random Llama's directory.
- ``vllm_server`` (session): one plain server (served name ``tiny``, no LoRA), started once
  and shared by every test of the session. Treat it as read-only: a test that needs to
  restart, reconfigure or load adapters starts its own with ``vllm_factory``.
- ``vllm_factory`` (session): ``vllm_factory(**VllmServer kwargs) -> VllmServer`` starts an
  extra server on the tiny model (or ``model_dir=...``); all are stopped at session end.

Why the session server starts in a ``pytest_runtest_protocol`` wrapper: pytest-timeout's
clock covers fixture set-up, and a first model build plus a vLLM start (~30-120 s on 2
busy cores) must not be charged to whichever test happens to run first. Servers started
through ``vllm_factory`` do count against the calling test: give it a larger
``@pytest.mark.timeout``.

Why fail rather than skip: a missing vLLM venv is a set-up error, and a skip would let a
green run hide that the vLLM tests never ran. The failure says how to fix it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sits_localcluster.pytest_plugin import uncaptured

from .model import ensure_tiny_model
from .orphans import reap_orphans
from .server import VllmServer
from .venv import vllm_python

FIXTURES = frozenset({"tiny_model", "vllm_server", "vllm_factory"})
START_TIMEOUT_S = 300.0

VllmFactory = Callable[..., VllmServer]


@dataclass
class _Session:
    """Process-wide memo: one attempt per pytest session at each expensive step."""

    model: Path | None = None
    model_error: str | None = None
    model_attempted: bool = False
    server: VllmServer | None = None
    server_error: str | None = None
    server_attempted: bool = False
    extra_servers: list[VllmServer] = field(default_factory=list)


_STATE = _Session()


def _progress(line: str) -> None:
    """Write past pytest's capture: a build or start of a minute deserves a live line."""
    stream = sys.__stderr__ or sys.stderr
    stream.write(f"[sits-vllm] {line}\n")
    stream.flush()


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def _prepare_model() -> None:
    """Check the venv and build (or find) the tiny model, once; remember any failure."""
    if _STATE.model_attempted:
        return
    _STATE.model_attempted = True
    reaped = reap_orphans()
    if reaped:
        _progress(f"killed vLLM process groups left by a dead test run: {reaped}")
    try:
        vllm_python()
        _progress("tiny model: building or reusing the cached one")
        _STATE.model = ensure_tiny_model()
        _progress(f"tiny model: {_STATE.model}")
    except Exception as err:  # surfaces later as a test failure, with its reason
        _STATE.model_error = _describe(err)


def _prepare_server() -> None:
    """Start the shared session server, once; remember any failure."""
    if _STATE.server_attempted:
        return
    _STATE.server_attempted = True
    _prepare_model()
    if _STATE.model is None:
        return
    server = VllmServer(_STATE.model)
    _progress(
        f"starting the session vLLM server on {server.url} (~30-120 s, more on a busy machine)"
    )
    try:
        _STATE.server = server.start(START_TIMEOUT_S)
        _progress(f"session vLLM server ready; log: {server.log_path}")
    except Exception as err:
        _STATE.server_error = _describe(err)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """Do the slow preparation before the per-test timeout clock starts."""
    names = set(getattr(item, "fixturenames", ()))
    if names & FIXTURES:
        with uncaptured(item.config):
            _prepare_model()
            if "vllm_server" in names:
                _prepare_server()
    return (yield)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Backstop: stop every server this process started, even after an interrupted run."""
    _stop_all()


def _stop_all() -> None:
    servers = [*_STATE.extra_servers, *([_STATE.server] if _STATE.server else [])]
    _STATE.extra_servers.clear()
    _STATE.server = None
    for server in servers:
        server.stop()


def _require_model() -> Path:
    """The model, or a test failure carrying the reason and the fix."""
    _prepare_model()
    if _STATE.model is None:
        pytest.fail(f"vLLM test environment unavailable: {_STATE.model_error}", pytrace=False)
    return _STATE.model


@pytest.fixture(scope="session")
def tiny_model(pytestconfig: pytest.Config) -> Path:
    """Directory of the cached tiny random Llama (builds it on first use)."""
    with uncaptured(pytestconfig):
        return _require_model()


@pytest.fixture(scope="session")
def vllm_server(pytestconfig: pytest.Config, tiny_model: Path) -> Iterator[VllmServer]:
    """The session's shared vLLM server serving ``tiny`` on 127.0.0.1."""
    with uncaptured(pytestconfig):
        _prepare_server()
    server = _STATE.server
    if server is None:
        pytest.fail(f"vLLM server failed to start: {_STATE.server_error}", pytrace=False)
    yield server
    with uncaptured(pytestconfig):
        server.stop()
    _STATE.server = None


@pytest.fixture(scope="session")
def vllm_factory(pytestconfig: pytest.Config, tiny_model: Path) -> Iterator[VllmFactory]:
    """Start extra servers: ``vllm_factory(served_model_name="b", enable_lora=True)``.

    Accepts ``VllmServer``'s arguments (``model_dir`` defaults to the tiny model) plus
    ``timeout``; returns the started server. All are stopped when the session ends.
    """

    def start(timeout: float = START_TIMEOUT_S, **kwargs: Any) -> VllmServer:
        kwargs.setdefault("model_dir", tiny_model)
        server = VllmServer(**kwargs)
        _STATE.extra_servers.append(server)
        with uncaptured(pytestconfig):
            _progress(f"starting an extra vLLM server on {server.url}")
            return server.start(timeout)

    yield start
    with uncaptured(pytestconfig):
        for server in _STATE.extra_servers:
            server.stop()
    _STATE.extra_servers.clear()
