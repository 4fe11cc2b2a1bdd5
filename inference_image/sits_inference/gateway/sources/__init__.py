"""Where routing tables come from: one small Protocol, three implementations.

- :class:`~.static.StaticFileSource`: a YAML/JSON file, for running outside a cluster;
- :class:`~.kube.KubernetesSource`: the SitsDeployment's status (weights) and the
  variants' EndpointSlices (ready endpoints), followed by watches;
- :class:`MemorySource`: a table set in code (tests, embedding).

The gateway calls ``current()`` on every request, so it must be a plain attribute read;
sources do their I/O in background tasks and swap in whole new immutable tables.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..table import EMPTY_TABLE, RoutingTable


@runtime_checkable
class RoutingSource(Protocol):
    def current(self) -> RoutingTable:
        """The table in force now (cheap: called per request)."""

    @property
    def ready(self) -> bool:
        """True once a first table was loaded (the gateway's /health follows it)."""

    async def start(self) -> None:
        """Load the first table (raise if that is impossible) and start following changes."""

    async def close(self) -> None:
        """Stop following changes; idempotent."""


@runtime_checkable
class HasOrigin(Protocol):
    """A source that can say which object state its table came from (the Kubernetes
    source: generation, resourceVersion, decidedAt); /sits/v1/routing reports it."""

    @property
    def origin(self) -> dict[str, object]:
        """Empty before the first table."""


class MemorySource:
    """A table held in memory and replaced by :meth:`set`."""

    def __init__(self, table: RoutingTable = EMPTY_TABLE) -> None:
        self._table = table

    def current(self) -> RoutingTable:
        return self._table

    def set(self, table: RoutingTable) -> None:
        self._table = table

    @property
    def ready(self) -> bool:
        return self._table is not EMPTY_TABLE

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None
