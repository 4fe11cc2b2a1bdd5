"""L2 of the cache sidecar (the ``vector`` tier): a memory-mapped vector index, searched by
``POST /v1/retrieve``.

`sits-index build` (cli.py) turns a JSONL corpus into an index directory: IVF-PQ with
re-ranking for large collections, HNSW for small ones (build.py). The sidecar opens that
directory read-only with `VectorService`; for IVF-PQ it counts inverted-list accesses
over a sliding window and keeps the hot lists resident, preloading them at start from the
statistics it saved when it last stopped (hotlists.py, window.py).
"""

from .build import BuildOptions, build_index
from .docs import Document
from .manifest import Manifest, read_manifest
from .service import EMBEDDING_MODEL, VectorConfig, VectorService

__all__ = [
    "EMBEDDING_MODEL",
    "BuildOptions",
    "Document",
    "Manifest",
    "VectorConfig",
    "VectorService",
    "build_index",
    "read_manifest",
]
