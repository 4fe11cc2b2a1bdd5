"""Building an index directory from vectors and documents (what `sits-index build` runs).

Layout of the directory (manifest.json is written last; its presence means complete):

- index.faiss: the faiss index (IVF-PQ or HNSW-Flat);
- vectors.f16 (IVF-PQ only): float16 vectors in internal-id order, for re-ranking;
- docs.jsonl + docs.offsets.npy: documents in internal-id order and their byte offsets;
- filters.json + filters.ids.npy: posting lists of filterable metadata values.

IVF-PQ internal ids are assigned in inverted-list order: every vector is assigned to its
list first, then vectors are added list by list with the assignment passed in
(`add_core`), so list L holds the consecutive ids [start_L, start_L + size_L). That puts a
list's codes, vectors and documents each in one contiguous range of its file, which is
what makes preloading a hot list a few sequential reads instead of thousands of random
ones.

The search parameter (nprobe, or efSearch for HNSW) is tuned here: the smallest value
whose recall@10 against exact search reaches `target_recall` on perturbed copies of stored
vectors, measured through the same code that serves queries. The manifest records it.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np
import numpy.typing as npt
from faiss import swig_ptr

from .base import exact_neighbours
from .docs import MAX_FILTER_VALUES, DocStore, Document, write_documents, write_filters
from .hnsw import HnswIndex
from .ivfpq import IvfPqIndex
from .manifest import (
    FORMAT,
    INDEX_FILE,
    MANIFEST,
    VECTORS_FILE,
    Kind,
    Manifest,
    content_digest,
)

Progress = Callable[[str], None]
Matrix = npt.NDArray[np.float32]
CHUNK = 65536
TUNING_QUERIES = 400


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class BuildOptions:
    kind: Literal["auto", "ivfpq", "hnsw"] = "auto"
    # auto picks HNSW up to this many vectors, IVF-PQ above.
    hnsw_max: int = 100_000
    nlist: int | None = None
    m: int | None = None
    nbits: int = 8
    nprobe: int | None = None
    refine_factor: int = 4
    hnsw_m: int = 32
    ef_construction: int = 80
    ef_search: int | None = None
    target_recall: float = 0.97
    embedding_model: str | None = None
    filter_fields: tuple[str, ...] | None = None
    max_filter_values: int = MAX_FILTER_VALUES
    seed: int = 0
    overwrite: bool = False


def choose_kind(count: int, options: BuildOptions) -> Kind:
    if options.kind != "auto":
        return options.kind
    return "hnsw" if count <= options.hnsw_max else "ivfpq"


def normalise(vectors: npt.ArrayLike) -> Matrix:
    """Unit-length float32 rows; zero rows are rejected (they have no direction)."""
    try:
        x = np.array(vectors, dtype=np.float32, copy=True, order="C")
    except (ValueError, TypeError):
        raise ValueError("vectors must be numbers, all of the same dimension") from None
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError("vectors must be a non-empty 2-D array")
    if not np.isfinite(x).all():
        raise ValueError("vectors contain NaN or infinite values")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError(f"vector {int(np.flatnonzero(norms == 0)[0])} is all zeros")
    x /= norms
    return x


def ivf_params(count: int, dimension: int, options: BuildOptions) -> dict[str, int]:
    """nlist near 2*sqrt(n) (a power of two, at least 39 training points per list), m the
    largest divisor of the dimension up to dimension/8 (one byte per 8 floats)."""
    nlist = options.nlist or 2 ** round(math.log2(max(16.0, 2 * math.sqrt(count))))
    nlist = max(1, min(nlist, count // 39))
    m = options.m or next(c for c in range(max(1, dimension // 8), 0, -1) if dimension % c == 0)
    if dimension % m:
        raise ValueError(f"--m {m} must divide the dimension {dimension}")
    nbits = min(options.nbits, max(1, int(math.log2(max(2, count // 39)))))
    return {"nlist": nlist, "m": m, "nbits": nbits}


def _train_ivfpq(x: Matrix, params: dict[str, int], seed: int, say: Progress) -> Any:
    d = x.shape[1]
    quantizer = faiss.IndexFlatL2(d)
    index = faiss.IndexIVFPQ(quantizer, d, params["nlist"], params["m"], params["nbits"])
    index.cp.seed = seed
    rng = np.random.default_rng(seed)
    size = min(len(x), max(64 * params["nlist"], 65536))
    sample = x[np.sort(rng.choice(len(x), size=size, replace=False))]
    say(f"training IVF{params['nlist']},PQ{params['m']}x{params['nbits']} on {size} vectors")
    started = time.monotonic()
    index.train(sample)  # the wrapper keeps `quantizer` alive as long as `index`
    say(f"trained in {time.monotonic() - started:.1f} s")
    return index


def _add_in_list_order(index: Any, x: Matrix, say: Progress) -> npt.NDArray[np.int64]:
    """Assign, sort by list, add with the assignment; returns order[internal] = input row."""
    assign = np.empty(len(x), dtype=np.int64)
    for start in range(0, len(x), CHUNK):
        assign[start : start + CHUNK] = index.quantizer.assign(x[start : start + CHUNK], 1)[:, 0]
        say(f"assigned {min(start + CHUNK, len(x))}/{len(x)} vectors to lists")
    order = np.argsort(assign, kind="stable").astype(np.int64)
    for start in range(0, len(x), CHUNK):
        rows = order[start : start + CHUNK]
        xs = np.ascontiguousarray(x[rows])
        lists = np.ascontiguousarray(assign[rows])
        index.add_core(len(rows), swig_ptr(xs), None, swig_ptr(lists))
        say(f"encoded {min(start + CHUNK, len(x))}/{len(x)} vectors")
    return order


def _write_vectors(out: Path, x: Matrix, order: npt.NDArray[np.int64]) -> None:
    with (out / VECTORS_FILE).open("wb") as handle:
        for start in range(0, len(x), CHUNK):
            handle.write(x[order[start : start + CHUNK]].astype(np.float16).tobytes())


def tuning_rows(count: int, sample: int, seed: int) -> npt.NDArray[np.int64]:
    rng = np.random.default_rng(seed + 1)
    return np.sort(rng.choice(count, size=min(sample, count), replace=False)).astype(np.int64)


def leave_one_out_recall(
    found: Sequence[npt.NDArray[np.int64]],
    truth: npt.NDArray[np.int64],
    own: npt.NDArray[np.int64],
) -> float:
    """Recall@10 of stored vectors used as queries, each one's own id removed from both the
    answer and the truth (k=11 searched): the query then stands for a fresh document from
    the same distribution, not for a lookup of a stored one."""
    total = 0.0
    for ids, expected, self_id in zip(found, truth, own, strict=True):
        got = [i for i in ids.tolist() if i != self_id][:10]
        want = [i for i in expected.tolist() if i != self_id][:10]
        total += len(set(got) & set(want)) / max(1, len(want))
    return total / max(1, len(own))


def _candidates(manifest: Manifest) -> tuple[str, list[int]]:
    if manifest.kind == "ivfpq":
        nlist = int(manifest.params["nlist"])
        return "nprobe", [2**i for i in range(int(math.log2(nlist)) + 1)] + [nlist]
    return "ef_search", [16, 32, 64, 128, 256, 512]


def _tune(
    out: Path,
    manifest: Manifest,
    x: Matrix,
    order: npt.NDArray[np.int64],
    options: BuildOptions,
    say: Progress,
) -> tuple[str, int, float]:
    """Smallest nprobe (IVF-PQ) or efSearch (HNSW) reaching the target recall@10."""
    rows = tuning_rows(len(x), TUNING_QUERIES, options.seed)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    truth = inverse[exact_neighbours(x, x[rows], min(11, len(x)))]
    own = inverse[rows]
    name, values = _candidates(manifest)
    fixed = {"ivfpq": options.nprobe, "hnsw": options.ef_search}[manifest.kind]
    best: tuple[str, int, float] = (name, values[-1], 0.0)
    docs = DocStore(out)
    try:
        for value in [fixed] if fixed else values:
            probe = replace(manifest, params={**manifest.params, name: value})
            index = IvfPqIndex(out, probe, docs) if probe.kind == "ivfpq" else HnswIndex(out, probe)
            try:
                found = [index.search(q, 11, None).ids for q in x[rows]]
            finally:
                index.close()
            recall = leave_one_out_recall(found, truth, own)
            say(f"{name}={value}: recall@10 {recall:.3f} (leave-one-out, {len(rows)} queries)")
            best = (name, value, recall)
            if recall >= options.target_recall:
                break
        return best
    finally:
        docs.close()


def _prepare(out: Path, overwrite: bool) -> None:
    if (out / MANIFEST).exists():
        if not overwrite:
            raise FileExistsError(f"{out} already holds an index (pass overwrite/--force)")
        for name in out.iterdir():
            shutil.rmtree(name) if name.is_dir() else name.unlink()
    out.mkdir(parents=True, exist_ok=True)


def build_index(
    out: Path,
    vectors: npt.ArrayLike,
    documents: Sequence[Document],
    options: BuildOptions | None = None,
    progress: Progress = _stderr,
) -> Manifest:
    """Build an index of `vectors` (row i belongs to documents[i]) into directory `out`."""
    options = options or BuildOptions()
    x = normalise(vectors)
    if len(documents) != len(x):
        raise ValueError(f"{len(x)} vectors but {len(documents)} documents")
    _prepare(out, options.overwrite)
    kind = choose_kind(len(x), options)
    started = time.monotonic()
    if kind == "ivfpq":
        params: dict[str, Any] = ivf_params(len(x), x.shape[1], options)
        index = _train_ivfpq(x, params, options.seed, progress)
        order = _add_in_list_order(index, x, progress)
        params["refine_factor"] = options.refine_factor
        _write_vectors(out, x, order)
    else:
        params = {"M": options.hnsw_m, "ef_construction": options.ef_construction}
        index = faiss.IndexHNSWFlat(x.shape[1], options.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = options.ef_construction
        for start in range(0, len(x), CHUNK // 4):
            index.add(x[start : start + CHUNK // 4])
            progress(f"inserted {min(start + CHUNK // 4, len(x))}/{len(x)} vectors into HNSW")
        order = np.arange(len(x), dtype=np.int64)
    faiss.write_index(index, str(out / INDEX_FILE))
    del index
    write_documents(out, (documents[i] for i in order), len(x))
    fields = write_filters(
        out,
        [documents[i].metadata for i in order],
        options.filter_fields,
        options.max_filter_values,
    )
    files = tuple(sorted(p.name for p in out.iterdir() if p.name != MANIFEST))
    manifest = Manifest(
        kind=kind,
        dimension=int(x.shape[1]),
        count=len(x),
        embedding_model=options.embedding_model,
        params=params,
        filter_fields=fields,
        files=files,
        digest="",
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        faiss_version=faiss.__version__,
        format=FORMAT,
    )
    name, value, recall = _tune(out, manifest, x, order, options, progress)
    measured = {
        "recall_at_10": round(recall, 4),
        "queries": TUNING_QUERIES,
        "target": options.target_recall,
    }
    measured["build_seconds"] = round(time.monotonic() - started, 1)
    manifest = replace(
        manifest,
        params={**params, name: value},
        digest=content_digest(out, files),
        measured=measured,
    )
    manifest.write(out)
    progress(f"built {kind} index of {len(x)} vectors in {out} ({manifest.digest[:19]})")
    return manifest
