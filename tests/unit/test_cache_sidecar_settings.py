"""sits-cache settings: the operator's environment, flags, and errors that name the culprit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sits_inference.cache.settings import (
    OPTIONS,
    AdapterEntry,
    SettingsError,
    SidecarSettings,
    load_settings,
    parse_duration,
    parse_size,
)

ROOT = Path(__file__).resolve().parents[2]
# What sits_operator.core.render._cache_env renders for a default variant.
OPERATOR_ENV = {
    "SITS_CACHE_LISTEN": "0.0.0.0:8080",
    "SITS_CACHE_UPSTREAM": "http://127.0.0.1:8000",
    "SITS_CACHE_MODEL": "demo-chat",
    "SITS_CACHE_REVISION": "r7",
    "SITS_CACHE_VARIANT": "canary",
    "SITS_CACHE_NAMESPACE": "prod",
    "SITS_CACHE_DEPLOYMENT": "demo",
    "SITS_CACHE_SEMANTIC_ENABLED": "true",
    "SITS_CACHE_SEMANTIC_THRESHOLD": "0.8",
    "SITS_CACHE_SEMANTIC_TTL": "1h",
    "SITS_CACHE_SEMANTIC_MAX_ENTRIES": "100000",
    "SITS_CACHE_SEMANTIC_NON_DETERMINISTIC": "false",
    "SITS_CACHE_VECTOR_ENABLED": "false",
    "SITS_CACHE_VECTOR_INDEX": "",
    "SITS_CACHE_VECTOR_HOT_MIN_HITS": "50",
    "SITS_CACHE_VECTOR_HOT_WINDOW": "1h",
    "SITS_CACHE_LORA_MAX_RESIDENT": "4",
    "SITS_CACHE_LORA_MAX_CPU_LORAS": "4",
    "SITS_CACHE_LORA_ADAPTERS": "[]",
    "SITS_CACHE_STATE_DIR": "/var/lib/sits/state",
}


def test_the_operators_rendering_parses_into_the_expected_settings() -> None:
    settings = load_settings([], OPERATOR_ENV)
    assert (settings.host, settings.port) == ("0.0.0.0", 8080)
    assert settings.upstream == "http://127.0.0.1:8000"
    assert (settings.model, settings.revision, settings.variant) == ("demo-chat", "r7", "canary")
    assert (settings.namespace, settings.deployment) == ("prod", "demo")
    assert settings.semantic_enabled is True
    assert settings.semantic_threshold == 0.8
    assert settings.semantic_ttl_s == 3600.0
    assert settings.semantic_max_entries == 100_000
    assert settings.vector_enabled is False
    assert settings.vector_index is None
    assert settings.lora_adapters == ()
    assert settings.vector_stats_path == Path("/var/lib/sits/state/vector-index-stats.json")


def _rendered_sidecar_env() -> dict[str, str]:
    from sits_operator.core.render import render_children
    from sits_operator.model.settings import OperatorSettings
    from tests.unit.factories import OWNER, spec

    manifests = render_children(OWNER, spec(), OperatorSettings())
    pod = next(m for m in manifests if m["kind"] == "Deployment")["spec"]["template"]["spec"]
    sidecar = next(c for c in pod["containers"] if c["name"] == "sits-cache")
    return {e["name"]: e["value"] for e in sidecar["env"]}


def test_every_variable_the_operator_renders_is_an_option_and_parses() -> None:
    rendered = _rendered_sidecar_env()
    known = {option.variable for option in OPTIONS}
    assert set(rendered) <= known, set(rendered) - known
    assert set(rendered) == set(OPERATOR_ENV), "keep OPERATOR_ENV in step with the operator"
    settings = load_settings([], rendered)
    assert settings.lora_max_cpu_loras == int(rendered["SITS_CACHE_LORA_MAX_CPU_LORAS"])


def test_the_operator_renders_l1s_own_defaults() -> None:
    """One default threshold, chosen from the L1 benchmark's curve, and one capacity: the
    CRD, the operator's model and the sidecar's library must not drift apart (they did
    once: 0.9 against 0.80, and 100,000 against 10,000 entries)."""
    from sits_inference.cache.semantic import DEFAULT_THRESHOLD, SemanticConfig
    from sits_operator.model.spec import SemanticCache

    assert SemanticCache().similarity_threshold == DEFAULT_THRESHOLD
    assert SemanticCache().max_entries == SemanticConfig().max_entries
    assert float(_rendered_sidecar_env()["SITS_CACHE_SEMANTIC_THRESHOLD"]) == DEFAULT_THRESHOLD
    crd = yaml.safe_load((ROOT / "crds" / "sitsdeployment.yaml").read_text())
    version = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    variant = version["properties"]["spec"]["properties"]["variants"]["items"]
    semantic = variant["properties"]["cache"]["properties"]["semantic"]
    assert semantic["properties"]["similarityThreshold"]["default"] == DEFAULT_THRESHOLD


def test_nothing_set_gives_the_documented_defaults() -> None:
    assert load_settings([], {}) == SidecarSettings()


def test_a_flag_wins_over_its_variable() -> None:
    settings = load_settings(
        ["--semantic-threshold", "0.75", "--listen", "127.0.0.1:0"], OPERATOR_ENV
    )
    assert settings.semantic_threshold == 0.75
    assert settings.port == 0


def test_adapters_from_the_operators_json() -> None:
    adapters = [
        {"name": "support", "source": "/var/lib/sits/volumes/a/support", "pinned": True},
        {"name": "legal", "source": "/data/legal", "digest": "sha256:" + "a" * 64},
    ]
    env = {**OPERATOR_ENV, "SITS_CACHE_LORA_ADAPTERS": json.dumps(adapters)}
    assert load_settings([], env).lora_adapters == (
        AdapterEntry("support", "/var/lib/sits/volumes/a/support", None, True),
        AdapterEntry("legal", "/data/legal", "sha256:" + "a" * 64, False),
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5h", 5400.0),
        ("2m0.5s", 120.5),
        ("45", 45.0),
        ("0.5", 0.5),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "size"), [("1024", 1024), ("256Mi", 256 << 20), ("1Gi", 1 << 30), ("500M", 5 * 10**8)]
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("SITS_CACHE_SEMANTIC_THRESHOLD", "1.5", "between 0 and 1"),
        ("SITS_CACHE_SEMANTIC_THRESHOLD", "-0.1", "between 0 and 1"),
        ("SITS_CACHE_SEMANTIC_THRESHOLD", "high", "could not convert"),
        ("SITS_CACHE_SEMANTIC_TTL", "1 hour", "duration"),
        ("SITS_CACHE_SEMANTIC_TTL", "1d", "duration"),
        ("SITS_CACHE_SEMANTIC_TTL", "0s", "greater than zero"),
        ("SITS_CACHE_SEMANTIC_TTL", "", "duration"),
        ("SITS_CACHE_SEMANTIC_ENABLED", "maybe", "true or false"),
        ("SITS_CACHE_SEMANTIC_MAX_ENTRIES", "0", "at least 1"),
        ("SITS_CACHE_SEMANTIC_MAX_ENTRIES", "ten", "invalid literal"),
        ("SITS_CACHE_SEMANTIC_MAX_BYTES", "256MB", "byte count"),
        ("SITS_CACHE_VECTOR_HOT_WINDOW", "soon", "duration"),
        ("SITS_CACHE_LISTEN", "8080", "HOST:PORT"),
        ("SITS_CACHE_LISTEN", "0.0.0.0:99999", "HOST:PORT"),
        ("SITS_CACHE_UPSTREAM", "127.0.0.1:8000", "http:// URL"),
        ("SITS_CACHE_UPSTREAM", "http://127.0.0.1:8000/v1", "without a path"),
        ("SITS_CACHE_LORA_ADAPTERS", "{not json", "not JSON"),
        ("SITS_CACHE_LORA_ADAPTERS", '{"name": "a"}', "JSON list"),
        ("SITS_CACHE_LORA_ADAPTERS", '[{"name": "a"}]', "name and source"),
        ("SITS_CACHE_LORA_ADAPTERS", '[{"name":"a","source":"/a","pinned":"yes"}]', "pinned"),
        (
            "SITS_CACHE_LORA_ADAPTERS",
            '[{"name":"a","source":"/a"},{"name":"a","source":"/b"}]',
            "unique",
        ),
        ("SITS_CACHE_LOG_LEVEL", "LOUD", "DEBUG"),
    ],
)
def test_bad_values_name_their_variable_and_say_what_is_expected(
    variable: str, value: str, expected: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings([], {**OPERATOR_ENV, variable: value})
    assert str(caught.value).startswith(f"{variable}={value!r}: ")
    assert expected in str(caught.value)


def test_a_bad_flag_names_the_flag() -> None:
    with pytest.raises(SettingsError, match=r"^--semantic-ttl='forever': "):
        load_settings(["--semantic-ttl", "forever"], OPERATOR_ENV)


def test_vector_enabled_without_an_index_names_the_index_variable() -> None:
    env = {**OPERATOR_ENV, "SITS_CACHE_VECTOR_ENABLED": "true"}
    with pytest.raises(SettingsError, match=r"^SITS_CACHE_VECTOR_INDEX must name"):
        load_settings([], env)


def test_more_pinned_adapters_than_slots_is_refused() -> None:
    adapters = [{"name": f"a{i}", "source": f"/a{i}", "pinned": True} for i in range(3)]
    env = {
        **OPERATOR_ENV,
        "SITS_CACHE_LORA_ADAPTERS": json.dumps(adapters),
        "SITS_CACHE_LORA_MAX_RESIDENT": "2",
    }
    with pytest.raises(SettingsError, match=r"^SITS_CACHE_LORA_MAX_RESIDENT=2: fewer slots"):
        load_settings([], env)
