"""Reading a JSONL corpus for `sits-index build`.

One JSON object per line. `id` (field name configurable) identifies the document (the
line's position when absent; duplicates are an error, since results name documents by
id). `text` is embedded with all-MiniLM-L6-v2 unless the line carries a precomputed
`vector` (for synthetic corpora or another embedding pipeline); either every line has a
vector or none does. Metadata is the line's `metadata` object when it has one, otherwise
every other field of the line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .docs import Document


class CorpusError(ValueError):
    """A corpus line that cannot be indexed; the message names the line."""


@dataclass(frozen=True)
class Corpus:
    documents: list[Document]
    vectors: list[list[float]] | None  # None: embed the documents' texts


@dataclass(frozen=True)
class Fields:
    text: str = "text"
    id: str = "id"
    vector: str = "vector"


def _document(record: dict[str, Any], position: int, fields: Fields) -> Document:
    raw_id = record.get(fields.id, position)
    if not isinstance(raw_id, str | int) or isinstance(raw_id, bool):
        raise CorpusError(f"`{fields.id}` must be a string or an integer")
    text = record.get(fields.text)
    if text is not None and not isinstance(text, str):
        raise CorpusError(f"`{fields.text}` must be a string")
    metadata = record.get("metadata")
    if not isinstance(metadata, dict):
        skip = {fields.id, fields.text, fields.vector, "metadata"}
        metadata = {k: v for k, v in record.items() if k not in skip}
    return Document(str(raw_id), text, metadata)


def read_corpus(path: Path, fields: Fields | None = None) -> Corpus:
    fields = fields or Fields()
    documents: list[Document] = []
    vectors: list[list[float]] = []
    seen: set[str] = set()
    with_vectors: bool | None = None  # decided by the first document
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise CorpusError("not a JSON object")
                doc = _document(record, len(documents), fields)
            except (ValueError, CorpusError) as err:
                raise CorpusError(f"{path}:{number}: {err}") from None
            if doc.id in seen:
                raise CorpusError(f"{path}:{number}: duplicate id {doc.id!r}")
            seen.add(doc.id)
            vector = record.get(fields.vector)
            if with_vectors is None:
                with_vectors = vector is not None
            if (vector is not None) != with_vectors:
                raise CorpusError(
                    f"{path}:{number}: either every line has `{fields.vector}` or none does"
                )
            if vector is not None:
                vectors.append(vector)
            elif doc.text is None:
                raise CorpusError(f"{path}:{number}: no `{fields.text}` to embed and no vector")
            documents.append(doc)
    if not documents:
        raise CorpusError(f"{path}: no documents")
    return Corpus(documents, vectors or None)
