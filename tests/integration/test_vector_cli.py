"""`sits-index` end to end (the console script in a subprocess), and one index of real
MiniLM embeddings answering text queries over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.vector import VectorConfig, VectorService
from sits_inference_testing.vectors import TopicModel, serving

SCRIPT = Path(sys.executable).with_name("sits-index")


def sits_index(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = (
        [str(SCRIPT)]
        if SCRIPT.exists()
        else [sys.executable, "-m", "sits_inference.cache.vector.cli"]
    )
    return subprocess.run(
        [*command, *map(str, args)], capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def vector_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12,000 synthetic documents whose lines carry their vectors and some metadata."""
    vectors, topics = TopicModel(dimension=32, topics=60, seed=2).corpus(12_000)
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    with path.open("w") as out:
        for i, (vector, topic) in enumerate(zip(vectors, topics, strict=True)):
            line = {"doc": f"n{i}", "body": f"note {i}", "vector": vector.round(5).tolist()}
            out.write(json.dumps({**line, "topic": int(topic), "odd": bool(i % 2)}) + "\n")
    return path


def test_build_and_info_ivfpq(vector_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "index"
    built = sits_index(
        "build",
        "--corpus",
        vector_corpus,
        "--out",
        out,
        "--kind",
        "ivfpq",
        "--id-field",
        "doc",
        "--text-field",
        "body",
        "--nlist",
        "64",
    )
    assert built.returncode == 0, built.stderr
    assert "training IVF64,PQ4x8" in built.stderr  # progress goes to stderr
    manifest = json.loads(built.stdout)
    assert manifest["kind"] == "ivfpq"
    assert (manifest["dimension"], manifest["count"], manifest["metric"]) == (32, 12_000, "cosine")
    assert manifest["embedding_model"] is None  # vectors were given, nothing was embedded
    assert manifest["params"]["nlist"] == 64
    assert manifest["params"]["nprobe"] >= 1
    assert manifest["measured"]["recall_at_10"] >= 0.95
    assert manifest["filter_fields"] == ["odd", "topic"]
    assert manifest["digest"].startswith("sha256:")

    info = sits_index("info", out, "--verify")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout) == manifest
    assert "digest verified" in info.stderr

    again = sits_index("build", "--corpus", vector_corpus, "--out", out)
    assert again.returncode == 2
    assert "already holds an index" in again.stderr

    with (out / "docs.jsonl").open("r+b") as docs:  # a partially copied volume
        docs.seek(10)
        docs.write(b"#")
    broken = sits_index("info", out, "--verify")
    assert broken.returncode == 1
    assert "digest mismatch" in broken.stderr


def test_auto_picks_hnsw_for_a_small_corpus(vector_corpus: Path, tmp_path: Path) -> None:
    small = tmp_path / "small.jsonl"
    small.write_text("".join(vector_corpus.read_text().splitlines(keepends=True)[:500]))
    built = sits_index("build", "--corpus", small, "--out", tmp_path / "i", "--id-field", "doc")
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["kind"] == "hnsw"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n', "duplicate id '1'"),
        ('{"id": 1, "vector": [1, 0]}\n{"id": 2, "vector": [1]}\n', "the same dimension"),
        ('{"id": 1, "vector": [0, 0]}\n', "all zeros"),
        ("nonsense\n", "corpus.jsonl:1"),
    ],
)
def test_build_rejects_bad_corpora(tmp_path: Path, content: str, message: str) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(content)
    result = sits_index("build", "--corpus", corpus, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_info_of_a_directory_without_index(tmp_path: Path) -> None:
    result = sits_index("info", tmp_path)
    assert result.returncode == 1
    assert "manifest.json does not exist" in result.stderr


TEXTS = {
    "refund": "Refunds are paid back to the original card within five working days.",
    "shipping": "Parcels ship from our warehouse every weekday and arrive in two to four days.",
    "password": "To reset your password, open settings and choose 'forgot password'.",
    "warranty": "Every device carries a two-year warranty against manufacturing defects.",
    "battery": "The battery lasts about ten hours of video playback on a full charge.",
    "store": "Our shop in the city centre opens at nine and closes at six.",
    "invoice": "Invoices can be downloaded as PDF from the orders page of your account.",
    "cancel": "You can cancel an order free of charge until it has been shipped.",
    "privacy": "We never sell personal data; see the privacy notice for details.",
    "gift": "Gift cards are valid for three years and can be used online or in store.",
}


# Two cold loads of torch and MiniLM (the subprocess and this process) on two cores.
@pytest.mark.timeout(300)
async def test_text_corpus_embedded_with_minilm_answers_text_queries(tmp_path: Path) -> None:
    corpus = tmp_path / "faq.jsonl"
    lines = [{"id": key, "text": text, "section": "faq"} for key, text in TEXTS.items()]
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "index"
    built = sits_index("build", "--corpus", corpus, "--out", out)
    assert built.returncode == 0, built.stderr
    manifest = json.loads(built.stdout)
    assert (manifest["kind"], manifest["dimension"]) == ("hnsw", 384)
    assert manifest["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"

    from sits_inference.cache.embedding import default_embedder

    embedder = default_embedder()
    doc_vectors = embedder.embed(list(TEXTS.values()))
    service = VectorService(VectorConfig(out), metrics=CacheMetrics())
    async with serving(service) as client:
        questions = {
            "How do I get my money back?": "refund",
            "When will my package be delivered?": "shipping",
            "I forgot my login credentials": "password",
            "How long does a charge last?": "battery",
        }
        for question, expected in questions.items():
            response = await client.post("/v1/retrieve", json={"query": question, "k": 10})
            assert response.status == 200
            body = await response.json()
            ids = [r["id"] for r in body["data"]]
            assert ids[0] == expected
            # Same ranking as exact cosine search over the same embeddings.
            exact = np.argsort(-(doc_vectors @ embedder.embed([question])[0]))
            assert ids == [list(TEXTS)[i] for i in exact]
            assert body["data"][0]["metadata"] == {"section": "faq"}
            assert body["model"] == "sentence-transformers/all-MiniLM-L6-v2"
