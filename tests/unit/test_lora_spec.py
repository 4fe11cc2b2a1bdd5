"""Adapter configuration, versioned names and content digests."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from sits_inference.cache.lora import AdapterSpec, LoraConfig, parse_adapters
from sits_inference.cache.lora.adapter import resolve_version
from sits_inference.cache.lora.spec import (
    directory_digest,
    short_digest,
    split_versioned,
    versioned_name,
    weights_digest,
)

HEX64 = "3f2a9c1d04e7" + "0" * 52


@pytest.fixture
def adapter_dir(tmp_path: Path) -> Path:
    root = tmp_path / "support-bot"
    root.mkdir()
    (root / "adapter_config.json").write_text('{"r": 8, "peft_type": "LORA"}')
    (root / "adapter_model.safetensors").write_bytes(b"\x01\x02weights" * 100)
    return root


@pytest.mark.parametrize(
    ("digest", "short"),
    [
        (f"sha256:{HEX64}", "3f2a9c1d04e7"),
        (HEX64.upper(), "3f2a9c1d04e7"),
        ("3f2a9c1d04e7", "3f2a9c1d04e7"),
    ],
)
def test_short_digest(digest: str, short: str) -> None:
    assert short_digest(digest) == short


@pytest.mark.parametrize("digest", ["", "sha256:", "3f2a9c", "sha256:xyz" + "0" * 60])
def test_short_digest_rejects(digest: str) -> None:
    with pytest.raises(ValueError, match="hex digits"):
        short_digest(digest)


@pytest.mark.parametrize(
    ("served", "parsed"),
    [
        ("support-bot@3f2a9c1d04e7", ("support-bot", "3f2a9c1d04e7")),
        ("org/bot.v2@3f2a9c1d04e7", ("org/bot.v2", "3f2a9c1d04e7")),
        ("support-bot", None),
        ("support-bot@3f2a", None),
        ("@3f2a9c1d04e7", None),
        ("support-bot@3F2A9C1D04E7", None),
    ],
)
def test_split_versioned(served: str, parsed: tuple[str, str] | None) -> None:
    assert split_versioned(served) == parsed


def test_versioned_name_round_trips() -> None:
    served = versioned_name("support-bot", HEX64)
    assert served == "support-bot@3f2a9c1d04e7"
    assert split_versioned(served) == ("support-bot", "3f2a9c1d04e7")


@pytest.mark.parametrize("name", ["", "a@b", "-lead", "sp ace", "x" * 129])
def test_spec_rejects_bad_names(name: str) -> None:
    with pytest.raises(ValueError, match="adapter name"):
        AdapterSpec(name, "/models/x")


def test_directory_digest_follows_content_not_location(adapter_dir: Path, tmp_path: Path) -> None:
    digest = directory_digest(adapter_dir)
    copy = shutil.copytree(adapter_dir, tmp_path / "elsewhere")
    assert directory_digest(copy) == digest
    (copy / "adapter_config.json").write_text('{"r": 8, "peft_type": "LORA", "alpha": 16}')
    assert directory_digest(copy) != digest
    shutil.rmtree(copy)
    copy = shutil.copytree(adapter_dir, tmp_path / "renamed")
    (copy / "adapter_model.safetensors").rename(copy / "other.safetensors")
    assert directory_digest(copy) != digest


def test_directory_digest_missing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        directory_digest(tmp_path / "nope")


def test_weights_digest_is_plain_sha256_of_the_weights(adapter_dir: Path) -> None:
    expected = hashlib.sha256((adapter_dir / "adapter_model.safetensors").read_bytes())
    assert weights_digest(adapter_dir) == expected.hexdigest()
    assert weights_digest(adapter_dir.parent) is None


def test_resolve_version_verifies_declared_digest(adapter_dir: Path) -> None:
    weights = weights_digest(adapter_dir)
    good = resolve_version(AdapterSpec("a", str(adapter_dir), digest=f"sha256:{weights}"))
    assert good.broken is None
    assert good.digest == directory_digest(adapter_dir)
    assert good.size == sum(f.stat().st_size for f in adapter_dir.iterdir())
    bad = resolve_version(AdapterSpec("a", str(adapter_dir), digest=f"sha256:{HEX64}"))
    assert bad.broken is not None
    assert "expects" in bad.broken


def test_resolve_version_of_a_remote_source() -> None:
    given = resolve_version(AdapterSpec("a", "org/remote-adapter", digest=f"sha256:{HEX64}"))
    assert given.digest == "3f2a9c1d04e7"
    unknown = resolve_version(AdapterSpec("a", "org/remote-adapter"))
    assert unknown.digest == hashlib.sha256(b"org/remote-adapter").hexdigest()


def test_parse_adapters() -> None:
    text = json.dumps(
        [
            {"name": "a", "source": "/m/a"},
            {"name": "b", "source": "/m/b", "digest": f"sha256:{HEX64}", "pinned": True},
        ]
    )
    assert parse_adapters(text) == (
        AdapterSpec("a", "/m/a"),
        AdapterSpec("b", "/m/b", digest=f"sha256:{HEX64}", pinned=True),
    )
    assert parse_adapters("") == ()
    assert parse_adapters("[]") == ()


@pytest.mark.parametrize("text", ['{"name": "a"}', '[{"name": "a"}]', "[1]"])
def test_parse_adapters_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"SITS_CACHE_LORA_ADAPTERS|needs"):
        parse_adapters(text)


def spec(name: str, pinned: bool = False) -> AdapterSpec:
    return AdapterSpec(name, f"/m/{name}", pinned=pinned)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_resident": 0, "adapters": ()}, "at least 1"),
        ({"max_resident": 2, "adapters": (spec("a"), spec("a"))}, "more than once"),
        ({"max_resident": 1, "adapters": (spec("a", True), spec("b"))}, "no slot"),
        ({"max_resident": 1, "adapters": (spec("a", True), spec("b", True))}, "no slot"),
        ({"max_resident": 4, "adapters": (), "slot_wait_s": 0}, "positive"),
        ({"max_resident": 4, "adapters": (), "upstream_cpu_loras": 3}, "max-cpu-loras"),
        ({"max_resident": 4, "adapters": (), "backoff_max_s": 0.5}, "backoff"),
    ],
)
def test_config_rejects(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LoraConfig(**kwargs)  # type: ignore[arg-type]


def test_config_accepts_all_pinned_when_they_fit() -> None:
    config = LoraConfig(2, (spec("a", True), spec("b", True)))
    assert config.max_resident == 2
