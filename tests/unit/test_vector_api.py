"""Parsing POST /v1/retrieve bodies, filter values and corpus lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sits_inference.cache.vector.api import check_dimension, parse_request
from sits_inference.cache.vector.corpus import CorpusError, read_corpus
from sits_inference.cache.vector.docs import (
    DocStore,
    Document,
    FilterError,
    FilterIndex,
    value_key,
    write_documents,
    write_filters,
)
from sits_inference.openai.errors import ApiError


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        (b"{not json", "invalid_json", None),
        (b"[1, 2]", "invalid_json", None),
        (b"{}", "missing_query", "query"),
        (b'{"query": "a", "vector": [1.0]}', "missing_query", "query"),
        (b'{"query": ""}', "invalid_query", "query"),
        (b'{"query": 3}', "invalid_query", "query"),
        (b'{"vector": []}', "invalid_vector", "vector"),
        (b'{"vector": [1, "x"]}', "invalid_vector", "vector"),
        (b'{"vector": [true, 1]}', "invalid_vector", "vector"),
        (b'{"vector": [0, 0, 0]}', "invalid_vector", "vector"),
        (b'{"vector": [1e999, 1]}', "invalid_vector", "vector"),  # inf
        (b'{"vector": [1' + b"0" * 400 + b", 1]}", "invalid_vector", "vector"),  # int overflow
        (b'{"query": "a", "k": 0}', "k_out_of_range", "k"),
        (b'{"query": "a", "k": 101}', "k_out_of_range", "k"),
        (b'{"query": "a", "k": 2.5}', "invalid_type", "k"),
        (b'{"query": "a", "k": true}', "invalid_type", "k"),
        (b'{"query": "a", "filter": [1]}', "invalid_filter", "filter"),
        (b'{"query": "a", "filters": {"x": 1}}', "unknown_field", "filters"),
    ],
)
def test_bad_requests_are_400_with_the_offending_parameter(
    body: bytes, code: str, param: str | None
) -> None:
    with pytest.raises(ApiError) as caught:
        parse_request(body, max_k=100)
    err = caught.value
    assert err.status == 400
    assert err.code == code
    assert err.param == param
    assert json.loads(err.body())["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("body", "k", "text", "conditions"),
    [
        (b'{"query": "refund policy"}', 10, "refund policy", {}),
        (b'{"query": "x", "k": 100, "filter": {"lang": "en"}}', 100, "x", {"lang": "en"}),
        (b'{"vector": [1, 2.5], "k": 1, "filter": null}', 1, None, {}),
    ],
)
def test_good_requests(body: bytes, k: int, text: str | None, conditions: dict[str, Any]) -> None:
    request = parse_request(body, max_k=100)
    assert (request.k, request.text, dict(request.filter)) == (k, text, conditions)
    assert (request.vector is None) == (text is not None)


def test_huge_vector_values_keep_their_direction() -> None:
    request = parse_request(b'{"vector": [3e38, 4e38]}', max_k=10)
    assert request.vector is not None
    assert check_dimension(request.vector, 2).tolist() == pytest.approx([0.6, 0.8])


def test_query_vectors_are_checked_against_the_index_dimension_and_normalised() -> None:
    with pytest.raises(ApiError) as caught:
        check_dimension(np.ones(3, dtype=np.float32), 4)
    assert (caught.value.status, caught.value.code) == (400, "wrong_dimension")
    unit = check_dimension(np.array([3.0, 4.0], dtype=np.float32), 2)
    assert unit.tolist() == pytest.approx([0.6, 0.8])


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1, 1.0, True),
        ("1", 1, False),
        (True, 1, False),
        (None, "null", False),
        (2.5, 2.5, True),
        ("é", "é", True),
    ],
)
def test_filter_value_keys(a: Any, b: Any, same: bool) -> None:
    assert (value_key(a) == value_key(b)) is same


@pytest.mark.parametrize("value", [[1], {"a": 1}, float("nan")])
def test_non_scalar_values_are_not_filterable(value: Any) -> None:
    assert value_key(value) is None


def test_documents_and_filters_round_trip(tmp_path: Path) -> None:
    docs = [
        Document("a", "alpha", {"lang": "en", "year": 2024, "tags": ["x"]}),
        Document("b", None, {"lang": "de", "year": 2024}),
        Document("c", "gamma ü", {"lang": "en", "year": 2023.0}),
        Document("d", "delta", {}),
    ]
    write_documents(tmp_path, docs, len(docs))
    fields = write_filters(tmp_path, [d.metadata for d in docs])
    assert fields == ("lang", "year")  # "tags" is a list: not filterable
    store = DocStore(tmp_path)
    assert store.get([2, 0]) == [docs[2], docs[0]]
    assert store.byte_range(1, 3)[1] - store.byte_range(1, 3)[0] == sum(
        len(d.to_line()) for d in docs[1:3]
    )
    filters = FilterIndex(tmp_path)
    assert filters.match({"lang": "en"}).tolist() == [0, 2]
    assert filters.match({"lang": "en", "year": 2023}).tolist() == [2]
    assert filters.match({"year": 2024, "lang": "fr"}).tolist() == []
    with pytest.raises(FilterError, match="tags"):
        filters.match({"tags": "x"})
    with pytest.raises(FilterError, match="string, number or bool"):
        filters.match({"lang": ["en"]})
    store.close()


def test_fields_with_too_many_values_are_not_filterable(tmp_path: Path) -> None:
    metadata = [{"uid": f"u{i}", "kind": i % 2} for i in range(50)]
    assert write_filters(tmp_path, metadata, max_values=10) == ("kind",)
    assert write_filters(tmp_path, metadata, fields=["uid"], max_values=10) == ("uid",)


def _corpus(tmp_path: Path, *lines: Any) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_corpus_lines_become_documents(tmp_path: Path) -> None:
    path = _corpus(
        tmp_path,
        {"id": "x1", "text": "one", "lang": "en"},
        "",
        {"text": "two", "metadata": {"lang": "de"}, "ignored": 1},
    )
    corpus = read_corpus(path)
    assert corpus.vectors is None
    assert corpus.documents == [
        Document("x1", "one", {"lang": "en"}),
        Document("1", "two", {"lang": "de"}),
    ]


def test_corpus_with_vectors(tmp_path: Path) -> None:
    path = _corpus(tmp_path, {"id": 1, "vector": [1, 0]}, {"id": 2, "vector": [0, 1]})
    assert read_corpus(path).vectors == [[1, 0], [0, 1]]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{broken"], ":1:"),
        ([[1, 2]], "not a JSON object"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "duplicate id 'a'"),
        ([{"id": "a", "vector": [1]}, {"id": "b", "text": "y"}], "every line"),
        ([{"id": "a", "text": "y"}, {"id": "b", "vector": [1]}], "every line"),
        ([{"id": "a"}], "no `text`"),
        ([{"id": "a", "text": 5}], "must be a string"),
        ([{"id": [1], "text": "x"}], "`id` must be"),
        ([""], "no documents"),
    ],
)
def test_bad_corpus_lines_name_the_line(tmp_path: Path, lines: list[Any], message: str) -> None:
    with pytest.raises(CorpusError, match=message):
        read_corpus(_corpus(tmp_path, *lines))
