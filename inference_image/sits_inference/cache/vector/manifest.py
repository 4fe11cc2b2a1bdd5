"""The index directory's manifest: what was built, how, and a digest of its content.

Why a manifest: the sidecar mounts a directory it did not build (a volume named by
spec.cache.vectorIndex.indexRef). Before serving it must know the kind of index, the
dimension and metric queries must match, which embedding model turns query text into a
vector, and which metadata fields can be filtered on. The content digest ties saved
list-access statistics to one build, and lets `sits-index info --verify` detect a
partially copied volume. The manifest is written last, so its presence means complete.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

FORMAT: Final = 1
MANIFEST: Final = "manifest.json"
INDEX_FILE: Final = "index.faiss"
VECTORS_FILE: Final = "vectors.f16"
DOCS_FILE: Final = "docs.jsonl"
OFFSETS_FILE: Final = "docs.offsets.npy"
FILTERS_FILE: Final = "filters.json"
FILTER_IDS_FILE: Final = "filters.ids.npy"

Kind = Literal["ivfpq", "hnsw"]
KINDS: Final[tuple[Kind, ...]] = ("ivfpq", "hnsw")
# Vectors are L2-normalised at build and query time; scores are cosine similarities.
METRIC: Final = "cosine"


class IndexFormatError(ValueError):
    """The directory is not a usable index (missing manifest, wrong format, bad digest)."""


@dataclass(frozen=True)
class Manifest:
    kind: Kind
    dimension: int
    count: int
    embedding_model: str | None
    params: dict[str, Any]
    filter_fields: tuple[str, ...]
    files: tuple[str, ...]
    digest: str
    created: str
    faiss_version: str
    metric: str = METRIC
    format: int = FORMAT
    measured: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["filter_fields"] = list(self.filter_fields)
        data["files"] = list(self.files)
        return data

    @classmethod
    def from_json(cls, data: Any) -> Manifest:
        if not isinstance(data, dict):
            raise IndexFormatError("manifest is not a JSON object")
        if data.get("format") != FORMAT:
            raise IndexFormatError(f"manifest format {data.get('format')!r}, expected {FORMAT}")
        if data.get("kind") not in KINDS:
            raise IndexFormatError(f"unknown index kind {data.get('kind')!r}")
        if data.get("metric") != METRIC:
            raise IndexFormatError(f"unsupported metric {data.get('metric')!r}")
        try:
            manifest = cls(
                kind=data["kind"],
                dimension=int(data["dimension"]),
                count=int(data["count"]),
                embedding_model=data.get("embedding_model"),
                params=dict(data.get("params", {})),
                filter_fields=tuple(data.get("filter_fields", ())),
                files=tuple(data["files"]),
                digest=str(data["digest"]),
                created=str(data.get("created", "")),
                faiss_version=str(data.get("faiss_version", "")),
                measured=dict(data.get("measured", {})),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise IndexFormatError(f"manifest is missing or has a bad field: {err}") from None
        if manifest.dimension <= 0 or manifest.count <= 0:
            raise IndexFormatError("manifest dimension and count must be positive")
        return manifest

    def write(self, directory: Path) -> None:
        tmp = directory / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n")
        tmp.replace(directory / MANIFEST)


def read_manifest(directory: Path) -> Manifest:
    path = directory / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise IndexFormatError(f"{path} does not exist (no index built here?)") from None
    except (OSError, ValueError) as err:
        raise IndexFormatError(f"{path}: {err}") from None
    manifest = Manifest.from_json(data)
    missing = [name for name in manifest.files if not (directory / name).is_file()]
    if missing:
        raise IndexFormatError(f"{directory}: files named by the manifest are missing: {missing}")
    return manifest


def content_digest(directory: Path, files: tuple[str, ...]) -> str:
    """sha256 over each file's name and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        with (directory / name).open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()
