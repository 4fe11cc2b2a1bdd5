"""`sits-index`: build an index directory from a JSONL corpus, or describe one.

    sits-index build --corpus corpus.jsonl --out DIR [--kind auto|ivfpq|hnsw]
                     [--text-field text] [--id-field id] [--vector-field vector]
                     [--vectors vectors.npy] [--nlist N] [--m M] [--nprobe N] ...
    sits-index info DIR [--verify]

The directory is what a SitsDeployment's spec.cache.vectorIndex.indexRef names; the
operator mounts it read-only into the sidecar and sets SITS_CACHE_VECTOR_INDEX to it.
Exit status: 0 done, 1 the index is not valid (info --verify), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .build import BuildOptions, build_index
from .corpus import CorpusError, Fields, read_corpus
from .docs import Document
from .manifest import IndexFormatError, content_digest, read_manifest
from .service import EMBEDDING_MODEL


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sits-index", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build an index directory from a JSONL corpus")
    build.add_argument("--corpus", type=Path, required=True, help="JSONL, one document a line")
    build.add_argument("--out", type=Path, required=True, help="index directory to write")
    build.add_argument("--kind", choices=("auto", "ivfpq", "hnsw"), default="auto")
    build.add_argument("--hnsw-max", type=int, default=100_000, help="auto: HNSW up to this size")
    build.add_argument("--text-field", default="text")
    build.add_argument("--id-field", default="id")
    build.add_argument("--vector-field", default="vector", help="precomputed vector per line")
    build.add_argument("--vectors", type=Path, help=".npy of precomputed vectors, one row a line")
    build.add_argument("--nlist", type=int, help="IVF lists (default ~2*sqrt(n))")
    build.add_argument("--m", type=int, help="PQ sub-quantizers (default dimension/8)")
    build.add_argument("--nprobe", type=int, help="lists scanned per query (default: tuned)")
    build.add_argument("--refine-factor", type=int, default=4, help="re-ranked candidates per k")
    build.add_argument("--hnsw-m", type=int, default=32)
    build.add_argument("--ef-construction", type=int, default=80)
    build.add_argument("--ef-search", type=int, help="HNSW search breadth (default: tuned)")
    build.add_argument("--target-recall", type=float, default=0.97, help="recall@10 to tune for")
    build.add_argument("--filter-fields", help="comma-separated metadata fields to filter on")
    build.add_argument("--batch-size", type=int, default=256, help="texts embedded per batch")
    build.add_argument("--force", action="store_true", help="replace an existing index")
    info = sub.add_parser("info", help="print an index directory's manifest")
    info.add_argument("directory", type=Path)
    info.add_argument("--verify", action="store_true", help="recompute the content digest")
    return parser


def _embed(documents: Sequence[Document], batch: int) -> npt.NDArray[np.float32]:
    from ..embedding import MiniLMEmbedder

    embedder = MiniLMEmbedder(threads=os.cpu_count() or 1)
    rows = []
    started = time.monotonic()
    for start in range(0, len(documents), batch):
        rows.append(embedder.embed([doc.text or "" for doc in documents[start : start + batch]]))
        done = min(start + batch, len(documents))
        rate = done / max(1e-9, time.monotonic() - started)
        _say(f"embedded {done}/{len(documents)} texts ({rate:.0f}/s)")
    return np.concatenate(rows)


def build(args: argparse.Namespace) -> int:
    fields = Fields(text=args.text_field, id=args.id_field, vector=args.vector_field)
    corpus = read_corpus(args.corpus, fields)
    model: str | None = None
    if args.vectors is not None:
        vectors: npt.ArrayLike = np.load(args.vectors)
    elif corpus.vectors is not None:
        vectors = corpus.vectors
    else:
        vectors, model = _embed(corpus.documents, args.batch_size), EMBEDDING_MODEL
    options = BuildOptions(
        kind=args.kind,
        hnsw_max=args.hnsw_max,
        nlist=args.nlist,
        m=args.m,
        nprobe=args.nprobe,
        refine_factor=args.refine_factor,
        hnsw_m=args.hnsw_m,
        ef_construction=args.ef_construction,
        ef_search=args.ef_search,
        target_recall=args.target_recall,
        embedding_model=model,
        filter_fields=tuple(args.filter_fields.split(",")) if args.filter_fields else None,
        overwrite=args.force,
    )
    manifest = build_index(args.out, vectors, corpus.documents, options, _say)
    print(json.dumps(manifest.to_json(), indent=2, sort_keys=True))
    return 0


def info(args: argparse.Namespace) -> int:
    manifest = read_manifest(args.directory)
    print(json.dumps(manifest.to_json(), indent=2, sort_keys=True))
    if args.verify:
        actual = content_digest(args.directory, manifest.files)
        if actual != manifest.digest:
            _say(f"digest mismatch: manifest {manifest.digest}, files {actual}")
            return 1
        _say("digest verified")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return build(args) if args.command == "build" else info(args)
    except IndexFormatError as err:
        _say(f"sits-index: {err}")
        return 1
    except (CorpusError, FileExistsError, FileNotFoundError, ValueError) as err:
        _say(f"sits-index: {err}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
