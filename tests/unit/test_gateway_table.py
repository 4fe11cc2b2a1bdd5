"""The static routing file: its shape, its errors, and reloads within a second."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from sits_inference.gateway.sources import MemorySource, RoutingSource
from sits_inference.gateway.sources.static import StaticFileSource, load_table
from sits_inference.gateway.table import (
    EMPTY_TABLE,
    StickyPolicy,
    TableError,
    VariantRoute,
    endpoint_url,
    table_from_document,
)

DOC: dict[str, Any] = {
    "namespace": "demo",
    "deployment": "chat",
    "model": "chat",
    "models": ["chat-lora"],
    "sticky": {"header": "X-Conversation", "useOpenAIUser": False},
    "variants": [
        {"name": "v1", "weight": 90, "endpoints": ["http://127.0.0.1:8001/", "127.0.0.1:8002"]},
        {"name": "v2", "weight": 10, "endpoints": ["127.0.0.1:8003"]},
    ],
}


def test_a_full_document_parses() -> None:
    table = table_from_document(DOC)
    assert (table.namespace, table.deployment) == ("demo", "chat")
    assert table.models == frozenset({"chat", "chat-lora"})
    assert table.sticky == StickyPolicy(header="x-conversation", use_openai_user=False)
    assert table.variants == (
        VariantRoute("v1", 90, ("http://127.0.0.1:8001", "http://127.0.0.1:8002")),
        VariantRoute("v2", 10, ("http://127.0.0.1:8003",)),
    )
    assert table.variant("v2") == table.variants[1]
    assert table.variant("v3") is None


def test_defaults_namespace_no_model_check_and_no_sticky_override() -> None:
    table = table_from_document({"deployment": "d", "variants": [{"name": "v1"}]})
    assert table.namespace == "default"
    assert table.knows_model("anything")
    assert table.sticky is None
    assert table.variants == (VariantRoute("v1", 0, ()),)


def test_known_models_are_checked() -> None:
    table = table_from_document(DOC)
    assert table.knows_model("chat-lora")
    assert not table.knows_model("gpt-4")


def broken(**changes: Any) -> dict[str, Any]:
    return {**DOC, **changes}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "must be a mapping"),
        (broken(variants=[]), "non-empty list"),
        (broken(variants="v1"), "non-empty list"),
        (broken(deployment=""), "'deployment'"),
        (broken(variants=[{"weight": 1}]), "'name'"),
        (broken(variants=[{"name": "v1", "weight": -1}]), "weight"),
        (broken(variants=[{"name": "v1", "weight": True}]), "weight"),
        (broken(variants=[{"name": "v1", "weight": 1.5}]), "weight"),
        (broken(variants=[{"name": "v1", "endpoints": "127.0.0.1:1"}]), "endpoints"),
        (broken(variants=[{"name": "v1", "endpoints": [1]}]), "endpoints"),
        (broken(variants=[{"name": "v1"}, {"name": "v1"}]), "twice"),
        (broken(variants=["v1"]), "mapping"),
        (broken(model=5), "model"),
        (broken(sticky={"header": 3}), "sticky"),
        (broken(sticky="x"), "sticky"),
    ],
)
def test_invalid_documents_say_what_is_wrong(doc: object, message: str) -> None:
    with pytest.raises(TableError, match=message):
        table_from_document(doc)


@pytest.mark.parametrize(
    ("address", "port", "url"),
    [
        ("10.0.0.1", 8000, "http://10.0.0.1:8000"),
        ("fd00::1", 8000, "http://[fd00::1]:8000"),
        ("127.0.0.1:9", None, "http://127.0.0.1:9"),
        ("https://example.internal/", None, "https://example.internal"),
    ],
)
def test_endpoint_urls(address: str, port: int | None, url: str) -> None:
    assert endpoint_url(address, port) == url


def test_json_files_load_like_yaml(tmp_path: Path) -> None:
    path = tmp_path / "routes.json"
    path.write_text(json.dumps(DOC))
    assert load_table(path) == table_from_document(DOC)
    with pytest.raises(TableError, match=r"missing\.json"):
        load_table(tmp_path / "missing.json")


def test_sources_satisfy_the_protocol(tmp_path: Path) -> None:
    assert isinstance(MemorySource(), RoutingSource)
    assert isinstance(StaticFileSource(tmp_path / "r.yaml"), RoutingSource)
    memory = MemorySource()
    assert not memory.ready
    memory.set(table_from_document(DOC))
    assert memory.ready


def write(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(doc))


async def test_the_file_source_follows_changes_within_a_second(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    write(path, DOC)
    source = StaticFileSource(path)
    await source.start()
    try:
        assert source.ready
        assert source.current().variants[1].weight == 10
        changed = broken(
            variants=[{**DOC["variants"][0], "weight": 50}, {"name": "v2", "weight": 50}]
        )
        write(path, changed)
        written = time.monotonic()
        while source.current().variants[1].weight != 50:
            assert time.monotonic() - written < 1.0, "the change was not picked up within 1 s"
            await asyncio.sleep(0.02)
    finally:
        await source.close()


async def test_a_broken_file_keeps_the_last_good_table(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    write(path, DOC)
    source = StaticFileSource(path, poll_interval=0.01)
    await source.start()
    try:
        good = source.current()
        for bad in ("variants: [", "{}", ""):
            path.write_text(bad)
            assert not source.poll()
            assert source.current() is good
        path.unlink()
        assert not source.poll()
        assert source.current() is good
    finally:
        await source.close()


async def test_a_source_that_cannot_load_at_start_fails_loudly(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text("variants: nope")
    source = StaticFileSource(path)
    with pytest.raises(TableError):
        await source.start()
    assert source.current() is EMPTY_TABLE
    await source.close()
