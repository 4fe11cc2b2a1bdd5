"""Routing from a YAML or JSON file, reloaded when it changes (outside a cluster).

Polling every 200 ms (read and hash; the file is small) rather than inotify or mtime: it
needs no extra dependency, works on every filesystem (including ConfigMap volumes, which
swap a symlink rather than write the file) and cannot miss two writes within one mtime
tick; a change is in force well within 1 s. A file
that no longer parses is logged and ignored: the last good table stays in force, since a
typo must not take traffic down.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from pathlib import Path

import yaml

from ..table import EMPTY_TABLE, RoutingTable, TableError, table_from_document

log = logging.getLogger(__name__)


def load_table(path: Path) -> RoutingTable:
    """Parse the file; :class:`TableError` says what is wrong with it."""
    try:
        doc = yaml.safe_load(path.read_bytes())
    except (OSError, yaml.YAMLError) as err:
        raise TableError(f"{path}: {err}") from None
    return table_from_document(doc)


class StaticFileSource:
    """Follows one routing file; ``current()`` is the last table that parsed."""

    def __init__(self, path: Path | str, *, poll_interval: float = 0.2) -> None:
        self.path = Path(path)
        self._interval = poll_interval
        self._table = EMPTY_TABLE
        self._digest = b""
        self._task: asyncio.Task[None] | None = None

    def current(self) -> RoutingTable:
        return self._table

    @property
    def ready(self) -> bool:
        return self._table is not EMPTY_TABLE

    async def start(self) -> None:
        self._load(strict=True)
        self._task = asyncio.create_task(self._follow(), name=f"sits-gateway-file:{self.path}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def poll(self) -> bool:
        """Reload if the file changed; True when a new table is in force."""
        return self._load(strict=False)

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            self.poll()

    def _load(self, *, strict: bool) -> bool:
        try:
            raw = self.path.read_bytes()
        except OSError as err:
            if strict:
                raise TableError(f"{self.path}: {err}") from None
            return False
        digest = hashlib.sha256(raw).digest()
        if digest == self._digest:
            return False
        try:
            table = table_from_document(yaml.safe_load(raw))
        except (TableError, yaml.YAMLError) as err:
            if strict:
                raise TableError(f"{self.path}: {err}") from None
            log.error("ignoring %s, keeping the previous routing: %s", self.path, err)
            return False
        self._table, self._digest = table, digest
        log.info("routing from %s: %s", self.path, describe(table))
        return True


def describe(table: RoutingTable) -> str:
    """One log line per table: weights and endpoint counts."""
    parts = (f"{v.name}={v.weight}% ({len(v.endpoints)} endpoints)" for v in table.variants)
    return f"{table.namespace}/{table.deployment}: " + ", ".join(parts)
