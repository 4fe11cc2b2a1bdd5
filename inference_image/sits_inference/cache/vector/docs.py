"""Documents and metadata filters, stored in the index's internal order.

Why internal order: an IVF index is built so that the vectors of one inverted list have
consecutive internal ids (see build.py). Writing documents in the same order puts a
list's documents in one contiguous byte range of docs.jsonl, so preloading a hot list
can warm its documents with one range, exactly like its codes and vectors.

Filters are equality on scalar metadata values (string, number, boolean). At build time
every field with few enough distinct values gets a posting list per value (sorted
internal ids); a filter is the intersection of the postings of its fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from .manifest import DOCS_FILE, FILTER_IDS_FILE, FILTERS_FILE, OFFSETS_FILE
from .pages import MappedFile

Ids = npt.NDArray[np.int64]
# More distinct values than this and a field is an identifier, not a category.
MAX_FILTER_VALUES: Final = 65536


class FilterError(ValueError):
    """A filter the index cannot evaluate (unknown field, value that is not a scalar)."""


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    text: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_line(self) -> bytes:
        data = {"id": self.id, "text": self.text, "metadata": dict(self.metadata)}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> Document:
        data = json.loads(line)
        return cls(str(data["id"]), data.get("text"), data.get("metadata") or {})


def value_key(value: Any) -> str | None:
    """The posting key of a filterable value; None when the value is not a scalar.

    1 and 1.0 are one key (JSON does not tell them apart); True and 1 are not.
    """
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    return None


def write_documents(directory: Path, documents: Iterable[Document], count: int) -> None:
    """docs.jsonl plus the byte offset of every line (count + 1 offsets)."""
    offsets = np.zeros(count + 1, dtype=np.uint64)
    position = 0
    written = 0
    with (directory / DOCS_FILE).open("wb") as out:
        for i, doc in enumerate(documents):
            line = doc.to_line()
            out.write(line)
            position += len(line)
            offsets[i + 1] = position
            written += 1
    if written != count:
        raise ValueError(f"expected {count} documents, got {written}")
    np.save(directory / OFFSETS_FILE, offsets)


def write_filters(
    directory: Path,
    metadata: Sequence[Mapping[str, Any]],
    fields: Sequence[str] | None = None,
    max_values: int = MAX_FILTER_VALUES,
) -> tuple[str, ...]:
    """Posting lists for `fields` (default: every field with few enough distinct scalars).

    `metadata[i]` belongs to internal id i. Returns the fields that became filterable.
    """
    postings: dict[str, dict[str, list[int]]] = {}
    dropped: set[str] = set()
    for internal, meta in enumerate(metadata):
        for name, value in meta.items():
            if name in dropped or (fields is not None and name not in fields):
                continue
            key = value_key(value)
            if key is None:
                continue
            values = postings.setdefault(name, {})
            values.setdefault(key, []).append(internal)
            if len(values) > max_values and fields is None:
                dropped.add(name)
                del postings[name]
    table: dict[str, dict[str, list[int]]] = {}
    chunks: list[Ids] = []
    position = 0
    for name in sorted(postings):
        table[name] = {}
        for key, ids in sorted(postings[name].items()):
            table[name][key] = [position, position + len(ids)]
            chunks.append(np.asarray(ids, dtype=np.int64))
            position += len(ids)
    all_ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)
    np.save(directory / FILTER_IDS_FILE, all_ids)
    (directory / FILTERS_FILE).write_text(json.dumps(table, separators=(",", ":")))
    return tuple(sorted(table))


class DocStore:
    """Documents by internal id, read from the mapped docs.jsonl."""

    def __init__(self, directory: Path) -> None:
        self._offsets = np.load(directory / OFFSETS_FILE)
        self.count = len(self._offsets) - 1
        self.file = MappedFile(directory / DOCS_FILE)

    def get(self, internal_ids: Iterable[int]) -> list[Document]:
        offsets = self._offsets
        return [
            Document.from_line(self.file.read(int(offsets[i]), int(offsets[i + 1])))
            for i in internal_ids
        ]

    def byte_range(self, first: int, end: int) -> tuple[int, int]:
        """Bytes of docs.jsonl that hold internal ids [first, end)."""
        return int(self._offsets[first]), int(self._offsets[end])

    def close(self) -> None:
        self.file.close()


class FilterIndex:
    """Equality filters over metadata: field -> value -> sorted internal ids."""

    def __init__(self, directory: Path) -> None:
        self._table: dict[str, dict[str, list[int]]] = json.loads(
            (directory / FILTERS_FILE).read_text()
        )
        self._ids: Ids = np.load(directory / FILTER_IDS_FILE)
        self.fields = frozenset(self._table)

    def match(self, conditions: Mapping[str, Any]) -> Ids:
        """Internal ids whose metadata equals every condition (sorted, maybe empty)."""
        result: Ids | None = None
        for name, value in conditions.items():
            if name not in self._table:
                known = ", ".join(sorted(self.fields)) or "none"
                raise FilterError(f"field {name!r} cannot be filtered on (filterable: {known})")
            key = value_key(value)
            if key is None:
                raise FilterError(f"filter value for {name!r} must be a string, number or bool")
            span = self._table[name].get(key)
            ids = self._ids[span[0] : span[1]] if span else np.zeros(0, dtype=np.int64)
            result = ids if result is None else np.intersect1d(result, ids, assume_unique=True)
            if result.size == 0:
                break
        return result if result is not None else np.zeros(0, dtype=np.int64)
