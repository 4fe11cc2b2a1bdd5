"""One adapter as L3 sees it: its lease, its error, its state and version."""

from __future__ import annotations

import asyncio
import enum
import hashlib
import logging
import math
from dataclasses import dataclass
from pathlib import Path

from .spec import (
    AdapterSpec,
    directory_bytes,
    directory_digest,
    short_digest,
    versioned_name,
    weights_digest,
)

log = logging.getLogger(__name__)


class AdapterUnavailable(Exception):  # noqa: N818 (the name is the sidecar contract)
    """The adapter cannot serve this request; ``status`` is the HTTP status to answer.

    502: vLLM rejected the load (bad files, wrong base model) or the files do not match
    their declared digest; 503: vLLM unreachable, or every slot busy until the wait ran
    out; 504: the load did not finish in time; 404: not an adapter of this sidecar.
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def copy(self) -> AdapterUnavailable:
        """A fresh instance for each waiter: one exception object raised in many tasks
        would accumulate their tracebacks."""
        return AdapterUnavailable(self.message, self.status)


@dataclass(frozen=True)
class AdapterLease:
    """A request's hold on a resident adapter: put ``served_name`` in the upstream request."""

    name: str
    served_name: str
    digest: str


class State(enum.Enum):
    ABSENT = "absent"
    LOADING = "loading"
    RESIDENT = "resident"
    UNLOADING = "unloading"


OCCUPYING = frozenset({State.LOADING, State.RESIDENT, State.UNLOADING})


@dataclass(frozen=True)
class Version:
    """What ``start()`` learned about an adapter's files."""

    digest: str
    size: int
    broken: str | None = None


@dataclass
class Adapter:
    """Mutable state of one configured adapter (only touched on the event loop)."""

    spec: AdapterSpec
    version: Version
    state: State = State.ABSENT
    in_flight: int = 0
    last_used: float = -math.inf
    loads: int = 0
    task: asyncio.Task[AdapterUnavailable | None] | None = None
    failure: AdapterUnavailable | None = None
    retry_at: float = -math.inf
    backoff_s: float = 0.0
    changed_at: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def served_name(self) -> str:
        return versioned_name(self.spec.name, self.version.digest)

    def lease(self) -> AdapterLease:
        return AdapterLease(self.name, self.served_name, self.version.digest)

    def describe(self, now: float, value: float) -> dict[str, object]:
        return {
            "name": self.name,
            "served_name": self.served_name,
            "digest": self.version.digest,
            "source": self.spec.source,
            "pinned": self.spec.pinned,
            "state": self.state.value,
            "in_flight": self.in_flight,
            "value": round(value, 3),
            "loads": self.loads,
            "bytes": self.version.size,
            "last_error": self.failure.message if self.failure else self.version.broken,
            "retry_in_s": round(max(0.0, self.retry_at - now), 1),
        }


def resolve_version(spec: AdapterSpec) -> Version:
    """Digest and size of ``spec``'s files; blocking (reads them): run it in a thread."""
    root = Path(spec.source)
    if not root.is_dir():
        # A source only vLLM can reach (or a typo that vLLM's load will report clearly).
        if spec.digest is not None:
            return Version(short_digest(spec.digest), 0)
        log.warning(
            "adapter %s: %s is not a local directory; versioning by the source string, "
            "so content changes behind the same source go unnoticed (give a digest)",
            spec.name,
            spec.source,
        )
        return Version(hashlib.sha256(spec.source.encode()).hexdigest(), 0)
    digest = directory_digest(root)
    size = directory_bytes(root)
    if spec.digest is not None:
        actual = weights_digest(root)
        expected = spec.digest.split(":", 1)[-1].lower()
        if actual is None or actual != expected:
            return Version(
                digest,
                size,
                broken=f"adapter {spec.name}: weights in {root} have sha256 {actual}, "
                f"the configuration expects {expected}",
            )
    return Version(digest, size)
